"""The shipped verifier's training: the public sources read into labelled examples with their
hard negatives and split, the two-way loss, and the one training loop (a resumed run ends in
the same weights as an uninterrupted one; a checkpoint of another run or a failed write is one
line). Trains only a tiny randomly initialised BERT on a few dozen pairs."""

from __future__ import annotations

import gzip
import hashlib
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from ragrig.core.errors import DataValidationError

torch = pytest.importorskip("torch")

from ragrig.train_verifier import public as P  # noqa: E402
from ragrig.train_verifier.sources import load_sources  # noqa: E402
from ragrig.training import loop  # noqa: E402


def _cfg(**kw):
    base = dict(
        sources=["snli", "fever_nli", "climate_fever", "wice"],
        seed=13,
        validation_share=0.25,
        max_per_source=None,
        max_evidence_words=180,
        hard_negatives=False,
        other_evidence_rate=0.0,
        distractor_rate=0.0,
        edit_rate=0.0,
    )
    base.update(kw)
    return SimpleNamespace(**base)


def _write_jsonl(path: Path, rows: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture
def cv_root(tmp_path: Path) -> Path:
    """A claim_verification folder with four of the sources, a few rows each."""
    root = tmp_path / "claim_verification"
    _write_jsonl(
        root / "generative_nli/snli/dev.jsonl",
        [
            {
                "premise": "A man plays a guitar on stage.",
                "hypothesis": "A man plays music.",
                "label": "entailment",
            },
            {
                "premise": "A man plays a guitar on stage.",
                "hypothesis": "A man sleeps.",
                "label": "contradiction",
            },
            {
                "premise": "A dog runs in a park.",
                "hypothesis": "The dog is a puppy.",
                "label": "neutral",
            },
            # the same pair again: dropped as a duplicate
            {
                "premise": "A dog runs in a park.",
                "hypothesis": "The dog is a puppy.",
                "label": "neutral",
            },
        ],
    )
    fever = root / "fever_nli"
    fever.mkdir(parents=True)
    (fever / "dev.txt").write_text(
        "entailment\tParis is the capital of France.\tParis is in France.\n"
        "not_entailment\tBerlin is a city in Germany.\tBerlin is in Spain.\n",
        encoding="utf-8",
    )
    (fever / "test.txt").write_text(
        # the snli pair once more, with another label: both copies dropped as a conflict
        "entailment\tA dog runs in a park.\tThe dog is a puppy.\n",
        encoding="utf-8",
    )
    _write_jsonl(
        root / "climate_fever/climate-fever.jsonl",
        [
            {
                "claim_id": "7",
                "claim": "Sea levels are rising.",
                "evidences": [
                    {
                        "evidence": "Global sea level rose about 20 cm since 1900.",
                        "evidence_label": "SUPPORTS",
                    },
                    {
                        "evidence": "The ocean covers most of the planet.",
                        "evidence_label": "NOT_ENOUGH_INFO",
                    },
                    {
                        "evidence": "Many species live in the sea.",
                        "evidence_label": "NOT_ENOUGH_INFO",
                    },
                ],
            }
        ],
    )
    sents = [f"Sentence number {i} about the town." for i in range(8)]
    sents[3] = "The town was founded in 1820 by farmers."
    _write_jsonl(
        root / "wice_dev/claim_dev.jsonl",
        [
            {
                "label": "supported",
                "supporting_sentences": [[3]],
                "claim": "Farmers founded the town in 1820.",
                "evidence": sents,
            },
            {
                "label": "not_supported",
                "supporting_sentences": [],
                "claim": "The town has a castle.",
                "evidence": sents,
            },
        ],
    )
    return root


def test_sources_map_labels_split_by_seed_and_drop_duplicates(cv_root):
    stats: dict = {}
    ex = load_sources(cv_root, _cfg(hard_negatives=True), stats)
    by = {(e.source, e.claim, e.kind): e for e in ex}
    assert by[("snli", "A man plays music.", "original")].label == "SUPPORT"
    assert by[("snli", "A man sleeps.", "original")].label == "CONTRADICT"
    # a two-way source's "not" is NOT_SUPPORTED, not a guess between the other two labels
    assert by[("fever_nli", "Berlin is in Spain.", "original")].label == "NOT_SUPPORTED"
    # the supporting sentence removed from the evidence: not addressed (Climate-FEVER) ...
    removed = by[("climate_fever", "Sea levels are rising.", "removed_support")]
    assert removed.label == "NOT_ADDRESSED" and "20 cm" not in removed.evidence
    # ... and not supported (WiCE), while the window with it supports
    wice = by[("wice", "Farmers founded the town in 1820.", "original")]
    assert wice.label == "SUPPORT" and "1820" in wice.evidence
    wice_removed = by[("wice", "Farmers founded the town in 1820.", "removed_support")]
    assert wice_removed.label == "NOT_SUPPORTED" and "1820" not in wice_removed.evidence
    # the duplicate snli row dropped; the pair fever_nli repeats with another label dropped too
    assert stats["duplicates_dropped"] == {"snli": 1}
    assert stats["label_conflicts_dropped"] == {"fever_nli": 1}
    assert ("snli", "The dog is a puppy.", "original") not in by
    # the split is a function of seed, source and group: the same every time, derived rows follow
    again = load_sources(cv_root, _cfg(hard_negatives=True))
    assert [(e.claim, e.split) for e in again] == [(e.claim, e.split) for e in ex]
    assert removed.split == by[("climate_fever", "Sea levels are rising.", "original")].split


def test_rule_edits_of_supported_claims(cv_root):
    ex = load_sources(cv_root, _cfg(sources=["snli"], hard_negatives=True, edit_rate=1.0))
    edited = {e.kind: e for e in ex if e.kind != "original"}
    assert edited["negation"].claim == "A man does not play music."
    assert edited["negation"].label == "CONTRADICT"


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: (r / "wice_dev/claim_dev.jsonl").unlink(), "source 'wice': file not found"),
        (
            lambda r: (r / "generative_nli/snli/dev.jsonl").write_text(
                '{"premise": "a", "hypothesis": "b", "label": "maybe"}\n'
            ),
            r"snli/dev.jsonl:1: unknown label 'maybe'",
        ),
        (
            lambda r: (r / "generative_nli/snli/dev.jsonl").write_text('{"premise": "a"\n'),
            r"snli/dev.jsonl:1: not JSON",
        ),
        (
            lambda r: (r / "fever_nli/dev.txt").write_text("entailment\tonly two cells\n"),
            r"fever_nli/dev.txt:1: needs 3 tab-separated cells",
        ),
    ],
)
def test_bad_source_files_are_one_line_naming_file_and_line(cv_root, mutate, message):
    mutate(cv_root)
    with pytest.raises(DataValidationError, match=message):
        load_sources(cv_root, _cfg())


def test_unknown_source_is_refused(cv_root):
    with pytest.raises(
        DataValidationError, match=r"unknown verifier training source\(s\) \['nope'\]"
    ):
        load_sources(cv_root, _cfg(sources=["nope"]))


def test_two_way_loss_reads_not_supported_as_contradict_or_not_addressed():
    logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 1.0, 2.0]])
    labels = torch.tensor([0, 3])
    p = torch.softmax(logits, dim=-1)
    expected = -(math.log(p[0, 0]) + math.log(p[1, 1] + p[1, 2])) / 2
    assert P.verifier_loss(logits, labels).item() == pytest.approx(expected, rel=1e-6)


def test_batches_are_bucketed_by_length_and_fixed_by_seed():
    lengths = [5, 50, 6, 49, 7, 48, 8, 47]
    a = loop.epoch_batches(lengths, 2, 13, 0, bucket=4)
    assert a == loop.epoch_batches(lengths, 2, 13, 0, bucket=4)
    assert a != loop.epoch_batches(lengths, 2, 13, 1, bucket=4)
    assert sorted(i for b in a for i in b) == list(range(8))
    # one run of 8 sorted by length: each batch holds neighbours in length
    assert all(abs(lengths[x] - lengths[y]) <= 2 for x, y in a)


def _examples(path: Path, n: int = 40) -> Path:
    rows = []
    for i in range(n):
        label = ("SUPPORT", "CONTRADICT", "NOT_ADDRESSED", "NOT_SUPPORTED")[i % 4]
        rows.append(
            {
                "source": "toy",
                "group": str(i),
                "claim": f"Claim {i} says the river is {'long ' * (i % 5)}wide.",
                "evidence": f"Evidence {i}: the river is wide and deep.",
                "label": label,
                "kind": "original",
                "split": "validation" if i % 8 == 0 else "train",
            }
        )
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_killed_run_resumes_to_the_same_weights(tiny_base, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RAGRIG_VERIFIER_BASE", str(tiny_base))
    examples = _examples(tmp_path / "examples.jsonl.gz")
    cfg = P.VerifierTraining(
        epochs=2.0, batch_size=4, max_length=32, learning_rate=5e-3, checkpoint_every_s=1e9
    )
    whole = P.train(examples, cfg, tmp_path / "whole", precision="fp32", threads=1)
    stopped = P.train(examples, cfg, tmp_path / "killed", precision="fp32", threads=1, stop_after=5)
    assert stopped == {"stopped_at": 5, "steps": 18}
    assert (tmp_path / "killed" / loop.CHECKPOINT).exists()
    resumed = P.train(examples, cfg, tmp_path / "killed", precision="fp32", threads=1)
    assert "resumed from" in capsys.readouterr().err
    assert resumed["training"]["resumed_at"] == 5
    assert whole["sha256"] == _sha(tmp_path / "whole" / P.WEIGHTS)
    # the same weights: every step after the kill computed as the uninterrupted run computes it,
    # up to the last bits that this CPU's kernels do not reproduce from one run to the next
    # (two fresh runs differ there too: docs/judge.md)
    from safetensors.torch import load_file

    tensors = load_file(str(tmp_path / "whole" / P.WEIGHTS))
    again = load_file(str(tmp_path / "killed" / P.WEIGHTS))
    assert tensors.keys() == again.keys()
    worst = max((tensors[k].float() - again[k].float()).abs().max().item() for k in tensors)
    assert worst <= 1e-3
    assert "bert.embeddings.word_embeddings.weight" not in tensors
    assert tensors["classifier.weight"].dtype == torch.float16
    assert whole["validation"]["toy"]["n"] == 5
    # a checkpoint of other settings is refused, not resumed
    other = P.VerifierTraining(epochs=2.0, batch_size=4, max_length=32, learning_rate=1e-3)
    with pytest.raises(loop.CheckpointError, match="belongs to another run"):
        P.train(examples, other, tmp_path / "killed", precision="fp32", threads=1)


def test_a_checkpoint_that_cannot_be_written_keeps_the_last_one(tmp_path, monkeypatch):
    path = tmp_path / loop.CHECKPOINT
    loop.save_checkpoint(path, {"fingerprint": "f", "step": 1})

    def full_disk(obj, f):
        Path(f).write_bytes(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(loop.CheckpointError, match="No space left on device.*previous one is kept"):
        loop.save_checkpoint(path, {"fingerprint": "f", "step": 2})
    monkeypatch.undo()
    assert loop.load_checkpoint(path, "f")["step"] == 1
    assert not path.with_name(path.name + ".tmp").exists()
    path.write_bytes(b"truncated")
    with pytest.raises(loop.CheckpointError, match="cannot be read"):
        loop.load_checkpoint(path, "f")
