"""Paired deltas: exact per-query deltas, bootstrap interval, randomisation p, query-set check."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ragrig.core.errors import DataValidationError
from ragrig.metrics.deltas import (
    bootstrap_interval,
    compare_runs,
    format_comparison,
    randomisation_p,
)

QRELS = {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 1, "d4": 0}}
RUN_A = {"q1": ["d9", "d1"], "q2": ["d2"], "q3": ["d8", "d7", "d3"]}
RUN_B = {"q1": ["d1", "d9"], "q2": ["d2"], "q3": ["d3"]}


def _row(summary: pd.DataFrame, measure: str, slice_="all", value="all") -> dict:
    sel = summary[
        (summary["slice"] == slice_)
        & (summary["slice_value"] == value)
        & (summary["measure"] == measure)
    ]
    assert len(sel) == 1
    return sel.iloc[0].to_dict()


def test_per_query_deltas_are_exact():
    c = compare_runs(RUN_A, RUN_B, QRELS, seed=13)
    d = c.per_query.set_index(["measure", "qid"])["delta"]
    assert d[("rr", "q1")] == pytest.approx(0.5)
    assert d[("rr", "q2")] == 0.0
    assert d[("rr", "q3")] == pytest.approx(2 / 3)
    assert d[("p@1", "q1")] == 1.0 and d[("p@1", "q3")] == 1.0 and d[("p@1", "q2")] == 0.0
    assert d[("ndcg@10", "q1")] == pytest.approx(1 - 1 / math.log2(3))
    assert d[("ndcg@10", "q3")] == pytest.approx(1 - 1 / math.log2(4))
    rr = _row(c.summary, "rr")
    assert rr["n"] == 3
    assert rr["mean_a"] == pytest.approx((0.5 + 1 + 1 / 3) / 3)
    assert rr["mean_b"] == 1.0
    assert rr["delta"] == pytest.approx((0.5 + 2 / 3) / 3)
    # exact sign-flip test over 2^3 patterns: two of eight reach the observed mean, two-sided
    assert rr["p_value"] == pytest.approx(0.5)
    p1 = _row(c.summary, "p@1")
    # resampled means of (1, 0, 1) are 0 with probability 1/27 > 2.5% and 1 with 8/27 > 2.5%
    assert (p1["ci_low"], p1["ci_high"]) == (0.0, 1.0)
    assert p1["p_value"] == pytest.approx(0.5)


def test_identical_runs_give_zero_delta_interval_and_p_one():
    c = compare_runs(RUN_A, dict(RUN_A), QRELS, seed=13)
    for m in ("ndcg@10", "rr", "p@1"):
        r = _row(c.summary, m)
        assert (r["delta"], r["ci_low"], r["ci_high"], r["p_value"]) == (0.0, 0.0, 0.0, 1.0)


def test_slices_and_a_one_query_bucket_has_no_interval():
    slices = pd.DataFrame({"qid": ["q1", "q2", "q3"], "kind": ["x", "x", "y"]})
    c = compare_runs(RUN_A, RUN_B, QRELS, seed=13, slices=slices, slice_names=["kind"])
    x = _row(c.summary, "rr", "kind", "x")
    assert x["n"] == 2 and x["delta"] == pytest.approx(0.25)
    y = _row(c.summary, "rr", "kind", "y")
    assert y["n"] == 1 and y["delta"] == pytest.approx(2 / 3)
    assert y["ci_low"] is None and y["ci_high"] is None
    assert y["p_value"] == 1.0  # two sign patterns, both as extreme as observed
    d = c.as_dict()
    assert d["slices"]["kind"]["y"]["rr"]["ci_low"] is None
    assert set(c.metrics()) == {"ndcg@10", "rr", "p@1"}
    assert "ci_low" in c.metrics()["rr"]
    assert "kind=y" in format_comparison(c)


def test_bootstrap_and_p_value_are_seeded_and_deterministic():
    deltas = [0.1, -0.2, 0.3, 0.0, 0.5, 0.25, -0.05, 0.4, 0.2, 0.1, 0.0, 0.35]
    a = bootstrap_interval(deltas, seed=13)
    assert a == bootstrap_interval(deltas, seed=13)
    assert a != bootstrap_interval(deltas, seed=14)
    assert a[0] < sum(deltas) / len(deltas) < a[1]
    p = randomisation_p(deltas, seed=13, n_resamples=2000)
    assert p == randomisation_p(deltas, seed=13, n_resamples=2000)
    assert 0.0 < p < 0.05


def test_runs_on_different_query_sets_are_refused_in_one_line():
    other = {"q1": ["d1"], "q2": ["d2"], "q4": ["d3"]}
    with pytest.raises(DataValidationError) as e:
        compare_runs(RUN_A, other, QRELS, seed=13)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.endswith(
        "paired deltas need runs on the same queries: 1 query id ('q3') only in A, "
        "1 query id ('q4') only in B"
    )


def test_a_query_the_slice_table_lacks_is_counted_as_missing():
    slices = pd.DataFrame({"qid": ["q1", "q2"], "kind": ["x", "x"]})
    c = compare_runs(RUN_A, RUN_B, QRELS, seed=13, slices=slices, slice_names=["kind"])
    missing = _row(c.summary, "rr", "kind", "missing")
    assert missing["n"] == 1 and missing["delta"] == pytest.approx(2 / 3)
    assert _row(c.summary, "rr", "kind", "x")["n"] == 2
    n = c.as_dict()["slices"]["kind"]["missing"]["rr"]["n"]
    assert n == 1 and type(n) is int
