"""Percentile bootstrap interval of a mean over queries (pure: values and a seed in, two floats out).

Resampling is over queries (each query's value drawn with replacement, as many as there are),
so the interval says how much the mean would move on another query set of the same size from
the same population. The seed makes the interval byte-identical from run to run.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def bootstrap_ci(
    values: Sequence[float], seed: int, n_resamples: int = 1000, alpha: float = 0.05
) -> tuple[float, float]:
    """(low, high): the alpha/2 and 1 - alpha/2 quantiles of the mean of `n_resamples`
    resamples of `values`. One value gives (v, v). Empty input, a NaN or infinite value, or
    alpha outside (0, 1) raise ValueError (never a NaN interval)."""
    arr = np.asarray([float(v) for v in values], dtype=float)
    if arr.size == 0:
        raise ValueError("bootstrap_ci: no values")
    if not np.isfinite(arr).all():
        bad = int((~np.isfinite(arr)).sum())
        raise ValueError(f"bootstrap_ci: {bad} of {arr.size} values are NaN or infinite")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"bootstrap_ci: alpha must be in (0, 1), got {alpha}")
    if n_resamples < 1:
        raise ValueError(f"bootstrap_ci: n_resamples must be >= 1, got {n_resamples}")
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples, dtype=float)
    # in blocks, so a large query set does not allocate n_resamples x n at once
    block = max(1, min(n_resamples, 2_000_000 // arr.size))
    for start in range(0, n_resamples, block):
        stop = min(start + block, n_resamples)
        idx = rng.integers(0, arr.size, size=(stop - start, arr.size))
        means[start:stop] = arr[idx].mean(axis=1)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)
