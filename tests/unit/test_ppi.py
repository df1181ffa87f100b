"""Prediction-powered inference (ragrig.metrics.ppi): a worked example, its limits, coverage."""

from __future__ import annotations

import math

import pytest

from ragrig.metrics.ppi import coverage, ppi_mean

Z95 = 1.959963984540054


def test_worked_example():
    judged = [1, 1, 0, 1, 0, 1, 1, 0, 1, 1]  # N = 10, judge mean 0.7
    # the first four labelled: the judge said faithful to the second, people did not
    r = ppi_mean(judged, judged[:4], [1, 0, 0, 1])
    assert r["judge_mean"] == pytest.approx(0.7) and r["correction"] == -0.25
    assert r["estimate"] == pytest.approx(0.45)
    # var_N(f) = 2.1 / 9 over N = 10; var_n(y - f) = 0.75 / 3 over n = 4
    assert r["se"] == pytest.approx(math.sqrt(2.1 / 9 / 10 + 0.75 / 3 / 4))
    assert r["ci_low"] == 0.0  # 0.45 - 1.96 * 0.293 < 0: clipped
    assert r["ci_high"] == 1.0
    assert (r["n_judged"], r["n_labelled"]) == (10, 4)
    # the labels alone: 0.5 -/+ 1.96 * sqrt((1/3) / 4) = 0.5 -/+ 0.566, clipped to [0, 1]
    assert r["labels_only"] == {"estimate": 0.5, "ci_low": 0.0, "ci_high": 1.0}


def test_a_judge_that_agrees_with_people_needs_no_correction():
    judged = [1.0] * 30 + [0.0] * 10
    r = ppi_mean(judged, judged[:5] + judged[-5:], judged[:5] + judged[-5:])
    assert r["correction"] == 0.0 and r["estimate"] == 0.75
    # only the judge's own spread remains: var_N(f) = 7.5 / 39 (ddof 1) over N = 40
    assert r["ci_high"] - r["estimate"] == pytest.approx(Z95 * math.sqrt(7.5 / 39 / 40))
    # the interval holds the truth every time
    assert coverage(judged, judged, 10, 50, seed=1)["coverage"] == 1.0


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (([1, 0], [1], [1]), "at least 2 labelled answers, got 1"),
        (([1], [1, 0], [1, 0]), "at least 2 judged answers, got 1"),
        (([1, 0], [1, 0], [1]), "2 judge values for 1 human labels"),
        (([1, 0], [1, 0], [1, 2]), "every human label must be in"),
        (([1, float("nan")], [1, 0], [1, 0]), "every judge value must be in"),
    ],
)
def test_what_ppi_cannot_estimate_raises(args, match):
    with pytest.raises(ValueError, match=match):
        ppi_mean(*args)


def test_coverage_is_seeded_and_checks_its_sample_size():
    f = [0.9, 0.2, 0.8, 0.7, 0.1, 0.95, 0.6, 0.3] * 5
    y = [1, 0, 1, 0, 0, 1, 1, 1] * 5
    a = coverage(f, y, 10, 200, seed=7)
    assert a == coverage(f, y, 10, 200, seed=7)
    assert a["human_rate"] == 0.625 and 0.0 < a["coverage"] <= 1.0 and a["mean_width"] > 0
    with pytest.raises(ValueError, match=r"n must be in \[2, 40\], got 41"):
        coverage(f, y, 41, 10, seed=7)
