"""The three-axis scorecard: reference weights/floors/diagnosis, gate outcomes, the relevance and
correctness axes, the report section, and `ragrig gate` exit codes."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from ragrig.core.config import validate_section
from ragrig.core.errors import ConfigError, DataValidationError
from ragrig.metrics import correctness as corr
from ragrig.metrics import relevance as rel
from ragrig.metrics.aggregate import flatten
from ragrig.metrics.scorecard import (
    DEFAULT_FLOORS,
    DEFAULT_WEIGHTS,
    DIAGNOSES,
    FAIL_HARD,
    FAIL_SOFT,
    PASS,
    evaluate,
    from_dict,
    gate_exit_code,
)
from ragrig.report import ReportInputs, build_report
from ragrig.report.scorecard import Vectors, scorecard_tables

# the reference example, copied so the test runs without ../shared (and checked against it when
# it is there)
REFERENCE = {
    "weights": {"faithfulness": 0.5, "relevance": 0.25, "correctness": 0.25},
    "floors": {
        "faithfulness": {"min": 0.85, "kind": "hard"},
        "relevance": {"min": 0.75, "kind": "soft"},
        "correctness": {"min": 0.7, "kind": "soft"},
    },
    "correctness_without_ground_truth": {
        "self_consistency": 0.3,
        "coverage": 0.25,
        "clarity": 0.2,
        "external_consistency": 0.25,
    },
    "diagnosis": {
        "faithfulness_low_others_ok": (
            "hallucination: the generator invents facts absent from the context"
        ),
        "relevance_low_faithfulness_ok": "weak retrieval: chunking, indexing or embeddings",
        "correctness_low_others_ok": (
            "prompt or model: the information was there but was restated wrongly"
        ),
    },
}


def _cfg(**scorecard):
    return validate_section("report", {"scorecard": scorecard}).scorecard


def test_reference_copy_matches_shared_file(reference):
    ref = reference["three_axis_scorecard"]
    for key, value in REFERENCE.items():
        assert ref[key] == value


def test_defaults_are_the_reference_weights_floors_surrogates_and_texts():
    cfg = _cfg()
    assert cfg.weights == REFERENCE["weights"] == DEFAULT_WEIGHTS
    assert cfg.floors_dict() == REFERENCE["floors"] == DEFAULT_FLOORS
    assert cfg.correctness_surrogate_weights == REFERENCE["correctness_without_ground_truth"]
    for code, text in REFERENCE["diagnosis"].items():
        assert DIAGNOSES[code] == text


@pytest.mark.parametrize(
    "values, code",
    [
        (
            {"faithfulness": 0.60, "relevance": 0.90, "correctness": 0.90},
            "faithfulness_low_others_ok",
        ),
        (
            {"faithfulness": 0.95, "relevance": 0.50, "correctness": 0.90},
            "relevance_low_faithfulness_ok",
        ),
        (
            {"faithfulness": 0.95, "relevance": 0.50, "correctness": 0.40},
            "relevance_low_faithfulness_ok",
        ),
        (
            {"faithfulness": 0.95, "relevance": 0.90, "correctness": 0.40},
            "correctness_low_others_ok",
        ),
        ({"faithfulness": 0.50, "relevance": 0.50, "correctness": 0.50}, "all_low"),
        (
            {"faithfulness": 0.50, "relevance": 0.50, "correctness": 0.90},
            "faithfulness_relevance_low",
        ),
        (
            {"faithfulness": 0.50, "relevance": 0.90, "correctness": 0.50},
            "faithfulness_correctness_low",
        ),
        (
            {"faithfulness": 0.85, "relevance": 0.75, "correctness": 0.70},
            "all_ok",
        ),  # floors inclusive
    ],
)
def test_diagnosis_rules(values, code):
    card = evaluate(values, REFERENCE["weights"], REFERENCE["floors"])
    assert card.diagnosis_code == code
    assert card.diagnosis == DIAGNOSES[code]


def test_reference_diagnosis_texts_come_out_of_evaluate():
    card = evaluate(
        {"faithfulness": 0.6, "relevance": 0.9, "correctness": 0.9},
        REFERENCE["weights"],
        REFERENCE["floors"],
    )
    assert card.diagnosis == REFERENCE["diagnosis"]["faithfulness_low_others_ok"]
    assert card.gate == FAIL_HARD and card.failed == ["faithfulness"]
    assert card.weighted == pytest.approx(0.5 * 0.6 + 0.25 * 0.9 + 0.25 * 0.9)


def test_weighted_090_with_faithfulness_070_fails_with_correctness_070_passes_softly():
    # With faithfulness weighted 50%, faithfulness 0.70 caps the weighted score at 0.85; the
    # METRICS.md example (both systems at 0.90) needs equal weights, so it is shown under both.
    equal = {"faithfulness": 1.0, "relevance": 1.0, "correctness": 1.0}
    low_faith = evaluate(
        {"faithfulness": 0.70, "relevance": 1.0, "correctness": 1.0}, equal, REFERENCE["floors"]
    )
    low_corr = evaluate(
        {"faithfulness": 1.0, "relevance": 1.0, "correctness": 0.70}, equal, REFERENCE["floors"]
    )
    assert low_faith.weighted == pytest.approx(0.90) == low_corr.weighted
    assert (low_faith.gate, low_faith.failed) == (FAIL_HARD, ["faithfulness"])
    assert gate_exit_code(low_faith) == 1
    # correctness 0.70 is at its floor (floors are inclusive): passes; 0.69 is a soft failure
    # (warning, exit 0)
    assert low_corr.gate == PASS and gate_exit_code(low_corr) == 0
    rounded = evaluate(
        {"faithfulness": 1.0, "relevance": 1.0, "correctness": float(np.mean([0.7] * 3))},
        equal,
        REFERENCE["floors"],
    )
    assert rounded.gate == PASS
    soft = evaluate(
        {"faithfulness": 1.0, "relevance": 0.90, "correctness": 0.69},
        REFERENCE["weights"],
        REFERENCE["floors"],
    )
    assert soft.weighted == pytest.approx(0.5 + 0.225 + 0.1725)
    assert (soft.gate, soft.failed, gate_exit_code(soft)) == (FAIL_SOFT, ["correctness"], 0)
    # the default weights: 0.90 with correctness 0.70 passes
    default = evaluate(
        {"faithfulness": 1.0, "relevance": 0.90, "correctness": 0.70},
        REFERENCE["weights"],
        REFERENCE["floors"],
    )
    assert default.weighted == pytest.approx(0.90) and default.gate == PASS
    # default weights, faithfulness 0.70 and everything else perfect: 0.85, a hard failure
    capped = evaluate(
        {"faithfulness": 0.70, "relevance": 1.0, "correctness": 1.0},
        REFERENCE["weights"],
        REFERENCE["floors"],
    )
    assert capped.weighted == pytest.approx(0.85) and capped.gate == FAIL_HARD


def test_not_measured_axis_is_said_never_zero_never_a_silent_pass():
    card = evaluate(
        {"faithfulness": 0.9, "relevance": 0.8, "correctness": None},
        REFERENCE["weights"],
        REFERENCE["floors"],
        {"faithfulness": 10, "relevance": 12},
    )
    assert card.axes["correctness"].passed is None
    assert card.axes["correctness"].status == "not_measured"
    assert card.unmeasured == ["correctness"] and card.failed == ["correctness"]
    assert card.gate == FAIL_SOFT and gate_exit_code(card) == 0
    # renormalised over the measured axes, not a 0 for correctness
    assert card.weighted == pytest.approx((0.5 * 0.9 + 0.25 * 0.8) / 0.75)
    assert card.diagnosis == DIAGNOSES["measured_ok"] + " (not measured: correctness)"
    assert any("renormalised" in n for n in card.notes)
    hard = evaluate(
        {"faithfulness": None, "relevance": 0.8, "correctness": 0.9},
        REFERENCE["weights"],
        REFERENCE["floors"],
    )
    assert hard.gate == FAIL_HARD and hard.unmeasured == ["faithfulness"]
    assert gate_exit_code(hard) == 2
    nothing = evaluate({}, REFERENCE["weights"], REFERENCE["floors"])
    assert nothing.weighted is None and nothing.diagnosis_code == "not_measured"
    assert evaluate(
        {"faithfulness": float("nan"), "relevance": 0.8, "correctness": 0.9},
        REFERENCE["weights"],
        REFERENCE["floors"],
    ).unmeasured == ["faithfulness"]


def test_from_dict_round_trip_and_malformed():
    card = evaluate(
        {"faithfulness": 0.9, "relevance": 0.5, "correctness": 0.8},
        REFERENCE["weights"],
        REFERENCE["floors"],
        {"faithfulness": 3, "relevance": 4, "correctness": 4},
    )
    back = from_dict(json.loads(json.dumps(card.to_dict())))
    assert back.to_dict() == card.to_dict()
    with pytest.raises(ValueError, match="lacks 'axes'"):
        from_dict({"weights": {}, "floors": {}})
    bad = card.to_dict()
    bad["axes"]["relevance"]["value"] = "high"
    with pytest.raises(ValueError, match="non-numeric"):
        from_dict(bad)


def test_config_rejects_bad_weights_and_floors():
    with pytest.raises(ConfigError, match="unknown parts"):
        _cfg(relevance_weights={"semantic": 1, "keyword": 1, "llm": 1, "context": 1, "bm25": 1})
    with pytest.raises(ConfigError, match="missing parts"):
        _cfg(weights={"faithfulness": 1.0, "relevance": 1.0})
    with pytest.raises(ConfigError, match="not all 0"):
        _cfg(
            correctness_surrogate_weights={
                "self_consistency": 0,
                "coverage": 0,
                "clarity": 0,
                "external_consistency": 0,
            }
        )
    with pytest.raises(ConfigError):
        _cfg(floors={"faithfulness": {"min": 1.5, "kind": "hard"}})
    with pytest.raises(ConfigError, match="relevant"):
        _cfg(similarity_range={"irrelevant": 0.6, "relevant": 0.1})
    cfg = _cfg(floors={**REFERENCE["floors"], "relevance": {"min": 0.8, "kind": "hard"}})
    assert cfg.floors_dict()["relevance"] == {"min": 0.8, "kind": "hard"}


# --- relevance -------------------------------------------------------------------------------


def test_relevance_parts_exact_values():
    assert rel.map_similarity(0.6, 0.1, 0.6) == 1.0
    assert rel.map_similarity(0.35, 0.1, 0.6) == pytest.approx(0.5)
    assert rel.map_similarity(0.05, 0.1, 0.6) == 0.0
    q = np.array([1.0, 0.0])
    assert rel.best_cosine(q, np.array([[0.0, 2.0], [3.0, 4.0]])) == pytest.approx(0.6)
    assert rel.keyword_overlap(
        ["aspirin", "fever", "reduc"], ["fever", "aspirin"]
    ) == pytest.approx(2 / 3)
    assert rel.keyword_overlap([], ["x"]) is None
    docs = ["d9", "d1", "d9", "d2"]
    assert rel.context_precision(docs, {"d1", "d2", "d3"}) == pytest.approx(0.5)
    # positives at ranks 2 and 4: (1/2 + 2/4) / 2
    assert rel.context_precision_ranked(docs, {"d1", "d2", "d3"}) == pytest.approx(0.5)
    assert rel.context_precision_ranked(["d1", "d9", "d9"], {"d1"}) == 1.0
    assert rel.context_precision_ranked(["d9"], {"d1"}) == 0.0
    assert rel.context_recall(docs, {"d1", "d2", "d3"}) == pytest.approx(2 / 3)
    assert rel.context_recall(docs, set()) is None
    assert rel.context_precision([], {"d1"}) is None


# --- correctness -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer, refusal, verdict",
    [
        ("SUPPORTED. Passage [1] reports the effect.", False, corr.SUPPORTED),
        ("Supported: the trial shows it [2].", False, corr.SUPPORTED),
        ("The claim is supported by [1].", False, corr.SUPPORTED),
        ("CONTRADICTED - the cohort shows the opposite [1].", False, corr.CONTRADICTED),
        ("contradicts: [2] finds no effect", False, corr.CONTRADICTED),
        ("The passages do not support the claim.", False, corr.CONTRADICTED),
        ("NOT ENOUGH INFORMATION. The passages discuss mice only.", False, corr.NOT_ENOUGH_INFO),
        ("Not enough info", False, corr.NOT_ENOUGH_INFO),
        ("NOT_ENOUGH_INFO", False, corr.NOT_ENOUGH_INFO),
        ("I cannot answer this from the passages.", False, corr.NOT_ENOUGH_INFO),
        # the verdict the answer opens with wins over later verdict words
        ("SUPPORTED. Nothing in [2] contradicts it.", False, corr.SUPPORTED),
        ("The passages do not mention dosage.", True, corr.NOT_ENOUGH_INFO),
        ("Aspirin reduces fever [1].", False, corr.NO_VERDICT),
        ("", False, corr.NO_VERDICT),
    ],
)
def test_parse_verdict(answer, refusal, verdict):
    assert corr.parse_verdict(answer, refusal=refusal) == verdict


def test_expected_verdict_and_squad_measures():
    assert corr.expected_verdict("SUPPORT") == corr.SUPPORTED
    assert corr.expected_verdict("CONTRADICT") == corr.CONTRADICTED
    assert corr.expected_verdict("NOT_ENOUGH_INFO") == corr.NOT_ENOUGH_INFO
    assert corr.expected_verdict("unknown") is None
    assert corr.expected_verdict("MIXED") is None
    assert corr.squad_normalise("The  Eiffel-Tower, in Paris!") == "eiffeltower in paris"
    assert corr.exact_match("the Norway.", "Norway") == 1.0
    assert corr.exact_match("Norway and Sweden", "Norway") == 0.0
    # pred 4 tokens, ref 2, 2 shared: P 0.5, R 1.0
    assert corr.token_f1("in Oslo Norway today", "Oslo, Norway") == pytest.approx(2 / 3)
    assert corr.token_f1("Sweden", "Norway") == 0.0
    assert corr.token_f1("the", "a") == 1.0  # both empty after normalisation


# --- report integration ----------------------------------------------------------------------


def _queries(**extra):
    return pd.DataFrame(
        {
            "qid": ["q1", "q2", "q3", "q4"],
            "text": [
                "Aspirin reduces fever in adults",
                "Vitamin D prevents fractures",
                "Statins lower cholesterol",
                "Coffee causes insomnia",
            ],
            "claim_label": ["SUPPORT", "CONTRADICT", "NOT_ENOUGH_INFO", "unknown"],
            "n_gold": [1, 2, 0, 1],
            "n_words": [5, 4, 3, 3],
            **extra,
        }
    )


QRELS = pd.DataFrame(
    {
        "qid": ["q1", "q2", "q2", "q4"],
        "doc_id": ["d1", "d2", "d3", "d4"],
        "relevance": [1, 1, 1, 1],
    }
)
RUN = pd.DataFrame(
    {
        "qid": ["q1", "q1", "q2", "q2", "q3", "q4"],
        "doc_id": ["d1", "d5", "d5", "d2", "d6", "d4"],
        "chunk_id": ["d1#0", "d5#0", "d5#0", "d2#0", "d6#0", "d4#0"],
        "score": [2.0, 1.0, 2.0, 1.0, 1.0, 1.0],
        "rank": [1, 2, 1, 2, 1, 1],
    }
)
PASSAGE = {
    "d1#0": "Aspirin reduced fever in adults in a trial.",
    "d5#0": "Unrelated text about bridges.",
    "d2#0": "Vitamin D did not prevent fractures.",
    "d6#0": "Statins and muscles.",
    "d4#0": "Coffee and sleep.",
}


def _gens(**extra):
    ctx = {"q1": ["d1#0", "d5#0"], "q2": ["d5#0", "d2#0"], "q3": ["d6#0"], "q4": ["d4#0"]}
    return pd.DataFrame(
        {
            "qid": ["q1", "q2", "q3", "q4"],
            "status": ["ok", "ok", "ok", "ok"],
            "answer": [
                "SUPPORTED. Aspirin reduced fever [1].",
                "Vitamin D prevents fractures [2].",
                "The passages do not say.",
                "Coffee keeps people awake [1].",
            ],
            "context_chunk_ids": [json.dumps(ctx[q]) for q in ["q1", "q2", "q3", "q4"]],
            "contexts": [
                json.dumps([PASSAGE[c] for c in ctx[q]]) for q in ["q1", "q2", "q3", "q4"]
            ],
            "citations": ["[1]", "[2]", "[]", "[1]"],
            "model": ["m"] * 4,
            "prompt_tokens": [10] * 4,
            "completion_tokens": [5] * 4,
            "latency_ms": [1.0] * 4,
            "error": [""] * 4,
            **extra,
        }
    )


def _judgments(new_columns: bool):
    base = {
        "qid": ["q1", "q2", "q3", "q4"],
        "status": ["scored", "scored", "no_claims", "scored"],
        "n_claims": [1, 1, 0, 1],
        "n_supported": [1, 0, 0, 1],
        "faithfulness": [1.0, 0.0, None, 1.0],
        "claims": ["[]"] * 4,
        "latency_ms": [1.0] * 4,
        "error": [""] * 4,
        "answer_kind": ["answer", "answer", "refusal", "answer"],
        "entity_overlap": [1.0, 1.0, None, 1.0],
    }
    if new_columns:
        base.update(
            {
                "faithfulness": [0.9, 0.2, None, 0.8],
                "claim_support": [1.0, 0.0, None, 1.0],
                "llm_faithfulness": [0.75, 0.5, None, None],
                "faithfulness_parts": [
                    json.dumps({"claims": 0.4, "llm": 0.4, "entity": 0.2}),
                    json.dumps({"claims": 0.4, "llm": 0.4, "entity": 0.2}),
                    "{}",
                    json.dumps({"claims": 2 / 3, "llm": 0.0, "entity": 1 / 3}),
                ],
                "llm_status": ["ok", "ok", "ok", "error"],
                "llm_relevance": [1.0, 0.5, 0.0, None],
                "llm_coverage": [1.0, 0.5, 0.0, None],
                "llm_clarity": [1.0, 0.5, 0.0, 0.6],
                "llm_external_consistency": [1.0, 0.5, 0.0, None],
                "llm_cached": [False] * 4,
                "judge_prompt_tokens": [100] * 4,
                "judge_completion_tokens": [20] * 4,
                "judge_cpu_s": [0.1] * 4,
                "judge_model": ["judge-model"] * 4,
            }
        )
    return pd.DataFrame(base)


def _vectors():
    # 2-d vectors: the query q1 at angle 0; d1 at cos 0.6, d5 at cos 0.0
    return Vectors(
        query_ids=["q1", "q2", "q3", "q4"],
        queries=np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [1.0, 0.0]], dtype=np.float32),
        chunk_ids=["d1#0", "d5#0", "d2#0", "d6#0", "d4#0"],
        chunks=np.array(
            [[0.6, 0.8], [0.0, 1.0], [0.35, math.sqrt(1 - 0.35**2)], [1.0, 0.0], [-1.0, 0.0]],
            dtype=np.float32,
        ),
    )


def test_axes_per_query_with_old_judgments_and_vectors():
    cfg = _cfg()
    t = scorecard_tables(_queries(), QRELS, RUN, _gens(), _judgments(False), cfg, _vectors())
    long = t.long.set_index(["qid", "measure"])["value"]
    # q1: semantic cos 0.6 -> 1.0; keyword: aspirin, reduc, fever, adult all in the context -> 1;
    # context: d1 at rank 1 -> ranked precision 1, recall 1 -> 1; no llm -> renormalised
    assert long[("q1", "relevance/semantic")] == pytest.approx(1.0)
    assert long[("q1", "relevance/keyword")] == pytest.approx(1.0)
    assert long[("q1", "relevance/context_precision")] == pytest.approx(0.5)
    assert long[("q1", "relevance/context_precision_ranked")] == pytest.approx(1.0)
    assert long[("q1", "axis/relevance")] == pytest.approx(1.0)
    # q2: best cosine 0.35 -> 0.5; context ranked precision 1/2, recall 1/2 -> 0.5;
    # keyword vitamin, prevent, fractur all present -> 1.0
    w = {"semantic": 0.25, "keyword": 0.15, "context": 0.3}
    expect = (0.25 * 0.5 + 0.15 * 1.0 + 0.3 * 0.5) / sum(w.values())
    assert long[("q2", "relevance/semantic")] == pytest.approx(0.5, abs=1e-6)
    assert long[("q2", "axis/relevance")] == pytest.approx(expect, abs=1e-6)
    # q3: no positives -> no context part; cos 1.0 -> 1; keyword statin/lower/cholesterol: 1/3
    assert ("q3", "relevance/context_recall") not in long.index
    assert long[("q3", "axis/relevance")] == pytest.approx((0.25 * 1 + 0.15 / 3) / 0.4)
    # correctness: q1 SUPPORTED = SUPPORT -> 1; q2 no verdict -> 0; q3 refusal -> NEI -> 1;
    # q4 label unknown, no LLM judge: the offline surrogates. Coverage: "Coffee causes
    # insomnia" is one part (coffe, caus, insomnia), the answer holds 1/3 < 1/2 -> 0. Clarity of
    # "Coffee keeps people awake": one 4-word sentence -> length 1, no repeated trigram -> 1,
    # Flesch 206.835 - 1.015 * 4 - 84.6 * 7/4 = 54.725 -> 0.54725; mean 0.849083
    assert long[("q1", "axis/correctness")] == 1.0
    assert long[("q2", "axis/correctness")] == 0.0
    assert long[("q3", "axis/correctness")] == 1.0
    clarity = (1 + 1 + 0.54725) / 3
    assert long[("q4", "correctness/coverage")] == 0.0
    assert long[("q4", "correctness/clarity")] == pytest.approx(clarity)
    assert long[("q4", "axis/correctness")] == pytest.approx(0.2 * clarity / 0.45)
    # faithfulness: the claim share of scored judgments; the refusal has none
    assert long[("q2", "axis/faithfulness")] == 0.0
    assert ("q3", "axis/faithfulness") not in long.index
    assert t.counts["correctness"]["verdicts"] == {
        "SUPPORTED": 1,
        "CONTRADICTED": 0,
        "NOT_ENOUGH_INFO": 1,
        "no_verdict": 1,
    }
    assert t.counts["correctness"]["sources"]["no_ground_truth_no_surrogate"] == 0
    assert t.counts["correctness"]["coverage_method"] == {"question_parts": 4}
    assert t.counts["correctness"]["clarity_method"] == {"readability": 1}
    assert t.counts["correctness"]["reads"] == {
        "claim_score": 0,
        "claim_f1": 0,
        "refusal_agreement": 0,
        "token_f1": 0,
        "verdict": 3,
        "surrogates": 1,
    }
    assert "faithfulness is the claim share: the judgments carry no composite" in t.notes
    pq = t.per_query.set_index("qid")
    assert pq.loc["q2", "diagnosis"] == "all_low"  # faithfulness 0, relevance 0.59, wrong
    assert (pq.loc["q1", "gate"], pq.loc["q1", "diagnosis"]) == ("pass", "all_ok")
    # q3, a refusal: no faithfulness, so its hard axis is not measured
    assert (pq.loc["q3", "gate"], pq.loc["q3", "diagnosis"]) == ("fail_hard", "measured_ok")


def test_axes_with_new_judgment_columns_and_surrogates():
    cfg = _cfg()
    gens = _gens(self_consistency=[1.0, 1.0, 1.0, 0.5])
    t = scorecard_tables(_queries(), QRELS, RUN, gens, _judgments(True), cfg, None)
    long = t.long.set_index(["qid", "measure"])["value"]
    assert long[("q1", "axis/faithfulness")] == pytest.approx(0.9)  # the composite
    assert long[("q2", "relevance/llm")] == 0.5
    # q4: no ground truth; surrogates self_consistency 0.5 (0.3), the LLM's clarity 0.6 (0.2)
    # beside the offline one, and the offline coverage 0 (0.25: no LLM coverage)
    assert long[("q4", "correctness/surrogate")] == pytest.approx((0.3 * 0.5 + 0.2 * 0.6) / 0.75)
    assert long[("q4", "axis/correctness")] == pytest.approx(0.36)
    assert long[("q4", "correctness/clarity_llm")] == 0.6
    assert long[("q4", "correctness/clarity_offline")] == pytest.approx((2 + 0.54725) / 3)
    assert t.per_query.set_index("qid").loc["q4", "coverage_method"] == "question_parts"
    assert t.counts["correctness"]["clarity_method"] == {"llm": 1}
    assert t.counts["correctness"]["sources"]["surrogates"] == 1
    assert "faithfulness composite renormalised over claims, entity for 1 answers" in t.notes
    assert "relevance without semantic similarity: no embed-stage vectors given" in t.notes
    # verdicts off: SciFact labels are ignored and the surrogates score every answer
    off = scorecard_tables(
        _queries(), QRELS, RUN, gens, _judgments(True), _cfg(verdicts=False), None
    )
    assert off.counts["correctness"]["sources"]["surrogates"] == 4


def test_reference_answers_column():
    cfg = _cfg(reference_column="answer_ref")
    queries = _queries(answer_ref=["aspirin reduced fever", "", None, "Coffee keeps you awake"])
    t = scorecard_tables(queries, QRELS, RUN, _gens(), _judgments(False), cfg, None)
    long = t.long.set_index(["qid", "measure"])["value"]
    # q1: "supported aspirin reduced fever" (the citation [1] removed) vs "aspirin reduced
    # fever": P 3/4, R 1
    assert long[("q1", "correctness/token_f1")] == pytest.approx(2 * 0.75 / 1.75)
    assert long[("q1", "correctness/exact_match")] == 0.0
    assert long[("q1", "axis/correctness")] == pytest.approx(2 * 0.75 / 1.75)
    # q2 has an empty reference: its claim label decides
    assert long[("q2", "correctness/verdict")] == 0.0
    assert t.counts["correctness"]["sources"]["reference"] == 2
    with pytest.raises(ConfigError, match="no column 'nope'"):
        scorecard_tables(
            _queries(), QRELS, RUN, _gens(), _judgments(False), _cfg(reference_column="nope")
        )


def test_context_chunk_missing_from_run_is_an_error():
    gens = _gens()
    gens.loc[0, "context_chunk_ids"] = json.dumps(["d1#0", "zz#0"])
    with pytest.raises(DataValidationError, match="chunk 'zz#0'"):
        scorecard_tables(_queries(), QRELS, RUN, gens, _judgments(False), _cfg(), None)


def _inputs(new_columns: bool) -> ReportInputs:
    latency = pd.DataFrame({"qid": ["q1"], "stage": ["retrieve"], "latency_ms": [1.0]})
    return ReportInputs(
        _queries(),
        QRELS,
        RUN,
        RUN.assign(lane="dense"),
        RUN,
        None,
        None,
        latency,
        _gens(),
        _judgments(new_columns),
        vectors=_vectors(),
    )


@pytest.mark.parametrize("new_columns", [False, True])
def test_report_scorecard_section_and_slices(new_columns):
    cfg = validate_section(
        "report",
        {
            "k_values": [10],
            "prices": {
                "m": {"input_per_mtok": 0, "output_per_mtok": 0},
                "judge-model": {"input_per_mtok": 1.0, "output_per_mtok": 2.0},
            },
        },
    )
    rep = build_report(_inputs(new_columns), cfg)
    sc = rep.metrics["scorecard"]
    faith = [0.9, 0.2, 0.8] if new_columns else [1.0, 0.0, 1.0]
    assert sc["axes"]["faithfulness"]["value"] == pytest.approx(sum(faith) / 3)
    assert sc["axes"]["faithfulness"]["n"] == 3
    # q4 has no ground truth: the surrogates measure it (offline coverage and clarity, the
    # LLM's clarity with the new columns)
    assert sc["axes"]["correctness"]["n"] == 4
    assert (sc["gate"], sc["failed"][0]) == ("fail_hard", "faithfulness")
    assert sc["floors"] == REFERENCE["floors"] and sc["weights"] == REFERENCE["weights"]
    assert set(sc) >= {"axes", "weighted", "gate", "failed", "diagnosis", "notes"}
    sup = rep.metrics["slices"]["claim_label"]["SUPPORT"]
    assert sup["scorecard/faithfulness"] == pytest.approx(faith[0])
    assert sup["scorecard/correctness"] == 1.0
    assert sup["scorecard/correctness_n"] == 1
    unk = rep.metrics["slices"]["claim_label"]["unknown"]
    # coverage 0 (0.25) and clarity (0.2): the LLM's 0.6, else the offline (2 + 0.54725) / 3
    clarity = 0.6 if new_columns else (2 + 0.54725) / 3
    assert unk["scorecard/correctness"] == pytest.approx(0.2 * clarity / 0.45)
    assert list(rep.scorecard["qid"]) == ["q1", "q2", "q3", "q4"]
    flat = flatten(rep.metrics)
    assert all(not math.isnan(v) for v in flat.values())
    assert "scorecard/axes/faithfulness/value" in flat
    assert "slices/claim_label/SUPPORT/scorecard/faithfulness" in flat
    assert json.loads(json.dumps(rep.metrics)) == rep.metrics
    from ragrig.report.summary import format_summary

    text = format_summary(json.loads(json.dumps(rep.metrics)))
    assert "  faithfulness " in text and "gate: " in text and "diagnosis: " in text
    assert "scorecard by claim_label:" in text


# --- ragrig gate -----------------------------------------------------------------------------


def _gate(tmp_path, metrics) -> subprocess.CompletedProcess:
    path = tmp_path / "metrics.json"
    if metrics is not None:
        path.write_text(metrics if isinstance(metrics, str) else json.dumps(metrics))
    return subprocess.run(
        [sys.executable, "-m", "ragrig", "gate", "--metrics", str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )


def _metrics(f, r, c):
    card = evaluate(
        {"faithfulness": f, "relevance": r, "correctness": c},
        REFERENCE["weights"],
        REFERENCE["floors"],
        {"faithfulness": 50, "relevance": 50, "correctness": 50},
    )
    return {"counts": {}, "scorecard": card.to_dict()}


def test_gate_command_exit_codes(tmp_path):
    ok = _gate(tmp_path, _metrics(0.95, 0.9, 0.8))
    assert ok.returncode == 0, ok.stderr
    assert "gate: pass" in ok.stdout and "ragrig gate: pass" in ok.stdout
    lines = ok.stdout.splitlines()
    # value, the number the floor tested (here the value: no rule recorded), floor, kind
    assert lines[1].split()[:5] == ["faithfulness", "0.9500", "0.9500", "0.85", "hard"]
    assert lines[2].split()[:5] == ["relevance", "0.9000", "0.9000", "0.75", "soft"]
    assert lines[3].split()[:5] == ["correctness", "0.8000", "0.8000", "0.70", "soft"]
    assert lines[4].split()[:2] == ["weighted", "0.9000"]

    soft = _gate(tmp_path, _metrics(1.0, 0.9, 0.6))
    assert soft.returncode == 0
    assert "warning: soft floor correctness (0.6000 < 0.7)" in soft.stderr
    assert "pass with warnings" in soft.stdout
    assert DIAGNOSES["correctness_low_others_ok"] in soft.stdout

    hard = _gate(tmp_path, _metrics(0.7, 1.0, 1.0))
    assert hard.returncode == 1
    assert "FAIL: hard floor faithfulness (0.7000 < 0.85)" in hard.stderr
    assert DIAGNOSES["faithfulness_low_others_ok"] in hard.stdout

    unmeasured = _gate(tmp_path, _metrics(None, 0.9, 0.9))
    assert unmeasured.returncode == 2
    assert "hard floor faithfulness (not measured)" in unmeasured.stderr

    soft_unmeasured = _gate(tmp_path, _metrics(0.9, 0.9, None))
    assert soft_unmeasured.returncode == 0
    assert "soft floor correctness (not measured)" in soft_unmeasured.stderr


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "cannot read"),
        ("{not json", "cannot read"),
        ({"counts": {}}, "has no scorecard section"),
        ({"scorecard": {"weights": {}, "floors": {}}}, "malformed scorecard"),
    ],
)
def test_gate_command_unreadable_metrics(tmp_path, content, message):
    res = _gate(tmp_path, content)
    assert res.returncode == 2
    assert message in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_bad_inputs_are_one_clear_error():
    gens = _gens()
    gens.loc[1, "contexts"] = "[not json"
    with pytest.raises(DataValidationError, match="query 'q2': contexts is not JSON"):
        scorecard_tables(_queries(), QRELS, RUN, gens, _judgments(False), _cfg(), None)
    v = _vectors()
    short = Vectors(v.query_ids[:3], v.queries, v.chunk_ids, v.chunks)
    with pytest.raises(DataValidationError, match="3 queries ids for 4 queries vectors"):
        scorecard_tables(_queries(), QRELS, RUN, _gens(), _judgments(False), _cfg(), short)
    # a query the embed stage has no vector for: its semantic part is left out and counted
    part = Vectors(v.query_ids[:3], v.queries[:3], v.chunk_ids, v.chunks)
    t = scorecard_tables(_queries(), QRELS, RUN, _gens(), _judgments(False), _cfg(), part)
    assert t.counts["relevance"]["semantic_missing_vectors"] == 1
    assert ("q4", "relevance/semantic") not in set(
        zip(t.long["qid"], t.long["measure"], strict=True)
    )


def _decided():
    j = _judgments(True)
    j["judged_faithful"] = [1.0, 0.0, None, 0.0]
    j["contradictions"] = ["[]", "[]", "[]", json.dumps([{"claim": "c", "kind": "number"}])]
    j["failure_mode"] = ["", "fabrication", "", "wrong_number"]
    return j


def test_the_faithfulness_axis_reads_the_decision_and_reports_the_score_beside_it():
    gens = _gens(self_consistency=[1.0, 1.0, 1.0, 0.5])
    t = scorecard_tables(_queries(), QRELS, RUN, gens, _decided(), _cfg(), None)
    long = t.long.set_index(["qid", "measure"])["value"]
    # q4: a soft score of 0.8, but a number absent from its context decides
    assert long[("q4", "faithfulness/score")] == pytest.approx(0.8)
    assert long[("q4", "faithfulness/judged_faithful")] == 0.0
    assert long[("q4", "axis/faithfulness")] == 0.0
    assert long[("q1", "axis/faithfulness")] == 1.0
    assert ("q3", "axis/faithfulness") not in long.index  # a refusal: no decision, no axis
    assert t.per_query.set_index("qid").loc["q4", "gate"] == "fail_hard"
    assert t.counts["faithfulness"] == {
        "reads": "decision",
        "decided": 3,
        "undecided": 0,
        "failure_modes": {
            "contradiction": 0,
            "wrong_number": 1,
            "wrong_entity": 0,
            "fabrication": 1,
            "overgeneralisation": 0,
        },
        # q1: llm 0.75 / entity 1.0 agree; q2: llm 0.5 / entity 1.0, 0.5 apart: disagree;
        # q4: its LLM call failed, entity alone: nothing to compare
        "techniques": {
            "agree": 1,
            "disagree": 1,
            "all_low": 0,
            "fewer_than_two": 1,
            "spread": 0.5,
            "low": 0.5,
            "disagree_qids": ["q2"],
            "all_low_qids": [],
        },
    }
    assert (
        long[("q1", "judge/techniques_disagree")],
        long[("q2", "judge/techniques_disagree")],
    ) == (
        0.0,
        1.0,
    )
    assert ("q4", "judge/techniques_disagree") not in long.index
    assert (
        "the faithfulness techniques (claims, llm, entity) disagree on 1 answer (q2) of 2 compared "
        "(spread >= 0.5): something is wrong in retrieval; review them"
    ) in t.notes
    assert not any("reads the mean score" in n for n in t.notes)

    t = scorecard_tables(
        _queries(), QRELS, RUN, gens, _decided(), _cfg(faithfulness_reads="score"), None
    )
    long = t.long.set_index(["qid", "measure"])["value"]
    assert long[("q4", "axis/faithfulness")] == pytest.approx(0.8)
    assert long[("q4", "faithfulness/judged_faithful")] == 0.0  # reported either way

    # judgments written before the decision: the score, and a note that says so
    t = scorecard_tables(_queries(), QRELS, RUN, gens, _judgments(True), _cfg(), None)
    assert t.counts["faithfulness"]["undecided"] == 3
    assert (
        "faithfulness reads the mean score for 3 answers: their judgments carry no decision "
        "(judged before it existed)" in t.notes
    )


# --- people's labels: the floor on the prediction-powered interval ---------------------------


def test_a_gate_value_tests_the_floor_and_the_weighted_score_keeps_the_value():
    values = {"faithfulness": 0.9, "relevance": 0.8, "correctness": 0.8}
    plain = evaluate(values, REFERENCE["weights"], REFERENCE["floors"])
    gated = evaluate(
        values,
        REFERENCE["weights"],
        REFERENCE["floors"],
        gates={"faithfulness": (0.8, "PPI lower bound")},
    )
    assert plain.gate == "pass" and gated.gate == "fail_hard"
    assert gated.weighted == plain.weighted == pytest.approx(0.85)
    ax = gated.to_dict()["axes"]["faithfulness"]
    assert (ax["value"], ax["gate_value"], ax["gate_reads"], ax["status"]) == (
        0.9,
        0.8,
        "PPI lower bound",
        "below_floor",
    )
    assert "gate_value" not in plain.to_dict()["axes"]["faithfulness"]  # unchanged without
    again = from_dict(gated.to_dict())  # what `ragrig gate` re-evaluates
    assert again.gate == "fail_hard" and again.axes["faithfulness"].tested == 0.8


def test_labels_correct_the_faithful_share_and_move_the_floor(tmp_path):
    cfg = validate_section(
        "report",
        {"k_values": [10], "prices": {"m": {"input_per_mtok": 0, "output_per_mtok": 0}}},
    )
    # the axis reads the decision: q1 1, q2 0, q4 1 (q3 has no claims); people rate q2
    # faithful where the judge did not, and agree on q1
    labels = {"q1": {"human": 1, "note": ""}, "q2": {"human": 1, "note": ""}}
    import dataclasses

    inputs = dataclasses.replace(_inputs(False), labels=labels, labels_file="l.jsonl")
    sc = build_report(inputs, cfg).metrics["scorecard"]
    ppi = sc["faithfulness"]["ppi"]
    assert ppi["judge_mean"] == pytest.approx(2 / 3) and ppi["correction"] == 0.5
    assert ppi["estimate"] == pytest.approx(2 / 3 + 0.5)  # above 1: the interval is clipped
    assert ppi["ci_high"] == 1.0 and ppi["n_labelled"] == 2 and ppi["file"] == "l.jsonl"
    ax = sc["axes"]["faithfulness"]
    assert ax["value"] == pytest.approx(2 / 3)  # the axis keeps the judge's mean
    assert (ax["gate_value"], ax["gate_reads"]) == (ppi["ci_low"], "PPI lower bound")
    est = validate_section(
        "report",
        {
            "k_values": [10],
            "prices": {"m": {"input_per_mtok": 0, "output_per_mtok": 0}},
            "scorecard": {"labels": {"floor_on": "estimate"}},
        },
    )
    sc = build_report(inputs, est).metrics["scorecard"]
    assert sc["axes"]["faithfulness"]["gate_value"] == pytest.approx(7 / 6)
    assert sc["axes"]["faithfulness"]["status"] == "pass"  # the estimate clears 0.85
    one = dataclasses.replace(inputs, labels={"q1": labels["q1"]})
    with pytest.raises(DataValidationError, match="l.jsonl: PPI needs at least 2 labelled"):
        build_report(one, cfg)
