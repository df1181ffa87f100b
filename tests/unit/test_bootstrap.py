"""Seeded bootstrap intervals: exact values against a direct numpy computation, determinism,
and per-slice intervals in the report's metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ragrig.metrics.bootstrap import bootstrap_ci, bootstrap_interval, slice_intervals

VALUES = [0.0, 1.0, 0.5, 0.25, 1.0]


def _direct(values: list[float], seed: int, resamples: int, level: float) -> list[float]:
    """The textbook percentile bootstrap written out with numpy, resample by resample."""
    rng = np.random.default_rng(seed)
    v = np.asarray(values)
    idx = rng.integers(0, len(v), size=(resamples, len(v)))
    means = [float(np.mean(v[row])) for row in idx]
    a = (1 - level) / 2
    return [float(np.quantile(means, a)), float(np.quantile(means, 1 - a))]


def test_interval_matches_direct_numpy_computation():
    lo, hi = bootstrap_interval(VALUES, seed=13, resamples=200, level=0.95)
    assert [lo, hi] == pytest.approx(_direct(VALUES, 13, 200, 0.95), abs=1e-12)
    assert lo < float(np.mean(VALUES)) < hi
    # a tiny case worked out by hand: 2 resamples of 2 values with seed 0
    idx = np.random.default_rng(0).integers(0, 2, size=(2, 2))
    means = sorted(float(np.mean(np.array([0.0, 1.0])[r])) for r in idx)
    lo, hi = bootstrap_interval([0.0, 1.0], seed=0, resamples=2, level=0.5)
    assert (lo, hi) == pytest.approx(
        (means[0] + 0.25 * (means[1] - means[0]), means[0] + 0.75 * (means[1] - means[0]))
    )


def test_same_seed_same_interval_other_seed_other_interval():
    a = bootstrap_interval(VALUES, seed=7)
    b = bootstrap_interval(VALUES, seed=7)
    c = bootstrap_interval(VALUES, seed=8)
    assert a.tolist() == b.tolist()
    assert a.tolist() != c.tolist()


def test_columns_share_resamples_and_constant_values_have_a_point_interval():
    block = np.array([[0.0, 3.0], [1.0, 3.0], [0.5, 3.0], [0.25, 3.0], [1.0, 3.0]])
    (lo0, lo1), (hi0, hi1) = bootstrap_interval(block, seed=13)
    assert [lo0, hi0] == bootstrap_interval(VALUES, seed=13).tolist()
    assert (lo1, hi1) == (3.0, 3.0)


@pytest.mark.parametrize("bad", [[], [float("nan"), 1.0]])
def test_bad_values_are_refused(bad):
    with pytest.raises(ValueError):
        bootstrap_interval(bad, seed=1)


def test_slice_intervals_per_value_and_whole_set():
    long = pd.DataFrame(
        {
            "qid": ["a", "b", "c", "d", "a", "c", "a", "b", "c", "d"],
            "measure": ["retrieval/ndcg@10"] * 4 + ["judge/faithfulness"] * 2 + ["lane/x"] * 4,
            "value": [1.0, 0.0, 0.5, 0.25, 0.9, 0.1, 1, 1, 1, 1],
        }
    )
    slices = pd.DataFrame({"qid": ["a", "b", "c", "d"], "label": ["x", "y", "x", "y"]})
    out = slice_intervals(long, slices, ["label"], seed=5, resamples=100)
    got = {
        (r.slice, r.slice_value, r.measure): (r.ci_low, r.ci_high, r.n) for r in out.itertuples()
    }
    assert set(got) == {
        ("all", "all", "retrieval/ndcg@10"),
        ("all", "all", "judge/faithfulness"),
        ("label", "x", "retrieval/ndcg@10"),
        ("label", "x", "judge/faithfulness"),
        ("label", "y", "retrieval/ndcg@10"),
    }  # lane/ measures are not interval'd; 'y' has no judged query
    assert got[("all", "all", "retrieval/ndcg@10")] == pytest.approx(
        (*_direct([1.0, 0.0, 0.5, 0.25], 5, 100, 0.95), 4)
    )
    assert got[("label", "y", "retrieval/ndcg@10")] == pytest.approx(
        (*_direct([0.0, 0.25], 5, 100, 0.95), 2)
    )  # queries b, d in qid order
    assert got[("label", "x", "judge/faithfulness")] == pytest.approx(
        (*_direct([0.9, 0.1], 5, 100, 0.95), 2)
    )
    assert slice_intervals(long, slices, ["label"], seed=5, resamples=0).empty


# --- bootstrap_ci: one measure's interval (the HTML page) ---


def test_constant_values_give_a_zero_width_interval():
    assert bootstrap_ci([0.25] * 7, seed=13) == (0.25, 0.25)
    assert bootstrap_ci([0.8], seed=1) == (0.8, 0.8)


def test_half_ones_interval_matches_the_normal_approximation():
    # 400 values, mean 0.5, standard error sqrt(0.25 / 400) = 0.025: 95% about 0.5 +- 0.049
    values = [0.0, 1.0] * 200
    low, high = bootstrap_ci(values, seed=13, n_resamples=4000)
    assert low == pytest.approx(0.451, abs=0.008)
    assert high == pytest.approx(0.549, abs=0.008)
    # a wider alpha gives a narrower interval inside it
    low50, high50 = bootstrap_ci(values, seed=13, n_resamples=4000, alpha=0.5)
    assert low < low50 < 0.5 < high50 < high
    assert high50 - low50 == pytest.approx(2 * 0.6745 * 0.025, abs=0.006)


def test_bootstrap_ci_is_seeded_and_equals_one_draw_of_all_resamples():
    rng = np.random.default_rng(0)
    values = rng.random(3000).tolist()
    got = bootstrap_ci(values, seed=13)
    assert got == bootstrap_ci(values, seed=13)
    assert got != bootstrap_ci(values, seed=14)
    ref = np.random.default_rng(13)
    arr = np.asarray(values)
    means = arr[ref.integers(0, arr.size, size=(1000, arr.size))].mean(axis=1)
    assert got == tuple(float(x) for x in np.quantile(means, [0.025, 0.975]))


@pytest.mark.parametrize(
    "values, kwargs, message",
    [
        ([], {}, "no values"),
        ([0.5, float("nan")], {}, "1 of 2 values are NaN"),
        ([0.5, float("inf")], {}, "NaN or infinite"),
        ([0.5], {"alpha": 1.0}, "alpha"),
        ([0.5], {"n_resamples": 0}, "n_resamples"),
    ],
)
def test_bad_input_raises(values, kwargs, message):
    with pytest.raises(ValueError, match=message):
        bootstrap_ci(values, seed=0, **kwargs)
