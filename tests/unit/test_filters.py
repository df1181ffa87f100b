"""The filter false-exclusion rate and Recall@k under filters, against the worked example in
../shared/reference_examples.json (`filter_false_exclusion`)."""

from __future__ import annotations

import pytest

from ragrig.metrics.filters import (
    false_exclusion,
    hard_or_soft,
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


def _sides(n: int, hard_p: float, soft_p: float, hard_r: float, soft_r: float):
    q = [f"q{i}" for i in range(n)]
    return (
        dict.fromkeys(q, hard_p),
        dict.fromkeys(q, soft_p),
        dict.fromkeys(q, hard_r),
        dict.fromkeys(q, soft_r),
    )


def test_hard_filter_chosen_only_when_all_three_preregistered_conditions_hold():
    limits = {"min_gain": 0.05, "max_exclusion": 0.1, "max_recall_loss": 0.02, "seed": 13}
    # every query gains 0.2 precision, loses no recall, 5% excluded: hard
    ok = hard_or_soft(*_sides(10, 0.6, 0.4, 0.8, 0.8), 0.05, **limits)
    assert ok.use_hard and ok.reasons == ()
    assert ok.precision_gain == pytest.approx(0.2) and ok.gain_interval == pytest.approx((0.2, 0.2))
    # the same gain, but 20% of the eligible queries lose every gold document
    excl = hard_or_soft(*_sides(10, 0.6, 0.4, 0.8, 0.8), 0.2, **limits)
    assert not excl.use_hard and excl.reasons == ("false-exclusion rate 0.2000 > 0.1",)
    # recall drops by 0.05 per query
    loss = hard_or_soft(*_sides(10, 0.6, 0.4, 0.75, 0.8), 0.0, **limits)
    assert loss.reasons == ("recall change -0.0500 < -0.02",)
    # a gain whose interval reaches below the minimum: half the queries gain 0.2, half lose 0.1
    hp = {f"q{i}": (0.6 if i % 2 else 0.3) for i in range(20)}
    sp = dict.fromkeys(hp, 0.4)
    rec = dict.fromkeys(hp, 0.8)
    noisy = hard_or_soft(hp, sp, rec, dict(rec), 0.0, **limits)
    assert noisy.precision_gain == pytest.approx(0.05) and noisy.gain_interval[0] < 0.05
    assert not noisy.use_hard and noisy.reasons[0].startswith("gain's lower bound")


def test_hard_or_soft_refuses_different_query_sets():
    hp, sp, hr, sr = _sides(3, 0.5, 0.4, 0.8, 0.8)
    del sr["q1"]
    with pytest.raises(ValueError, match="soft recall is not over the same queries"):
        hard_or_soft(hp, sp, hr, sr, 0.0, min_gain=0, max_exclusion=1, max_recall_loss=1, seed=1)
