"""Citations checked claim by claim (ragrig.judge.citations) with the overlap judge, and the
report's claim-level citation precision, recall and completeness (ragrig.report.answers)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ragrig.judge.citations import check_citations, sentence_items
from ragrig.judge.overlap import OverlapJudge
from ragrig.report.answers import claim_citation_measures

CONTEXTS = [
    "Mars has two moons, Phobos and Deimos. Phobos orbits closer to the planet.",
    "NASA's Curiosity rover landed on Mars in 2012. It explores Gale crater.",
]
ANSWER = (
    "Mars has two moons, Phobos and Deimos. [1] "
    "The Curiosity rover landed on Mars in 2012. [1, 2] "
    "It explores Gale crater. [7] "
    "Phobos orbits closer to the planet."
)


def test_each_cited_passage_is_checked_against_the_sentence_citing_it():
    assert [c for _, c in sentence_items(ANSWER)] == [[1], [1, 2], [7], []]
    got = check_citations(OverlapJudge(), "What orbits Mars?", ANSWER, CONTEXTS)
    checks = json.loads(got.pop("citation_checks"))
    # passage 1 supports the first sentence and not the second, passage 2 the second; [7]
    # names no passage; the last sentence states something and cites nothing
    assert [c["supports"] for c in checks] == [[True], [False, True], [False], []]
    assert [c["needs_support"] for c in checks] == [True, True, True, True]
    assert got == {
        "citation_pairs": 4,
        "citation_pairs_supported": 2,
        "claims_needing_support": 4,
        "claims_cited_supported": 2,
    }
    refusal = check_citations(OverlapJudge(), "q", "I do not have that information. [1]", CONTEXTS)
    assert (refusal["citation_pairs"], refusal["claims_needing_support"]) == (1, 0)


def test_report_pools_claim_level_citations_and_averages_completeness():
    judgments = pd.DataFrame(
        {
            "qid": ["q1", "q2", "q3", "q4"],
            "status": ["scored", "scored", "no_claims", "error"],
            "citation_pairs": [4, 0, 1, 3],
            "citation_pairs_supported": [2, 0, 0, 3],
            "claims_needing_support": [4, 2, 0, 3],
            "claims_cited_supported": [2, 0, 0, 3],
        }
    )
    long, summary = claim_citation_measures(judgments)
    values = {(q, m): v for q, m, v in long.itertuples(index=False)}
    assert values == {
        ("q1", "citation/claim_precision"): 0.5,
        ("q1", "citation/claim_recall"): 0.5,
        ("q2", "citation/claim_recall"): 0.0,  # states two things, cites nothing
        ("q3", "citation/claim_precision"): 0.0,
    }
    # q4's judgment failed: not read; pooled over q1-q3
    assert summary["precision"] == pytest.approx(2 / 5) and summary["recall"] == pytest.approx(
        2 / 6
    )
    assert summary["mean_completeness"] == pytest.approx(0.25)
    assert (summary["answers"], summary["answers_citing"]) == (3, 2)
    assert claim_citation_measures(judgments.drop(columns="citation_pairs"))[1] is None
