"""The filter false-exclusion rate and Recall@k under filters, against the worked example in
../shared/reference_examples.json (`filter_false_exclusion`)."""

from __future__ import annotations

import pytest

from ragrig.metrics.filters import (
    false_exclusion,
    passing,
    recall_at_k,
    recall_over_filtered_gold,
)


def _example(reference, with_q5=False):
    ex = reference["filter_false_exclusion"]
    metadata = {d["id"]: {k: v for k, v in d.items() if k != "id"} for d in ex["docs"]}
    queries = ex["queries"] + ([ex["unauthorized_only_query"]] if with_q5 else [])
    gold = {q["qid"]: q["gold"] for q in queries}
    filters = {q["qid"]: q["filter"] for q in queries}
    return ex, metadata, gold, filters


def _filtered_rankings(metadata, filters, eligibility):
    """What a hard-filtered retriever can return at best: every eligible document its filter
    keeps, in id order (10 or fewer here, so recall@10 sees all of them)."""
    eligible = passing(metadata, eligibility)
    allowed = {q: passing(metadata, f) & eligible for q, f in filters.items()}
    return {q: sorted(docs) for q, docs in allowed.items()}, allowed, eligible


def test_false_exclusion_rate_matches_the_reference(reference):
    ex, metadata, gold, filters = _example(reference)
    caller = ex["caller_eligibility"]
    assert sorted(passing(metadata, caller)) == ex["expected"]["eligible_docs"]
    out = false_exclusion(gold, filters, metadata, caller)
    assert out.rate == ex["expected"]["false_exclusion_rate"] == 0.5
    assert out.eligible_queries == ex["expected"]["eligible_query_count"] == 4
    assert out.excluded_queries == ("q1", "q3")  # d2 is en-GB, d6 fr-FR: an en-US filter drops both
    assert (out.document_rate, out.eligible_gold) == (0.5, 4)


def test_recall_keeps_the_original_eligible_gold_and_the_rebuilt_set_inflates_it(reference):
    ex, metadata, gold, filters = _example(reference)
    rankings, allowed, eligible = _filtered_rankings(metadata, filters, ex["caller_eligibility"])
    assert recall_at_k(rankings, gold, eligible, 10) == ex["expected"]["standard_recall@10"]
    invalid = recall_over_filtered_gold(rankings, gold, allowed, 10)
    assert invalid == ex["expected"]["invalid_recall_over_filtered_gold"] == 1.0


def test_a_query_with_only_unauthorised_gold_changes_nothing(reference):
    ex, metadata, gold, filters = _example(reference, with_q5=True)
    out = false_exclusion(gold, filters, metadata, ex["caller_eligibility"])
    assert (out.rate, out.eligible_queries) == (0.5, 4)  # q5's gold d3 is globex's
    assert out.ineligible_only == ("q5",)


def test_no_eligible_query_raises_instead_of_a_zero_rate(reference):
    ex, metadata, _, _ = _example(reference)
    with pytest.raises(ValueError, match="an unmeasured rate is not 0"):
        false_exclusion({"q5": ["d3"]}, {"q5": {"locale": "en-US"}}, metadata, {"tenant": "acme"})
    with pytest.raises(ValueError, match="no metadata"):
        false_exclusion({"q1": ["d9"]}, {}, metadata, None)
