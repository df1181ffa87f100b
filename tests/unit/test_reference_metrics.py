"""Retrieval metrics and fusion against the worked examples in ../shared/reference_examples.json."""

from __future__ import annotations

import pytest

from ragrig.metrics.ir import mean_measures, per_query
from ragrig.retrieve.fusion import convex, rrf


def _gold(ex: dict) -> dict[str, dict[str, int]]:
    return {q: {d: 1 for d in docs} for q, docs in ex["gold"].items()}


def test_recall_mrr_ndcg_match_reference(reference):
    ex = reference["retrieval_metrics"]
    means = mean_measures(ex["runs"], _gold(ex), ["recall@5", "rr", "ndcg@5"])
    assert round(means["recall@5"], 3) == ex["expected"]["recall@5"] == 0.750
    assert round(means["rr"], 3) == ex["expected"]["mrr"] == 0.625
    assert round(means["ndcg@5"], 3) == ex["expected"]["ndcg@5"] == 0.627


def test_duplicate_id_in_ranking_raises(reference):
    ex = reference["retrieval_metrics"]
    with pytest.raises(ValueError, match="duplicate id 'd1'"):
        mean_measures({"q1": ["d1", "d1"]}, _gold(ex), ["recall@5"])


@pytest.mark.parametrize("measure", ["recall@0", "ndcg@-1"])
def test_non_positive_k_raises(measure):
    with pytest.raises(ValueError, match="k must be positive"):
        mean_measures({"q1": ["d1"]}, {"q1": {"d1": 1}}, [measure])


def test_missing_run_counts_as_empty_ranking(reference):
    ex = reference["retrieval_metrics"]
    runs = {q: r for q, r in ex["runs"].items() if q != "q3"}  # q3 (a hit at rank 1) missing
    means = mean_measures(runs, _gold(ex), ["recall@5", "rr"])
    assert means["recall@5"] == pytest.approx(0.5)
    assert means["rr"] == pytest.approx((0.5 + 1.0 + 0.0 + 0.0) / 4)


def test_query_without_relevant_documents_is_not_scored():
    table = per_query({"a": ["d1"], "b": ["d2"]}, {"a": {"d1": 1}, "b": {"d2": 0}}, ["recall@10"])
    assert table["qid"].tolist() == ["a"]
    assert table["value"].tolist() == [1.0]


def test_rrf_matches_reference(reference):
    ex = reference["reciprocal_rank_fusion"]
    fused = rrf({"dense": ex["dense"], "sparse": ex["sparse"]}, k=ex["k"])
    assert [d for d, _ in fused[:3]] == ex["expected_top3"] == ["d3", "d2", "d1"]
    for doc, score in fused[:3]:
        assert round(score, 5) == ex["expected_scores"][doc]


def test_rrf_errors():
    with pytest.raises(ValueError, match="duplicate id"):
        rrf({"dense": ["d1", "d2", "d1"]})
    with pytest.raises(ValueError, match="positive"):
        rrf({"dense": ["d1"]}, k=0)


def test_rrf_ties_broken_by_id():
    fused = rrf({"a": ["x", "y"], "b": ["y", "x"]})
    assert [d for d, _ in fused] == ["x", "y"]
    assert fused[0][1] == fused[1][1]


def test_convex_combination_minmax():
    fused = convex({"a": 1.0, "b": 0.5, "c": 0.0}, {"b": 10.0, "c": 20.0}, alpha=0.5)
    # dense minmax: a 1, b .5, c 0; sparse minmax: b 0, c 1, a absent -> lane minimum 0
    assert fused == [("a", 0.5), ("c", 0.5), ("b", 0.25)]
    with pytest.raises(ValueError):
        convex({}, {}, alpha=1.5)
