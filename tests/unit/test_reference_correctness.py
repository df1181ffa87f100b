"""Correctness against a reference: claim by claim with the shipped verifier, nuggets, the axis
switch by answer length, offline coverage and clarity, and bad references."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from ragrig.core.errors import ConfigError
from ragrig.judge.confirm import shared_verifier
from ragrig.judge.correctness import ReferenceCorrectness, correctness_all
from ragrig.metrics import correctness as corr
from ragrig.report.scorecard import scorecard_tables

from .test_scorecard import QRELS, RUN, _cfg, _gens, _judgments, _queries

REF = "The Eiffel Tower is in Paris. It was completed in 1889. It is 330 metres tall."
Q = "Tell me about the Eiffel Tower"


@pytest.fixture(scope="module")
def scorer():
    # the settings of tests/unit/test_shipped_verifier.py: the process loads the model once
    return ReferenceCorrectness(shared_verifier("shipped", 192, 32, 2, "none"))


# --- pure parts -------------------------------------------------------------------------------


def test_a_reference_cell_is_text_or_nuggets():
    cell = json.dumps([{"text": "Paris is the capital", "vital": True}, {"text": "It is old"}])
    text, nuggets = corr.parse_reference(cell)
    assert text == "Paris is the capital. It is old."
    assert nuggets == [corr.Nugget("Paris is the capital", True), corr.Nugget("It is old", True)]
    opt = json.dumps([{"text": "A fact.", "vital": False}, "Another fact"])
    assert corr.parse_reference(opt)[1] == [
        corr.Nugget("A fact.", False),
        corr.Nugget("Another fact", True),
    ]
    assert corr.parse_reference("[1] Paris.") == ("[1] Paris.", None)  # a citation, not JSON
    assert corr.parse_reference(None) == (None, None)
    assert corr.parse_reference(float("nan")) == (None, None)
    assert corr.parse_reference("   ") == ("", None)


def test_bad_references_are_told_apart():
    answer = "The tower was completed in 1889 and it is in Paris."
    assert corr.reference_problem(answer, None) == corr.REFERENCE_ABSENT
    assert corr.reference_problem(answer, " ") == corr.REFERENCE_EMPTY
    french = "La tour a été achevée en 1889 et elle est à Paris."
    assert corr.language(french) == "latin:fr" and corr.language(answer) == "latin:en"
    assert corr.reference_problem(answer, french) == corr.REFERENCE_OTHER_LANGUAGE
    assert corr.language("Башня была построена в 1889 году в Париже") == "cyrillic"
    assert corr.language("Paris, 1889") is None  # too short to tell: no problem claimed
    assert corr.reference_problem("Paris", "La tour est à Paris et elle est belle") is None
    assert corr.reference_problem(answer, REF) is None


def test_coverage_by_question_parts():
    q = "What is the capital of France and how many people live there?"
    assert corr.question_parts(q) == ["What is the capital of France", "how many people live there"]
    # capit, franc held; mani, peopl, live absent
    assert corr.coverage_by_parts(q, "The capital of France is Paris.") == 0.5
    assert (
        corr.coverage_by_parts(q, "Paris, the capital of France, has 2 million people living")
        == 1.0
    )
    assert corr.coverage_by_parts("What is it?", "Something.") is None  # no content word


def test_clarity_from_sentence_length_repetition_and_flesch():
    # 12 one-syllable words in 2 sentences: 6 a sentence -> 1; 4 of 10 trigrams repeat -> 0.6;
    # Flesch 206.835 - 1.015 * 6 - 84.6 = 116.1 -> clipped to 100 -> 1
    assert corr.clarity_parts("The cat sat on the mat. The cat sat on the mat.") == {
        "sentence_length": 1.0,
        "repetition": 0.6,
        "readability": 1.0,
    }
    long = " ".join(["word"] * 30) + "."  # 30 words in one sentence: halfway from 20 to 40
    assert corr.clarity_parts(long)["sentence_length"] == 0.5
    assert corr.clarity("") is None and corr.clarity("[1]") is None
    assert (corr.syllables("people"), corr.syllables("awake"), corr.syllables("the")) == (2, 2, 1)


# --- claim by claim, the shipped verifier -----------------------------------------------------


def test_claim_level_precision_recall_and_failure_modes(scorer):
    answers = [
        REF,
        "The Eiffel Tower is in Paris. It was completed in 1899.",
        "The Eiffel Tower is not in Paris.",
        "The Eiffel Tower is in Paris.",
        "The Eiffel Tower is in Berlin. It was completed in 1889.",
    ]
    got = [
        (
            r.claim_precision,
            round(r.claim_recall, 4),
            round(r.claim_f1, 4),
            r.contradictions,
            r.failure_mode,
        )
        for r in scorer.score_all([(Q, a, REF) for a in answers])
    ]
    assert got == [
        (1.0, 1.0, 1.0, 0, ""),
        (0.5, 0.3333, 0.4, 1, "wrong_number"),  # 1899: the verifier contradicts it
        (0.0, 0.0, 0.0, 1, "negation"),
        (1.0, 0.3333, 0.5, 0, "missing_information"),  # right, but 1 of 3 reference claims
        (0.5, 0.3333, 0.4, 1, "wrong_entity"),
    ]


def test_the_claim_score_is_continuous_and_a_refusal_is_read_by_agreement(scorer):
    answers = [REF, "The Eiffel Tower is not in Paris.", "The Eiffel Tower is in Paris."]
    full, negated, part = scorer.score_all([(Q, a, REF) for a in answers])
    # soft F1: the harmonic mean of the mean max P(support) of each side
    assert (
        full.claim_score
        == full.soft_f1
        == pytest.approx(
            2 * full.soft_precision * full.soft_recall / (full.soft_precision + full.soft_recall)
        )
    )
    assert 0.9 < full.claim_score < 1.0  # the verifier's P(support), not a count
    # the negated claim: a hard check contradicts it, so it counts 0 on the precision side
    assert (negated.soft_precision, negated.claim_score) == (0.0, 0.0)
    # right but 1 of 3 reference claims: high precision, a third of the recall or less
    assert part.soft_precision > 0.9 and part.soft_recall < 0.34
    assert part.answer_kind == part.reference_kind == "answer"
    declined = "I do not have information on that."
    cases = [
        ("I don't know.", REF, "refusal", "answer", 0.0, "refusal_mismatch"),
        ("The passages do not say.", declined, "refusal", "refusal", 1.0, ""),
        (
            "The passages do not mention its height, but the Eiffel Tower is in Paris.",
            declined,
            "partial_refusal",
            "refusal",
            0.5,
            "refusal_mismatch",
        ),
    ]
    for answer, ref, a_kind, r_kind, score, mode in cases:
        r = scorer.score(Q, answer, ref)
        assert (r.status, r.answer_kind, r.reference_kind, r.claim_score, r.failure_mode) == (
            "refusal",
            a_kind,
            r_kind,
            score,
            mode,
        )
        assert r.claim_f1 is None  # no claims read


def test_vital_nuggets_recall(scorer):
    cell = json.dumps(
        [
            {"text": "The Eiffel Tower is in Paris", "vital": True},
            {"text": "The Eiffel Tower was completed in 1889", "vital": True},
            {"text": "The tower is 330 metres tall", "vital": False},
        ]
    )
    full = scorer.score(Q, "The Eiffel Tower is in Paris. It was completed in 1889.", cell)
    assert (full.reference_claims, full.vital_nuggets, full.vital_recall) == (3, 2, 1.0)
    assert (round(full.claim_recall, 4), full.failure_mode) == (0.6667, "")
    part = scorer.score(Q, "The Eiffel Tower is in Paris. It is 330 metres tall.", cell)
    assert (part.vital_recall, part.failure_mode) == (0.5, "missing_information")
    assert json.loads(part.claims)["reference"][2] == {
        "claim": "The tower is 330 metres tall",
        "p_support": pytest.approx(json.loads(part.claims)["reference"][2]["p_support"]),
        "covered": True,
        "vital": False,
    }


def test_the_table_counts_what_it_cannot_score(scorer):
    queries = pd.DataFrame(
        {
            "qid": ["a", "b", "c", "d", "e"],
            "text": [Q] * 5,
            "ref": [REF, None, "", "La tour est à Paris et elle a été achevée en 1889.", REF],
        }
    )
    gens = pd.DataFrame(
        {
            "qid": ["a", "b", "c", "d", "e"],
            "status": ["ok", "ok", "ok", "ok", "error"],
            "answer": ["The Eiffel Tower is in Paris.", "x y z", "x y z", REF, ""],
        }
    )
    t = correctness_all(scorer, gens, queries, "ref")
    assert list(t["status"]) == [
        "scored",
        "reference_absent",
        "reference_empty",
        "reference_other_language",
        "skipped",
    ]
    assert t["claim_f1"].isna().tolist() == [False, True, True, True, True]
    assert set(t["reference_column"]) == {"ref"}


# --- the report: the axis switch and bad references ------------------------------------------

LONG = "Coffee keeps people awake at night because caffeine blocks adenosine in the brain."


def _claims_table(**f1):
    rows = []
    for qid, v in f1.items():
        rows.append(
            {
                "qid": qid,
                "reference_column": "answer_ref",
                "status": "scored",
                "answer_claims": 2,
                "reference_claims": 2,
                "supported": 1,
                "covered": 1,
                "contradictions": 1,
                "claim_precision": v,
                "claim_recall": v,
                "claim_f1": v,
                "vital_nuggets": 0,
                "vital_recall": None,
                "soft_precision": v + 0.1,
                "soft_recall": v + 0.1,
                "soft_f1": v + 0.1,
                "answer_kind": "answer",
                "reference_kind": "answer",
                "claim_score": v + 0.1,
                "failure_mode": "wrong_number",
                "claims": "{}",
            }
        )
    return pd.DataFrame(rows)


def test_short_answers_read_token_f1_long_ones_the_claim_score():
    gens = _gens()
    gens.loc[3, "answer"] = LONG  # 12 words once "the" is dropped: >= 8
    queries = _queries(
        answer_ref=["aspirin reduced fever", "", None, "Coffee keeps you awake at night."]
    )
    claims = _claims_table(q1=0.25, q4=0.8)
    t = scorecard_tables(
        queries, QRELS, RUN, gens, _judgments(False), _cfg(reference_column="answer_ref"),
        None, claims,
    )  # fmt: skip
    long = t.long.set_index(["qid", "measure"])["value"]
    # q1 "SUPPORTED. Aspirin reduced fever [1]." is 4 words: token-F1 2 * 3/4 / (7/4) though a
    # claim-level reading exists; q4 is long: its claim score (claim_level_measure's default)
    assert long[("q1", "axis/correctness")] == pytest.approx(2 * 0.75 / 1.75)
    assert long[("q1", "correctness/claim_f1")] == 0.25  # reported beside it
    assert long[("q1", "correctness/claim_score")] == 0.35
    assert long[("q4", "axis/correctness")] == pytest.approx(0.9)
    assert long[("q4", "correctness/soft_recall")] == pytest.approx(0.9)
    assert long[("q4", "correctness/contradictions")] == 1.0
    # "coffee keeps people awake at night because ..." vs "coffee keeps you awake at night":
    # 5 common words, P 5/12, R 5/6
    assert long[("q4", "correctness/token_f1")] == pytest.approx(2 * 5 / (12 + 6))
    c = t.counts["correctness"]
    assert c["reads"] == {
        "claim_score": 1,
        "claim_f1": 0,
        "refusal_agreement": 0,
        "token_f1": 1,
        "verdict": 2,
        "surrogates": 0,
    }
    assert c["claim_level"]["failure_modes"]["wrong_number"] == 2
    assert c["reference"] == {
        "reference_absent": 1,
        "reference_empty": 1,
        "reference_other_language": 0,
    }
    pq = t.per_query.set_index("qid")
    assert (pq.loc["q1", "correctness_reads"], pq.loc["q4", "correctness_reads"]) == (
        "token_f1",
        "claim_score",
    )
    # the thresholded claim F1 on request
    t1 = scorecard_tables(
        queries, QRELS, RUN, gens, _judgments(False),
        _cfg(reference_column="answer_ref", claim_level_measure="claim_f1"), None, claims,
    )  # fmt: skip
    assert t1.long.set_index(["qid", "measure"])["value"][("q4", "axis/correctness")] == 0.8
    assert t1.counts["correctness"]["reads"]["claim_f1"] == 1
    # a higher threshold sends q4 back to token-F1, and the note says why
    t2 = scorecard_tables(
        queries, QRELS, RUN, gens, _judgments(False),
        _cfg(reference_column="answer_ref", claim_level_min_tokens=20), None, claims,
    )  # fmt: skip
    assert t2.long.set_index(["qid", "measure"])["value"][("q4", "axis/correctness")] == (
        pytest.approx(10 / 18)
    )


def test_a_refusal_pair_reads_its_agreement_whatever_the_length():
    gens = _gens()
    gens.loc[3, "answer"] = "I don't know."
    queries = _queries(answer_ref=["aspirin reduced fever", "x", "x", "The passages do not say."])
    claims = _claims_table(q1=0.5)
    claims = pd.concat([claims, claims.assign(qid="q4")], ignore_index=True)
    claims.loc[1, ["status", "answer_kind", "reference_kind", "claim_score", "failure_mode"]] = [
        "refusal", "refusal", "refusal", 1.0, "",
    ]  # fmt: skip
    for col in ("claim_precision", "claim_recall", "claim_f1", "soft_f1"):
        claims.loc[1, col] = None
    t = scorecard_tables(
        queries, QRELS, RUN, gens, _judgments(False), _cfg(reference_column="answer_ref"),
        None, claims,
    )  # fmt: skip
    long = t.long.set_index(["qid", "measure"])["value"]
    assert long[("q4", "axis/correctness")] == 1.0  # token-F1 would be 0
    assert long[("q4", "correctness/refusal_agreement")] == 1.0
    c = t.counts["correctness"]
    assert c["reads"]["refusal_agreement"] == 1
    assert c["claim_level"]["failure_modes"]["none"] == 1
    # with the thresholded F1, a refusal pair is unscored and keeps token-F1 as before
    t1 = scorecard_tables(
        queries, QRELS, RUN, gens, _judgments(False),
        _cfg(reference_column="answer_ref", claim_level_measure="claim_f1"), None, claims,
    )  # fmt: skip
    assert t1.long.set_index(["qid", "measure"])["value"][("q4", "axis/correctness")] == 0.0
    assert "claim-level correctness: 1 answers refusal, token-F1 used" in t1.notes


def test_long_answers_without_a_claim_level_reading_are_noted():
    gens = _gens()
    gens.loc[3, "answer"] = LONG
    queries = _queries(answer_ref=["aspirin reduced fever", "x", "x", "Coffee keeps you awake."])
    claims = _claims_table(q1=0.5)
    t = scorecard_tables(
        queries, QRELS, RUN, gens, _judgments(False), _cfg(reference_column="answer_ref"),
        None, claims,
    )  # fmt: skip
    assert "1 answers of >= 8 tokens scored by token-F1: the judge has no claim-level " \
        "reading of them" in t.notes  # fmt: skip
    with pytest.raises(ConfigError, match="judge.correctness.reference_column"):
        scorecard_tables(
            queries, QRELS, RUN, gens, _judgments(False), _cfg(reference_column="text"),
            None, claims,
        )  # fmt: skip


def test_bad_references_are_counted_never_scored_zero():
    gens = _gens()
    gens.loc[0, "answer"] = "Aspirin reduced the fever of the adults in the trial quickly."
    queries = _queries(
        answer_ref=[
            "L'aspirine a réduit la fièvre des adultes dans cet essai.",
            "   ",
            None,
            None,
        ],
        claim_label=["unknown"] * 4,
    )
    t = scorecard_tables(
        queries, QRELS, RUN, gens, _judgments(False), _cfg(reference_column="answer_ref")
    )
    c = t.counts["correctness"]
    assert c["reference"] == {
        "reference_absent": 2,
        "reference_empty": 1,
        "reference_other_language": 1,
    }
    assert c["sources"]["reference"] == 0
    assert not any(m.startswith("correctness/token_f1") for m in t.long["measure"])
    assert not t.long["value"].map(math.isnan).any()
    assert (
        "1 answers have a reference answer in another language than the answer: not scored "
        "against it (counted as reference_other_language; a claim label or the surrogates "
        "score them when present)"
    ) in t.notes
    assert any(n.startswith("2 answers have no reference answer") for n in t.notes)
    assert any(n.startswith("1 answers have an empty reference answer") for n in t.notes)


def test_the_console_line_says_what_the_axis_read():
    from ragrig.report.scorecard import _correctness_line

    section = {
        "reads": {"claim_score": 3, "claim_f1": 0, "token_f1": 1, "verdict": 0, "surrogates": 0},
        "claim_score": {"mean": 0.625, "n": 3},
        "claim_f1": {"mean": 0.5, "n": 3},
        "claim_precision": {"mean": 0.75, "n": 3},
        "claim_recall": {"mean": 0.4, "n": 3},
        "contradictions": {"mean": 2 / 3, "n": 3},
        "token_f1": {"mean": 0.125, "n": 4},
        "claim_level": {"failure_modes": {"negation": 2, "wrong_number": 0, "none": 1}},
    }
    assert _correctness_line(section) == (
        "  correctness reads: claim_score 3, token_f1 1; claim score 0.6250 (n 3); "
        "claim F1 0.5000 (precision 0.7500, "
        "recall 0.4000, n 3); 2 contradicted claims; token-F1 0.1250 (n 4); failure modes: "
        "negation 2, none 1"
    )
    assert _correctness_line({"reads": dict.fromkeys(("claim_f1", "token_f1"), 0)}) == ""
