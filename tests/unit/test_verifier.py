"""The trained claim verifier: its training pairs, deterministic training on the tiny fixture,
the verifier judge (evidence pre-selection, batching, bad input) and a clear error for a bad
model folder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ragrig.core.config import load_params
from ragrig.core.errors import ConfigError, DataValidationError
from ragrig.core.text import tokenize
from ragrig.judge import judge_all
from ragrig.judge.verifier import VerifierJudge
from ragrig.judge.verifier_model import Verifier
from ragrig.judge.windows import evidence_windows, preselect
from ragrig.train_verifier import data as D
from ragrig.train_verifier.config import TrainVerifierConfig

PROJECT = Path(__file__).resolve().parents[2]
TINY = PROJECT / "tests" / "fixtures" / "tiny_beir" / "original"
SCIFACT = PROJECT.parent / "shared" / "datasets" / "scifact" / "original"
# a few pairs, a few steps: seconds on 2 cores
TINY_CFG = TrainVerifierConfig(enabled=True, max_pairs=12, batch_size=4, epochs=1.0, seed=13)


def tiny_pairs(**kw) -> list[D.Pair]:
    claims = D.read_claims(TINY / "claims_train.jsonl")
    return D.build_pairs(claims, D.read_sentences(TINY / "sentences.jsonl"), **kw)


# --- training pairs ---------------------------------------------------------------------------


def test_pairs_rationale_negatives_and_perturbations():
    pairs = tiny_pairs()
    by = {(p.claim_id, p.kind): p for p in pairs}
    r = by[("101", "rationale")]
    assert (r.label, r.evidence) == ("SUPPORT", "Venus has a thick carbon dioxide atmosphere.")
    w = by[("101", "rationale_window")]
    assert w.evidence == (
        "Venus has a thick carbon dioxide atmosphere. "
        "Its surface pressure is ninety times that of Earth."
    )
    assert w.label == "SUPPORT"
    assert by[("102", "rationale")].label == "CONTRADICT"
    # two-sentence rationale, joined in order
    assert by[("107", "rationale")].evidence == (
        "Mitochondria produce ATP through oxidative phosphorylation. They carry their own DNA."
    )
    neg = by[("101", "negation")]
    assert (neg.claim, neg.label) == (
        "Venus does not have a dense atmosphere of carbon dioxide.",
        "CONTRADICT",
    )
    assert neg.evidence == r.evidence
    swap = by[("105", "swapped_entity")]  # a name taken from another document's claim
    assert (swap.claim, swap.label) == (
        "Statins reduce pH cholesterol and cardiovascular events.",
        "NOT_ADDRESSED",
    )
    rev = by[("103", "reversed_relation")]
    assert rev.claim == "Folate intake raises plasma homocysteine in healthy adults."
    assert rev.label == "CONTRADICT"
    # the same abstract's non-rationale sentence is not addressed; the rationale never is
    same = [p for p in pairs if p.claim_id == "101" and p.kind == "same_doc"]
    assert [p.evidence for p in same] == ["Its surface pressure is ninety times that of Earth."]
    assert all(p.label == "NOT_ADDRESSED" for p in same)
    # a claim without rationale: its cited abstract is not addressed
    assert by[("108", "no_evidence")].label == "NOT_ADDRESSED"
    assert {p.label for p in pairs} == {"SUPPORT", "CONTRADICT", "NOT_ADDRESSED"}
    assert tiny_pairs() == pairs  # deterministic


def test_pairs_split_evidence_is_still_supported():
    pairs = tiny_pairs()
    split = [p for p in pairs if p.kind == "rationale_split"]
    assert split and all(p.label in ("SUPPORT", "CONTRADICT") for p in split)
    p = next(p for p in split if p.claim_id == "109")
    assert p.evidence == "Oceans absorb carbon dioxide. Lowers seawater pH and harms corals."


def test_cap_pairs_is_seeded_and_bounded():
    pairs = tiny_pairs()
    a, b = D.cap_pairs(pairs, 10, 13), D.cap_pairs(pairs, 10, 13)
    assert a == b and len(a) == 10
    assert D.cap_pairs(pairs, 10, 14) != a


def test_balanced_cap_gives_each_label_and_kind_its_turn():
    """A plain sample keeps the built proportions (NOT_ADDRESSED the majority); the balanced
    cap takes labels in turn, and within a label its kinds in turn."""
    from collections import Counter

    pairs = tiny_pairs()
    built = Counter(p.label for p in pairs)
    assert built["NOT_ADDRESSED"] > built["SUPPORT"]
    n = 3 * min(built.values())
    capped = D.cap_pairs(pairs, n, 13, balance=True)
    assert len(capped) == n and len(set(capped)) == n
    assert Counter(p.label for p in capped) == {lab: n // 3 for lab in built}
    # NOT_ADDRESSED was built as other_doc 10, same_doc 6, swapped_entity 4, no_evidence 1: its
    # kinds take turns (no_evidence runs out after one), where a plain sample favours other_doc
    got = Counter(p.kind for p in capped if p.label == "NOT_ADDRESSED")
    assert got == {"other_doc": 3, "same_doc": 3, "swapped_entity": 3, "no_evidence": 1}
    plain = Counter(p.label for p in D.cap_pairs(pairs, n, 13))
    assert plain != {lab: n // 3 for lab in built}
    assert D.cap_pairs(pairs, n, 13, balance=True) == capped  # seeded
    assert D.cap_pairs(pairs, None, 13, balance=True) == D.cap_pairs(pairs, None, 13)


def test_rationale_outside_document_is_named(tmp_path):
    bad = tmp_path / "claims.jsonl"
    bad.write_text(
        json.dumps(
            {
                "id": 1,
                "claim": "x y z",
                "evidence": {"d01": [{"sentences": [7], "label": "SUPPORT"}]},
            }
        )
        + "\n"
    )
    with pytest.raises(
        DataValidationError, match=r"claims.jsonl:1: rationale sentences \[7\] outside document d01"
    ):
        D.build_pairs(D.read_claims(bad), D.read_sentences(TINY / "sentences.jsonl"))


def _ids_texts(path: Path) -> tuple[set[str], set[str]]:
    from ragrig.dataset.beir import iter_jsonl

    recs = [rec for _, rec in iter_jsonl(path)]
    return {str(r["id"]) for r in recs}, {str(r["claim"]).strip().lower() for r in recs}


@pytest.mark.parametrize("dataset, dropped", [("scifact", ["88", "871", "1291"]), ("tiny", [])])
def test_training_claims_disjoint_from_evaluated_and_probe_claims(dataset, dropped):
    """The claims the stage trains on hold no claim (by id or by text) of the dev/test files the
    pipeline evaluates on and the probe builder draws from (benchmarks/build_probes.py reads
    claims_dev and claims_test; its MTRAG probes are no SciFact claim). SciFact itself repeats
    three claim texts across splits under other ids: those training claims are dropped."""
    import sys

    import yaml

    from ragrig.train_verifier.train import held_out_files

    conf = yaml.safe_load((PROJECT / "conf" / "dataset" / f"{dataset}.yaml").read_text())
    conf = conf.get("dataset", conf)  # a dataset file that also chooses other groups: global
    root = PROJECT / conf["root"]
    if not root.exists():
        pytest.skip(f"{root} not present")
    train = root / conf["claims"]["train"]
    held_out = held_out_files(train)
    sys.path.insert(0, str(PROJECT / "benchmarks"))
    import build_probes

    probe_sources = [root / "original" / f for f in build_probes.SCIFACT_CLAIM_FILES]
    assert [p for p in probe_sources if p.exists()] == [p for p in held_out if p in probe_sources]
    assert held_out and train not in held_out
    kept, out = D.drop_held_out(D.read_claims(train), held_out)
    assert sorted(out, key=int) == dropped
    kept_ids = {c["id"] for c in kept}
    kept_text = {c["claim"].lower() for c in kept}
    for path in held_out:
        ids, text = _ids_texts(path)
        assert not kept_ids & ids, f"{path} shares claim ids with the training claims"
        assert not kept_text & text, f"{path} shares claim texts with the training claims"
    if dataset == "tiny":  # the pairs carry only kept training claim ids
        assert {p.claim_id for p in tiny_pairs()} <= kept_ids


# --- training ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> tuple[Path, dict]:
    from ragrig.train_verifier.train import train

    out = tmp_path_factory.mktemp("verifier")
    pairs = D.cap_pairs(tiny_pairs(), TINY_CFG.max_pairs, TINY_CFG.seed)
    return out, train(pairs, TINY_CFG, out, threads=2)


def test_training_is_deterministic(tiny_model, tmp_path):
    from ragrig.train_verifier.train import train, weights_sha256

    out, manifest = tiny_model
    assert manifest["pairs"] == 12 and sum(manifest["labels"].values()) == 12
    assert manifest["labels_order"] == ["SUPPORT", "CONTRADICT", "NOT_ADDRESSED"]
    assert manifest["weights_sha256"] == weights_sha256(out / "model")
    again = train(D.cap_pairs(tiny_pairs(), 12, 13), TINY_CFG, tmp_path, threads=2)
    assert again["weights_sha256"] == manifest["weights_sha256"]


def test_stage_without_training_data_writes_a_reasoned_manifest(tmp_path):
    from ragrig.core.config import validate_section
    from ragrig.train_verifier.train import run_stage

    dataset = validate_section("dataset", {"name": "other", "root": str(tmp_path)})
    manifest = run_stage(TINY_CFG, dataset, tmp_path / "out")
    assert manifest["trained"] is False
    with pytest.raises(ConfigError, match="names no verifier training data"):
        VerifierJudge(tmp_path / "out")


def test_bad_model_dir_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match=f"verifier model {tmp_path / 'nope'} does not exist"):
        VerifierJudge(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="has no config.json"):
        VerifierJudge(tmp_path / "empty")


# --- the judge --------------------------------------------------------------------------------


class Recorder:
    """Records the pairs it is asked to score; P(support) from a fixed table (default 0)."""

    def __init__(self, table: dict[tuple[str, str], float] | None = None):
        self.table = table or {}
        self.calls: list[list[tuple[str, str]]] = []

    def support(self, pairs):
        self.calls.append(list(pairs))
        return [self.table.get(p, 0.0) for p in pairs]


def test_preselect_top_windows_and_two_passage_join():
    contexts = [
        "Mars has two moons. Phobos is the larger one. Rovers explore the surface.",
        "Deimos orbits Mars slowly.",
    ]
    windows = evidence_windows(contexts, window=2)
    assert [w[1] for w in windows[:3]] == [
        "Mars has two moons.",
        "Mars has two moons. Phobos is the larger one.",
        "Phobos is the larger one.",
    ]
    words = set(tokenize(["Phobos and Deimos orbit Mars"])[0])
    top = preselect(words, windows, k=2)
    # best: the passage-2 sentence holding deimos, orbit, mars (3 words); then the passage-1
    # window holding mars and phobos (2); the two joined hold all four: a third candidate
    assert top == [
        "Deimos orbits Mars slowly.",
        "Mars has two moons. Phobos is the larger one.",
        "Deimos orbits Mars slowly. Mars has two moons. Phobos is the larger one.",
    ]
    assert preselect(set(tokenize(["quantum chromodynamics"])[0]), windows, k=3) == []


def test_verifier_judge_batches_claims_and_keeps_the_partition(reference):
    ex = reference["claim_faithfulness"]
    rec = Recorder(
        {
            ("Mars has two moons", "Mars has two moons, Phobos and Deimos."): 0.9,
            ("Phobos and Deimos orbit Mars", "Mars has two moons, Phobos and Deimos."): 0.8,
            ("Curiosity landed in 2012", "NASA's Curiosity rover landed on Mars in 2012."): 0.7,
            ("Mars has a thick atmosphere", "Mars has two moons, Phobos and Deimos."): 0.2,
        }
    )
    v = VerifierJudge(verifier=rec, support_threshold=0.5).judge("", ex["answer"], [ex["context"]])
    assert v.extracted == ex["claims"]
    assert [c in v.supported for c in v.extracted] == ex["supported"]
    assert v.score == ex["expected_faithfulness"] == 0.75
    assert len(rec.calls) == 1  # every claim of the answer in one batch
    assert v.claim_scores == (0.9, 0.8, 0.2, 0.7)
    assert v.soft_score == pytest.approx(0.65)


def test_entity_check_zeroes_a_claim_with_an_unseen_number():
    rec = Recorder(
        {("Curiosity landed in 2013", "NASA's Curiosity rover landed on Mars in 2012."): 0.95}
    )
    v = VerifierJudge(verifier=rec).judge(
        "", "Curiosity landed in 2013.", ["NASA's Curiosity rover landed on Mars in 2012."]
    )
    assert v.claim_scores == (0.0,) and v.score == 0.0
    off = VerifierJudge(verifier=rec, entity_check=False).judge(
        "", "Curiosity landed in 2013.", ["NASA's Curiosity rover landed on Mars in 2012."]
    )
    assert off.score == 1.0


def test_context_without_sentences_is_scored_unsupported_not_a_crash():
    rec = Recorder()
    v = VerifierJudge(verifier=rec).judge("", "Mars has two moons.", ["", "   "])
    assert (v.outcome, v.score, v.claim_scores) == ("scored", 0.0, (0.0,))
    assert "context has no sentences" in v.reason
    assert rec.calls == []  # nothing to read: no model call


def test_answer_of_only_citations_has_no_claims():
    v = VerifierJudge(verifier=Recorder()).judge("q", "[1] [2].", ["Mars has two moons."])
    assert (v.outcome, v.score) == ("no_claims", None)


def test_judge_all_writes_p_supported(reference):
    ex = reference["claim_faithfulness"]
    rec = Recorder({("Mars has two moons", "Mars has two moons, Phobos and Deimos."): 0.9})
    gens = pd.DataFrame(
        {
            "qid": ["q1"],
            "status": ["ok"],
            "answer": [ex["answer"]],
            "contexts": [json.dumps([ex["context"]])],
        }
    )
    out = judge_all(VerifierJudge(verifier=rec), gens, {"q1": ""}, progress=False)
    claims = json.loads(out.loc[0, "claims"])
    assert [c["p_supported"] for c in claims] == [0.9, 0.0, 0.0, 0.0]
    assert out.loc[0, "claim_support"] == 0.25
    # the composite's claims part is the answer-level score: the mean P(support), not the share
    assert out.loc[0, "answer_support"] == pytest.approx(0.9 / 4)
    # claims 0.4 and entity overlap 0.2 (every name and number is in the context),
    # renormalised without an LLM judge
    assert out.loc[0, "entity_overlap"] == 1.0
    assert out.loc[0, "faithfulness"] == pytest.approx((0.4 * 0.225 + 0.2 * 1.0) / 0.6)


def test_prefetch_scores_every_answer_in_one_call_and_judge_reads_it(reference):
    ex = reference["claim_faithfulness"]
    table = {
        ("Mars has two moons", "Mars has two moons, Phobos and Deimos."): 0.9,
        ("Curiosity landed in 2012", "NASA's Curiosity rover landed on Mars in 2012."): 0.7,
    }
    gens = pd.DataFrame(
        {
            "qid": ["q1", "q2", "q3"],
            "status": ["ok", "ok", "error"],
            "answer": [ex["answer"], "Curiosity landed in 2012.", ""],
            "contexts": [json.dumps([ex["context"]])] * 3,
        }
    )
    queries = {"q1": "", "q2": "", "q3": ""}
    first, second = Recorder(table), Recorder(table)
    alone = judge_all(VerifierJudge(verifier=first), gens[:1], queries, progress=False)
    judge_all(VerifierJudge(verifier=second), gens[1:2], queries, progress=False)
    rec = Recorder(table)
    out = judge_all(VerifierJudge(verifier=rec), gens, queries, progress=False)
    # both answers' pairs in one model call (the failed generation is not read), none after it
    assert rec.calls == [first.calls[0] + second.calls[0]] and len(rec.calls[0]) == 10
    assert out.loc[0, "claims"] == alone.loc[0, "claims"]
    assert out.loc[0, "claim_support"] == 0.5 and out.loc[1, "claim_support"] == 1.0
    assert list(out["status"]) == ["scored", "scored", "skipped"]
    # a claim not prefetched is scored when judged
    judge = VerifierJudge(verifier=rec)
    judge.prefetch([("", "Curiosity landed in 2012.", [ex["context"]])])
    v = judge.judge("", "Mars has two moons.", [ex["context"]])
    assert v.claim_scores == (0.9,) and len(rec.calls) == 3


def test_verifier_scores_each_pair_once_in_length_sorted_batches(tiny_model):
    out, _ = tiny_model
    verifier = Verifier(out, batch_size=2)
    seen = []
    predict = verifier.model.predict
    verifier.model.predict = lambda pairs, **kw: seen.append(list(pairs)) or predict(pairs, **kw)
    pairs = [
        ("Mars has two moons", "Mars has two moons, Phobos and Deimos, both small."),
        ("Moons", "Phobos."),
        ("Mars has two moons", "Mars has two moons, Phobos and Deimos, both small."),
        ("Curiosity landed", "Curiosity landed in 2012."),
    ]
    probs = verifier.probabilities(pairs)
    assert seen == [[pairs[1], pairs[3], pairs[0]]]  # shortest first, the duplicate once
    assert probs.shape == (4, 3) and (probs[0] == probs[2]).all()
    one = [Verifier(out).probabilities([pair])[0] for pair in pairs[:2]]
    assert np.allclose(probs[:2], one, atol=1e-5)


@pytest.mark.parametrize("quantize, atol", [("int8", 0.05), ("bf16", 0.01)])
def test_reduced_precision_verifier_scores_close_to_fp32(tiny_model, reference, quantize, atol):
    out, _ = tiny_model
    ex = reference["claim_faithfulness"]
    fp32 = VerifierJudge(out).judge("", ex["answer"], [ex["context"]]).claim_scores
    low = VerifierJudge(out, quantize=quantize)
    again = VerifierJudge(out, quantize=quantize).judge("", ex["answer"], [ex["context"]])
    assert low.verifier.quantize == quantize
    scores = low.judge("", ex["answer"], [ex["context"]]).claim_scores
    assert scores == again.claim_scores  # deterministic
    assert scores != fp32 and np.allclose(scores, fp32, atol=atol)
    with pytest.raises(ConfigError, match="quantize 'fp8'"):
        Verifier(out, quantize="fp8")


def test_claims_the_entity_check_rejects_never_reach_the_model(tiny_model):
    out, _ = tiny_model
    judge = VerifierJudge(out)
    seen = []
    support = judge.verifier.support
    judge.verifier.support = lambda pairs: seen.extend(pairs) or support(pairs)
    context = "Aspirin lowered fever within 24 hours in most patients of the trial."
    answer = "Aspirin lowered fever within 24 hours. Aspirin lowered fever within 25 hours."
    for prefetch in (False, True):
        seen.clear()
        if prefetch:
            assert judge.prefetch([("", answer, [context])]) == len(seen)
        v = judge.judge("", answer, [context])
        claims = {c for c, _ in seen}
        assert len(v.extracted) == 2 and claims == {v.extracted[0]}  # 25 is not in the context
        assert v.claim_scores[1] == 0.0 and v.claim_scores[0] > 0
        assert v.extracted[1] in v.unsupported


def test_trained_tiny_verifier_judges_deterministically(tiny_model, reference):
    out, _ = tiny_model
    ex = reference["claim_faithfulness"]
    judge = VerifierJudge(out)
    a = judge.judge("", ex["answer"], [ex["context"]])
    b = VerifierJudge(out).judge("", ex["answer"], [ex["context"]])
    assert a.extracted == ex["claims"]
    assert a.claim_scores == b.claim_scores and len(a.claim_scores) == 4
    assert all(0.0 <= s <= 1.0 for s in a.claim_scores)
    assert set(a.supported) | set(a.unsupported) == set(a.extracted)


def test_params_carry_the_verifier_section():
    params = load_params(PROJECT / "params.yaml")
    assert TrainVerifierConfig.model_validate(params["train_verifier"]).max_length == 128
    assert params["dataset"]["claims"]["train"] == "original/claims_train.jsonl"


def test_stage_switched_off_trains_nothing_and_says_why(tmp_path):
    from ragrig.core.config import validate_section
    from ragrig.train_verifier.train import run_stage

    dataset = validate_section("dataset", {"name": "tiny", "root": str(TINY.parent)})
    off = TINY_CFG.model_copy(update={"enabled": False})
    manifest = run_stage(off, dataset, tmp_path / "out")
    assert manifest["trained"] is False and "enabled is false" in manifest["reason"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["manifest.json"]
    with pytest.raises(ConfigError, match="enabled is false"):
        VerifierJudge(tmp_path / "out")


def test_support_is_read_by_label_name_not_by_position(tiny_model, tmp_path):
    """P(support) comes from the head's row that config.json names SUPPORT: the same model with
    its head rows (and id2label) permuted gives the same P(support) for every pair."""
    import shutil

    from safetensors.torch import load_file, save_file

    from ragrig.judge.verifier_model import Verifier

    out, _ = tiny_model
    src = out / "model"
    perm = [2, 0, 1]  # new row i is old row perm[i]: NOT_ADDRESSED, SUPPORT, CONTRADICT
    dst = tmp_path / "permuted"
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    old = {int(k): v for k, v in cfg["id2label"].items()}
    cfg["id2label"] = {str(i): old[j] for i, j in enumerate(perm)}
    cfg["label2id"] = {v: int(k) for k, v in cfg["id2label"].items()}
    (dst / "config.json").write_text(json.dumps(cfg))
    (weights,) = dst.glob("*.safetensors")
    tensors = load_file(str(weights))
    for name in [n for n in tensors if n.endswith(("classifier.weight", "classifier.bias"))]:
        tensors[name] = tensors[name][perm].contiguous()
    save_file(tensors, str(weights), metadata={"format": "pt"})
    pairs = [
        ("Mars has two moons.", "Mars has two moons, Phobos and Deimos."),
        ("Mars has no moons.", "Mars has two moons, Phobos and Deimos."),
        ("Venus is hot.", "Statins lower cholesterol."),
    ]
    a, b = Verifier(src), Verifier(dst)
    assert (a.support_index, b.support_index) == (0, 1)
    assert b.support(pairs) == pytest.approx(a.support(pairs), abs=1e-6)
    assert b.support(pairs) != pytest.approx(b.probabilities(pairs)[:, 0].tolist(), abs=1e-6)
