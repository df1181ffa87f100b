"""Claim-level faithfulness and the verdict partition rule, on the reference examples."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ragrig.judge import InvalidVerdict, Verdict, judge_all
from ragrig.judge.overlap import OverlapJudge


def test_claim_faithfulness_reference(reference):
    ex = reference["claim_faithfulness"]
    verdict = OverlapJudge().judge("", ex["answer"], [ex["context"]])
    assert verdict.extracted == ex["claims"]
    assert [c in verdict.supported for c in verdict.extracted] == ex["supported"]
    assert verdict.score == ex["expected_faithfulness"] == 0.75
    assert verdict.outcome == "scored"


def test_empty_answer_has_no_claims_and_no_score(reference):
    ex = reference["claim_faithfulness"]
    verdict = OverlapJudge().judge("", "", [ex["context"]])
    assert verdict.outcome == "no_claims"
    assert verdict.score is None
    assert verdict.reason == "empty answer"


def test_refusal_has_no_claims():
    verdict = OverlapJudge().judge(
        "q", "I cannot answer this from the provided passages.", ["Mars has moons."]
    )
    assert (verdict.outcome, verdict.score, verdict.reason) == ("no_claims", None, "refusal")


def test_partition_valid_and_empty(reference):
    ex = reference["judgment_partition"]
    v = ex["valid"]
    verdict = Verdict(v["extracted"], v["supported"], v["unsupported"])
    assert (verdict.outcome, verdict.score) == (v["outcome"], v["expected_score"])
    e = ex["empty"]
    empty = Verdict(e["extracted"], e["supported"], e["unsupported"])
    assert (empty.outcome, empty.score) == (e["outcome"], e["expected_score"])


@pytest.mark.parametrize("case", ["invalid_overlap", "invalid_blank"])
def test_partition_rejects_invalid(reference, case):
    ex = reference["judgment_partition"][case]
    with pytest.raises(InvalidVerdict):
        Verdict(ex["extracted"], ex["supported"], ex["unsupported"])


@pytest.mark.parametrize("blank", ["", " ", "\t\n"])
def test_blank_claims_rejected(blank):
    with pytest.raises(InvalidVerdict, match="blank"):
        Verdict([blank], [blank], [])


def test_partition_rejects_missing_claims():
    with pytest.raises(InvalidVerdict, match="cover"):
        Verdict(["a claim", "b claim"], ["a claim"], [])


ASPIRIN = ["Aspirin reduces fever in adults. The usual dose is not given here."]


@pytest.mark.parametrize(
    ("answer", "claims"),
    [
        (
            "The passages do not mention dosage, but aspirin reduces fever.",
            ["aspirin reduces fever"],
        ),
        (
            "However, the passages do not mention dosage; aspirin reduces fever [1].",
            ["aspirin reduces fever"],
        ),
        (
            "Aspirin reduces fever [1], however the passages do not provide a dose.",
            ["Aspirin reduces fever"],
        ),
        (
            "There is not enough information on dosage, although aspirin reduces fever. "
            "Aspirin cures influenza.",
            ["aspirin reduces fever", "Aspirin cures influenza"],
        ),
    ],
)
def test_claim_behind_a_refusal_phrase_is_still_scored(answer, claims):
    verdict = OverlapJudge().judge("Does aspirin help?", answer, ASPIRIN)
    assert verdict.extracted == claims
    assert verdict.outcome == "scored"
    # "aspirin reduces fever" is in the context; "Aspirin cures influenza" is not
    assert verdict.score == (1.0 if len(claims) == 1 else 0.5)


def test_hidden_unsupported_claim_lowers_the_score():
    answer = (
        "Aspirin reduces fever [1]. The passages do not mention dosage, but aspirin cures gout."
    )
    verdict = OverlapJudge().judge("q", answer, ASPIRIN)
    assert verdict.extracted == ["Aspirin reduces fever", "aspirin cures gout"]
    assert verdict.unsupported == ["aspirin cures gout"]
    assert verdict.score == 0.5  # 1.0 while the second sentence was dropped whole


def test_sentence_that_is_only_a_refusal_stays_out():
    answer = "The passages do not mention dosage. I cannot answer, but thanks."
    verdict = OverlapJudge().judge("q", answer, ASPIRIN)
    assert (verdict.extracted, verdict.outcome, verdict.reason) == ([], "no_claims", "refusal")


class _Flaky:
    """A judge that times out, returns an invalid verdict, or crashes, by question."""

    def judge(self, question, answer, contexts, reference=None):
        if question == "slow":
            raise TimeoutError("judge timed out after 30 s")
        if question == "bad":
            return Verdict(["x y"], ["x y"], ["x y"])
        if question == "boom":
            raise json.JSONDecodeError("Expecting value", "not json", 0)
        return OverlapJudge().judge(question, answer, contexts)


def test_judge_failures_are_counted_not_dropped():
    qs = {
        "ok": "ok",
        "slow": "slow",
        "bad": "bad",
        "boom": "boom",
        "gen_err": "gen_err",
        "empty": "empty",
    }
    rows = []
    for q in qs:
        rows.append(
            {
                "qid": q,
                "status": {"gen_err": "error", "empty": "empty"}.get(q, "ok"),
                "answer": "" if q in {"gen_err", "empty"} else "Mars has two moons [1].",
                "context_chunk_ids": "[]",
                "contexts": json.dumps(["Mars has two moons, Phobos and Deimos."]),
                "citations": "[1]",
                "model": "m",
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "latency_ms": 0.0,
                "error": "",
            }
        )
    out = judge_all(_Flaky(), pd.DataFrame(rows), qs, progress=False).set_index("qid")
    assert len(out) == 6
    assert out.loc["ok", "status"] == "scored" and out.loc["ok", "faithfulness"] == 1.0
    assert out.loc["slow", "status"] == "error"  # a timeout is an error, named as one
    assert out.loc["slow", "error"] == "TimeoutError: judge timed out after 30 s"
    assert out.loc["bad", "status"] == "invalid"
    assert out.loc["boom", "status"] == "error" and "JSONDecodeError" in out.loc["boom", "error"]
    assert out.loc["gen_err", "status"] == "skipped"
    assert out.loc["empty", "status"] == "no_claims"
    assert out["faithfulness"].notna().sum() == 1  # only the scored answer has a score


def test_judge_all_records_answer_kind_and_entity_overlap():
    ctx = json.dumps(["Mars has two moons, Phobos and Deimos. Curiosity landed in 2012."])
    answers = {
        "full": "I do not have specific information about that.",
        "partial": "The passages do not mention rings, but Mars has two moons [1].",
        "answer": "Curiosity landed on Mars in 2015 [1].",
        "short": "Phobos",
    }
    rows = [
        {"qid": q, "status": "ok", "answer": a, "contexts": ctx, "error": ""}
        for q, a in answers.items()
    ]
    qs = {q: "Which moons does Mars have?" for q in answers}
    out = judge_all(OverlapJudge(), pd.DataFrame(rows), qs, progress=False).set_index("qid")
    assert out["answer_kind"].to_dict() == {
        "full": "refusal",
        "partial": "partial_refusal",
        "answer": "answer",
        "short": "answer",
    }
    assert out["status"].to_dict() == {
        "full": "no_claims",
        "partial": "scored",
        "answer": "scored",
        "short": "scored",
    }
    assert out.loc["full", "error"] == "refusal"
    assert out.loc["partial", "faithfulness"] == 1.0
    # "2015" is not in the context: the claim is unsupported, and Mars/Curiosity are found
    assert out.loc["answer", "claim_support"] == 0.0
    assert out.loc["answer", "entity_overlap"] == pytest.approx(2 / 3)
    # the composite, no LLM judge: claims 0.4 and entity 0.2 renormalised over 0.6
    assert out.loc["answer", "faithfulness"] == pytest.approx((0.4 * 0.0 + 0.2 * 2 / 3) / 0.6)
    assert json.loads(out.loc["short", "claims"]) == [
        {"claim": "Q: Which moons does Mars have? A: Phobos", "supported": True}
    ]
    assert pd.isna(out.loc["full", "entity_overlap"])  # no names or numbers: no score


def test_a_name_opening_a_clause_is_hard_evidence_only_when_it_opens_with_an_acronym():
    """A capitalised word opening a clause may be no name (a verb of an instruction, "Enables
    SQL", a hyphenated "First-In"); an acronym there is one (a swapped "SQL:", "(LTP)")."""
    judge = OverlapJudge()
    contexts = ["The engine supports SQL queries. Long-term potentiation was measured."]

    def kinds(answer):
        cs = judge.claim_set("", answer)
        return [(kind, detail) for _, kind, detail in judge.contradictions(cs, contexts)]

    assert kinds("Enables SQL queries on the engine.") == []
    assert kinds("The engine supports First-In queries.") == [("entity", "First-In")]
    assert kinds("First-In queries are supported by the engine.") == []
    assert kinds("RSA: the engine supports queries.") == [("entity", "RSA")]
    assert kinds("Long-term potentiation (LTD) was measured.") == [("entity", "LTD")]
