"""The three training stages on `ragrig.training.loop`: a stage killed after a few steps and run
again resumes its checkpoint (kept beside the output, removed after the end) and ends in the
weights of an uninterrupted run; the bi-encoder's in-batch negatives leave out the passages
judged relevant. Trains a tiny randomly initialised BERT on the tiny fixtures: seconds."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ragrig.core.config import validate_section

torch = pytest.importorskip("torch")

from ragrig.training import fit  # noqa: E402

PROJECT = Path(__file__).resolve().parents[2]
TRAIN_FIXTURE = PROJECT / "tests" / "fixtures" / "tiny_beir_train"
TINY = PROJECT / "tests" / "fixtures" / "tiny_beir"


def _embed(base: Path, out: Path, **kw):
    from ragrig.train_embed.train import run_stage

    cfg = validate_section(
        "train_embed",
        {
            "enabled": True,
            "base_model": str(base),
            "epochs": 3.0,  # 5 examples in batches of 2: 3 steps an epoch, 9 in all
            "batch_size": 2,
            "learning_rate": 5e-3,
            "max_seq_length": 32,
            "hard_negatives_per_query": 1,
            "mining": {"depth": 5},
        },
    )
    dataset = validate_section("dataset", {"name": "tiny_train", "root": str(TRAIN_FIXTURE)})
    parse = validate_section("parse", {"method": "beir"})
    return run_stage(cfg, dataset, parse, out, threads=1, **kw)


def _rerank(base: Path, out: Path, **kw):
    from ragrig.train_rerank.train import run_stage

    cfg = validate_section(
        "train_rerank",
        {
            "enabled": True,
            "base_model": str(base),
            "epochs": 3.0,  # 12 pairs in batches of 4: 3 steps an epoch, 9 in all
            "batch_size": 4,
            "learning_rate": 5e-3,
            "max_length": 32,
            "negatives_per_query": 2,
            "mining": {"depth": 5},
        },
    )
    dataset = validate_section("dataset", {"name": "tiny_train", "root": str(TRAIN_FIXTURE)})
    parse = validate_section("parse", {"method": "beir"})
    return run_stage(cfg, dataset, parse, out, threads=1, **kw)


def _verifier(base: Path, out: Path, **kw):
    from ragrig.train_verifier.train import run_stage

    cfg = validate_section(
        "train_verifier",
        {
            "enabled": True,
            "base_model": str(base),
            "epochs": 3.0,  # 12 pairs in batches of 4: 3 steps an epoch, 9 in all
            "batch_size": 4,
            "learning_rate": 5e-3,
            "max_length": 32,
            "max_pairs": 12,
        },
    )
    dataset = validate_section(
        "dataset",
        {
            "name": "tiny",
            "root": str(TINY),
            "claims": {
                "files": ["original/claims_dev.jsonl"],
                "train": "original/claims_train.jsonl",
                "sentences": "original/sentences.jsonl",
            },
        },
    )
    return run_stage(cfg, dataset, out, threads=1, **kw)


@pytest.mark.parametrize(
    "run, steps",
    [(_embed, 9), (_rerank, 9), (_verifier, 9)],
    ids=["train_embed", "train_rerank", "train_verifier"],
)
def test_a_killed_stage_resumes_to_the_weights_of_an_uninterrupted_run(
    run, steps, tiny_base, tmp_path, capsys
):
    whole = run(tiny_base, tmp_path / "whole" / "out")
    assert whole["steps"] == steps and whole["resumed_at"] is None
    killed = tmp_path / "killed" / "out"
    with pytest.raises(fit.TrainingStopped, match=f"stopped at step 4 of {steps}"):
        run(tiny_base, killed, stop_after=4)
    # the output is not written; the checkpoint waits beside it
    assert not killed.exists()
    (ckpt,) = killed.parent.glob(".out.checkpoint-*")
    assert (ckpt / "checkpoint.pt").is_file()
    capsys.readouterr()
    resumed = run(tiny_base, killed)
    assert f"resumed from {ckpt / 'checkpoint.pt'} at step 4 of {steps}" in capsys.readouterr().err
    assert resumed["resumed_at"] == 4 and resumed["steps"] == steps
    # every step after the kill computed as the uninterrupted run computes it: the same bytes
    assert resumed["weights_sha256"] == whole["weights_sha256"]
    assert resumed["weights_sha256"] == fit.weights_sha256(killed / "model")
    assert resumed["weights_sha256"] != resumed["base_model"]["weights_sha256"]
    # the checkpoint is gone once the output is in place
    assert sorted(p.name for p in killed.parent.iterdir()) == ["out"]


def test_in_batch_negatives_leave_out_the_passages_judged_relevant():
    from ragrig.train_embed.train import in_batch_mask, ranking_loss

    # q1 twice (positives a, b), q2 with positive a too; hard negatives c, a, d
    mask = in_batch_mask(
        ["q1", "q1", "q2"], ["a", "b", "a", "c", "a", "d"], {"q1": {"a", "b"}, "q2": {"a"}}
    )
    assert mask.tolist() == [
        [False, True, True, False, True, False],  # b: relevant to q1; the a's after: copies
        [True, False, True, False, True, False],  # a: relevant to q1
        [True, False, False, False, True, False],  # the first a is q2's positive too
    ]
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    d = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [-1.0, 0.0], [1.0, 0.0], [0.0, -1.0]])
    loss = ranking_loss(q, d, mask, scale=2.0)
    # anchors 0 and 1: cosine 1 to the positive, -1 and 0 to c and d, scaled by 2;
    # anchor 2: cosine s to its positive and to b, -s to c and d (s = 1/sqrt(2))
    s = 2.0 * 0.5**0.5
    row0 = -math.log(math.exp(2) / (math.exp(2) + math.exp(-2) + 1))
    row2 = -math.log(math.exp(s) / (2 * math.exp(s) + 2 * math.exp(-s)))
    assert loss.item() == pytest.approx((2 * row0 + row2) / 3, rel=1e-6)


def test_a_stage_config_maps_to_the_loop_settings_and_a_probe_of_at_most_a_twentieth():
    cfg = validate_section("train_verifier", {"enabled": True})  # batch 16, 1 epoch
    s = fit.settings(cfg, 3000)
    assert (s.epochs, s.batch_size, s.learning_rate, s.warmup_ratio, s.seed) == (
        1.0,
        16,
        5e-5,
        0.1,
        13,
    )
    assert (s.weight_decay, s.precision, s.device, s.stop_after) == (0.0, "fp32", "cpu", None)
    # 188 steps: 6 probe batches; SciFact's 917 bi-encoder examples in 32s (29 steps): 1; 9: none
    assert s.probe_batches == 6
    embed = validate_section("train_embed", {"enabled": True})
    assert fit.settings(embed, 917, bucket_batches=1).probe_batches == 1
    assert fit.settings(embed, 288).probe_batches == 0
