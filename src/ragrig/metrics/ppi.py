"""Prediction-powered inference (Angelopoulos et al. 2023; the ARES approach) for a share of
faithful answers: the judge's verdicts on every answer, corrected by a sample of human labels.

With N judged answers (judge value f_i in [0, 1] each: the per-answer decision, 1 judged
faithful, or a score) and n of them labelled by people (human y_j in {0, 1}):

    estimate  = mean_N(f) + mean_n(y - f)
    variance  = var_N(f) / N + var_n(y - f) / n          (sample variances, ddof = 1)
    interval  = estimate -/+ z_(1 - alpha/2) * sqrt(variance), clipped to [0, 1]

The correction term removes the judge's bias on average, whatever the judge; the interval is
narrower than the labels' own (the classical mean of y over n) when the judge agrees with people,
and never biased when it does not. The labelled answers are a uniform sample of the judged ones
(`ragrig label` draws them so, within strata whose weights it records), and are also counted in
mean_N(f): N counts every judged answer.

`coverage` repeats the draw: n labels sampled without replacement from a fully labelled set,
the share of intervals holding the whole set's human rate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

MIN_LABELS = 2  # a sample variance needs two


def _z(alpha: float) -> float:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return NormalDist().inv_cdf(1.0 - alpha / 2.0)


def ppi_mean(
    judged: Sequence[float],
    labelled_judge: Sequence[float],
    labelled_human: Sequence[float],
    alpha: float = 0.05,
) -> dict[str, Any]:
    """The prediction-powered estimate of the human faithful rate with its (1 - alpha)
    interval, and the labels-only (classical) estimate beside it."""
    f = np.asarray(judged, dtype=float)
    fl = np.asarray(labelled_judge, dtype=float)
    y = np.asarray(labelled_human, dtype=float)
    if len(fl) != len(y):
        raise ValueError(f"PPI: {len(fl)} judge values for {len(y)} human labels")
    if len(y) < MIN_LABELS:
        raise ValueError(f"PPI needs at least {MIN_LABELS} labelled answers, got {len(y)}")
    if len(f) < MIN_LABELS:
        raise ValueError(f"PPI needs at least {MIN_LABELS} judged answers, got {len(f)}")
    for name, v in (("judge value", f), ("judge value", fl), ("human label", y)):
        if not np.all(np.isfinite(v)) or v.min() < 0.0 or v.max() > 1.0:
            raise ValueError(f"PPI: every {name} must be in [0, 1]")
    z = _z(alpha)
    rectifier = y - fl
    estimate = float(f.mean() + rectifier.mean())
    se = math.sqrt(f.var(ddof=1) / len(f) + rectifier.var(ddof=1) / len(y))
    classical_se = math.sqrt(y.var(ddof=1) / len(y))
    return {
        "estimate": estimate,
        "ci_low": max(0.0, estimate - z * se),
        "ci_high": min(1.0, estimate + z * se),
        "se": se,
        "judge_mean": float(f.mean()),
        "correction": float(rectifier.mean()),
        "n_judged": len(f),
        "n_labelled": len(y),
        "alpha": alpha,
        "labels_only": {
            "estimate": float(y.mean()),
            "ci_low": max(0.0, float(y.mean()) - z * classical_se),
            "ci_high": min(1.0, float(y.mean()) + z * classical_se),
        },
    }


def coverage(
    judge_values: Sequence[float],
    human: Sequence[float],
    n: int,
    draws: int,
    seed: int,
    alpha: float = 0.05,
) -> dict[str, Any]:
    """Over `draws` samples of n labels (without replacement, numpy's PCG64 from `seed`) of a
    fully labelled set: the share of PPI intervals holding the set's human rate, their mean
    width, and the same of the labels-only interval."""
    f = np.asarray(judge_values, dtype=float)
    y = np.asarray(human, dtype=float)
    if len(f) != len(y):
        raise ValueError(f"coverage: {len(f)} judge values for {len(y)} human labels")
    if not MIN_LABELS <= n <= len(y):
        raise ValueError(f"coverage: n must be in [{MIN_LABELS}, {len(y)}], got {n}")
    if draws < 1:
        raise ValueError(f"coverage: draws must be >= 1, got {draws}")
    truth = float(y.mean())
    rng = np.random.default_rng(seed)
    held = widths = classical_held = classical_widths = 0.0
    for _ in range(draws):
        idx = rng.choice(len(y), size=n, replace=False)
        r = ppi_mean(f, f[idx], y[idx], alpha)
        held += r["ci_low"] <= truth <= r["ci_high"]
        widths += r["ci_high"] - r["ci_low"]
        c = r["labels_only"]
        classical_held += c["ci_low"] <= truth <= c["ci_high"]
        classical_widths += c["ci_high"] - c["ci_low"]
    return {
        "n": n,
        "draws": draws,
        "human_rate": truth,
        "coverage": held / draws,
        "mean_width": widths / draws,
        "labels_only_coverage": classical_held / draws,
        "labels_only_mean_width": classical_widths / draws,
    }
