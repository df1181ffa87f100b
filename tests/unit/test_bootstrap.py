"""bootstrap_ci: a seeded percentile interval of the mean over queries."""

from __future__ import annotations

import numpy as np
import pytest

from ragrig.metrics.bootstrap import bootstrap_ci


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


def test_seeded_and_the_same_in_blocks_as_at_once():
    rng = np.random.default_rng(0)
    values = rng.random(3000).tolist()  # 3,000 values: resampled in blocks of 666
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
