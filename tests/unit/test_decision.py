"""Contradictions decide at the answer level: a claim that a hard check contradicts (a negation
conflict, a number or name absent from the context) makes its answer unfaithful whatever its soft
score; judge_all writes the decision, the contradictions and the failure mode."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ragrig.judge import InvalidVerdict, Verdict, decide, decision_record, judge_all
from ragrig.judge.overlap import ENTITY, FABRICATED, NEGATION, NUMBER, OverlapJudge

CONTEXT = [
    "Aspirin reduces fever in adults. The trial enrolled 240 patients in Oslo. "
    "Ibuprofen did not reduce mortality in the second trial."
]


def _hard(answer: str) -> list[tuple[str, str]]:
    j = OverlapJudge()
    return [(kind, detail) for _, kind, detail in j.judge("", answer, CONTEXT).contradictions]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Aspirin reduces fever in adults.", []),
        # the claim negates what the context states
        (
            "Aspirin does not reduce fever in adults.",
            [(NEGATION, "the claim negates what its context states")],
        ),
        # the claim affirms what the context negates
        (
            "Ibuprofen reduced mortality in the second trial.",
            [(NEGATION, "the context negates what the claim states")],
        ),
        # the context's own negation agrees
        ("Ibuprofen did not reduce mortality in the second trial.", []),
        (
            "The trial enrolled 250 patients in Oslo.",
            [(NUMBER, "250")],
        ),
        ("The trial enrolled 240 patients in Bergen.", [(ENTITY, "Bergen")]),
        # no support at all is no negation conflict; a name it adds is fabricated, unless it
        # opens the sentence (there a capitalised word may be no name)
        ("The planet Mars has a thick atmosphere of carbon dioxide.", [(FABRICATED, "Mars")]),
        ("Mars has a thick atmosphere of carbon dioxide.", []),
        # an answer particle and "not just" negate nothing
        ("No, aspirin reduces fever in adults.", []),
        ("Aspirin reduces fever not just in adults.", []),
        ("The planet has a thick atmosphere of carbon dioxide.", []),
    ],
)
def test_hard_checks(answer, expected):
    assert _hard(answer) == expected


def test_a_negation_in_another_clause_of_the_context_is_no_conflict():
    j = OverlapJudge()
    ctx = ["Smoking, not diet, causes most cases of the disease."]
    v = j.judge("", "Smoking causes most cases of the disease.", ctx)
    assert v.contradictions == () and v.supported == v.extracted


def test_a_contradicted_claim_must_be_unsupported():
    with pytest.raises(InvalidVerdict, match="contradicted claims must be unsupported"):
        Verdict(["a b"], ["a b"], [], contradictions=(("a b", NEGATION, "x"),))


@pytest.mark.parametrize(
    ("soft", "n", "sup", "hard", "expected"),
    [
        (0.9, 2, 2, [], (1.0, "")),
        (0.99, 2, 1, [("c", NEGATION, "x")], (0.0, "contradiction")),
        (0.99, 2, 1, [("c", NUMBER, "7")], (0.0, "wrong_number")),
        (0.99, 2, 1, [("c", ENTITY, "Bergen")], (0.0, "wrong_entity")),
        (0.99, 2, 1, [("c", FABRICATED, "Mars")], (0.0, "fabrication")),
        (0.5, 2, 1, [], (0.0, "fabrication")),
        (0.5, 2, 2, [], (0.0, "overgeneralisation")),
        (0.7, 2, 2, [], (1.0, "")),  # at the threshold: faithful
        (None, 0, 0, [], (None, "")),
    ],
)
def test_decide(soft, n, sup, hard, expected):
    assert decide(soft, n, sup, hard, 0.7) == expected


def test_only_the_vetoing_kinds_decide_and_every_finding_names_the_failure():
    negated = [("c", NEGATION, "x")]
    assert decide(0.99, 2, 1, negated, 0.7, veto=("number", "fabricated")) == (1.0, "")
    assert decide(0.5, 2, 1, negated, 0.7, veto=("number",)) == (0.0, "contradiction")
    assert decide(0.99, 2, 1, [("c", NUMBER, "7")], 0.7, veto=("number",)) == (0.0, "wrong_number")


def test_judge_all_decides_at_the_threshold_and_a_contradiction_overrides_the_score():
    gens = pd.DataFrame(
        {
            "qid": ["q1", "q2", "q3", "q4"],
            "answer": [
                "Aspirin reduces fever in adults. The trial enrolled 240 patients in Oslo.",
                # one sentence of a faithful answer negated: its soft score stays high
                "Aspirin does not reduce fever in adults. The trial enrolled 240 patients in Oslo.",
                "Aspirin reduces fever in adults. The planet has a thick atmosphere of gas.",
                "I cannot answer from these passages.",
            ],
            "contexts": [json.dumps(CONTEXT)] * 4,
            "status": ["ok"] * 4,
        }
    )
    queries = dict.fromkeys(gens["qid"], "What does aspirin do?")
    every = ("negation", "number", "entity", "fabricated")
    out = judge_all(
        OverlapJudge(), gens, queries, progress=False, threshold=0.75, veto=every
    ).set_index("qid")
    assert out.loc["q1", "judged_faithful"] == 1.0 and out.loc["q1", "failure_mode"] == ""
    assert out.loc["q2", "answer_support"] == 0.5  # the supported share, no answer model here
    assert out.loc["q2", "judged_faithful"] == 0.0
    assert out.loc["q2", "failure_mode"] == "contradiction"
    (c,) = json.loads(out.loc["q2", "contradictions"])
    assert c == {
        "claim": "Aspirin does not reduce fever in adults",
        "kind": "negation",
        "detail": "the claim negates what its context states",
    }
    assert (out.loc["q3", "judged_faithful"], out.loc["q3", "failure_mode"]) == (0.0, "fabrication")
    assert pd.isna(out.loc["q4", "judged_faithful"]) and out.loc["q4", "status"] == "no_claims"
    assert out["judged_faithful"].dtype == "float64"

    record = decision_record(0.75, out.reset_index(), every)
    assert record == {
        "threshold": 0.75,
        "calibrated": True,
        "veto": sorted(every),
        "judged": 3,
        "judged_faithful": 1,
        "contradicted": 1,
        "failure_modes": {
            "contradiction": 1,
            "wrong_number": 0,
            "wrong_entity": 0,
            "fabrication": 1,
            "overgeneralisation": 0,
        },
    }
    assert decision_record(None, out.reset_index())["threshold"] == 0.5


def test_a_high_soft_score_does_not_save_a_contradicted_answer():
    class Confident:
        def score(self, answer, contexts):
            return 0.99

    judge = OverlapJudge(answer_model=Confident())
    v = judge.judge("", "The trial enrolled 250 patients in Oslo.", CONTEXT)
    assert v.soft_score == 0.99 and v.contradictions
    soft = v.soft_score
    assert decide(soft, len(v.extracted), len(v.supported), list(v.contradictions), 0.7) == (
        0.0,
        "wrong_number",
    )
