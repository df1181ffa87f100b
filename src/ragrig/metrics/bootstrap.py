"""Seeded percentile-bootstrap intervals of means over queries.

A measure's interval resamples its queries (in qid order) with replacement `resamples` times,
takes the mean of each resample and reports the (1 - level) / 2 and 1 - (1 - level) / 2
quantiles of those means (numpy's default linear interpolation). The resample indices depend
only on the seed and the number of queries, so the same seed and data give the same interval,
and measures defined on the same queries share their resamples (paired intervals).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

DEFAULT_RESAMPLES = 1000
DEFAULT_LEVEL = 0.95


def resample_indices(n: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples, n) indices drawn with replacement from range(n)."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, size=(resamples, n))


def bootstrap_interval(
    values: Sequence[float] | np.ndarray,
    *,
    seed: int,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
) -> np.ndarray:
    """Interval of the mean: `values` of shape (n,) gives [low, high]; (n, k) gives (2, k),
    one interval per column. Needs at least one value, no NaN, resamples >= 1, 0 < level < 1."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim not in (1, 2) or arr.shape[0] == 0:
        raise ValueError(f"bootstrap needs a non-empty vector or matrix, got shape {arr.shape}")
    if np.isnan(arr).any():
        raise ValueError("bootstrap values hold NaN; leave missing values out instead")
    if resamples < 1 or not 0.0 < level < 1.0:
        raise ValueError(
            f"bootstrap needs resamples >= 1 and 0 < level < 1, got {resamples}, {level}"
        )
    idx = resample_indices(arr.shape[0], resamples, seed)
    means = arr[idx].mean(axis=1)  # (resamples,) or (resamples, k)
    alpha = (1.0 - level) / 2.0
    return np.quantile(means, [alpha, 1.0 - alpha], axis=0)


def slice_intervals(
    long: pd.DataFrame,
    slices: pd.DataFrame,
    slice_names: Sequence[str],
    *,
    seed: int,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    prefixes: tuple[str, ...] = ("retrieval/", "judge/"),
) -> pd.DataFrame:
    """Interval of every measure with one of `prefixes`, per slice value and for the whole set
    (slice 'all'): columns slice, slice_value, measure, ci_low, ci_high, n.

    `long` is the report's per-query table (qid, measure, value; a missing value is an absent
    row) and `slices` one string column per slice plus qid. Measures measured on the same
    queries of a slice value are resampled together."""
    from ragrig.metrics.names import ALL

    sel = long[long["measure"].str.startswith(prefixes)]
    rows: list[tuple] = []
    if resamples < 1 or sel.empty:
        return pd.DataFrame(
            rows, columns=["slice", "slice_value", "measure", "ci_low", "ci_high", "n"]
        )
    wide = sel.pivot(index="qid", columns="measure", values="value").sort_index()
    joined = wide.join(slices.set_index("qid"), how="left")
    groups: list[tuple[str, str, pd.DataFrame]] = [(ALL, ALL, wide)]
    for name in slice_names:
        for value, g in joined.groupby(name, sort=True):
            groups.append((name, str(value), g[wide.columns]))
    for name, value, table in groups:
        present = table.notna()
        # measures defined on the same queries share one bootstrap
        patterns: dict[bytes, list[str]] = {}
        for m in table.columns:
            mask = present[m].to_numpy()
            if mask.any():
                patterns.setdefault(mask.tobytes(), []).append(m)
        for cols in patterns.values():
            mask = present[cols[0]].to_numpy()
            block = table.loc[mask, cols].to_numpy(dtype=float)
            lo, hi = bootstrap_interval(block, seed=seed, resamples=resamples, level=level)
            for j, m in enumerate(cols):
                rows.append((name, value, m, float(lo[j]), float(hi[j]), int(mask.sum())))
    out = pd.DataFrame(rows, columns=["slice", "slice_value", "measure", "ci_low", "ci_high", "n"])
    return out.sort_values(["slice", "slice_value", "measure"], kind="mergesort").reset_index(
        drop=True
    )


def bootstrap_ci(
    values: Sequence[float], seed: int, n_resamples: int = DEFAULT_RESAMPLES, alpha: float = 0.05
) -> tuple[float, float]:
    """(low, high) of the mean of one measure, drawn as `bootstrap_interval` draws it (the same
    seed and number of queries give the same resamples, so it equals the interval in
    metrics.json's `intervals`). One value gives (v, v). Empty input, a NaN or infinite value,
    alpha outside (0, 1) or n_resamples < 1 raise ValueError (never a NaN interval)."""
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
    low, high = bootstrap_interval(arr, seed=seed, resamples=n_resamples, level=1.0 - alpha)
    return float(low), float(high)
