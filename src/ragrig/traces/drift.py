"""Drift of a window against the reference window: its queries (a two-sample test on their
embeddings), its answers' length and its refusal rate.

* Query drift: the squared maximum mean discrepancy (MMD², biased estimate) between the two
  windows' query embeddings under a Gaussian kernel whose bandwidth is the median pairwise
  distance of the pooled sample (the median heuristic), with a permutation p-value: the share of
  `permutations` random relabellings of the pooled sample (seeded) whose MMD² is at least the
  observed one, counted with the observed as (1 + hits) / (1 + permutations).
* Answer length (words): the Mann-Whitney U test's two-sided p-value (scipy).
* Refusal rate: Fisher's exact test on the 2x2 table of refusals and answers (scipy).
* Slice mix (query drift by intent, locale or any slice the log carries, on every line): per
  slice key, the chi-square test of the 2 x K table of the two windows' counts per value
  (scipy), Bonferroni-corrected over the keys; the shift named is the value whose share moved
  most. It reads counts, not coordinates: it cannot mislead the way an embedding distance can
  when the model changes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _sq_dists(x: np.ndarray) -> np.ndarray:
    sq = (x * x).sum(axis=1)
    return np.maximum(sq[:, None] + sq[None, :] - 2.0 * (x @ x.T), 0.0)


def _mmd2(k: np.ndarray, n: int) -> float:
    """Biased MMD² of the first n rows/cols against the rest, from the pooled kernel matrix."""
    xx = k[:n, :n].mean()
    yy = k[n:, n:].mean()
    xy = k[:n, n:].mean()
    return float(xx + yy - 2.0 * xy)


def mmd_test(
    reference: np.ndarray, window: np.ndarray, permutations: int, seed: int
) -> tuple[float, float]:
    """(MMD², permutation p-value) of two samples of vectors (rows)."""
    x = np.asarray(reference, dtype=np.float64)
    y = np.asarray(window, dtype=np.float64)
    if len(x) < 2 or len(y) < 2:
        raise ValueError(f"the MMD test needs two vectors per sample, got {len(x)} and {len(y)}")
    pooled = np.vstack([x, y])
    d2 = _sq_dists(pooled)
    off = d2[np.triu_indices(len(pooled), k=1)]
    bandwidth2 = float(np.median(off)) or 1.0
    k = np.exp(-d2 / bandwidth2)
    n = len(x)
    observed = _mmd2(k, n)
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(permutations):
        perm = rng.permutation(len(pooled))
        if _mmd2(k[np.ix_(perm, perm)], n) >= observed - 1e-12:
            hits += 1
    return observed, (1 + hits) / (1 + permutations)


def length_test(reference: Sequence[float], window: Sequence[float]) -> float | None:
    """Two-sided Mann-Whitney U p-value of answer lengths; None with an empty sample."""
    from scipy.stats import mannwhitneyu

    if not len(reference) or not len(window):
        return None
    if len(set(reference) | set(window)) == 1:
        return 1.0  # every length the same: no difference to test
    return float(mannwhitneyu(reference, window, alternative="two-sided").pvalue)


def refusal_test(ref_refused: int, ref_n: int, win_refused: int, win_n: int) -> float | None:
    """Fisher's exact two-sided p-value of two refusal rates; None with an empty sample."""
    from scipy.stats import fisher_exact

    if ref_n == 0 or win_n == 0:
        return None
    table = [[ref_refused, ref_n - ref_refused], [win_refused, win_n - win_refused]]
    return float(fisher_exact(table).pvalue)


def slice_test(
    reference: dict[tuple[str, str], int], window: dict[tuple[str, str], int]
) -> tuple[float | None, str]:
    """(Bonferroni-corrected p-value, the largest shift as "key=value 0.25->0.40") of two
    windows' line counts per (slice key, value); (None, "") when no key has two values."""
    from scipy.stats import chi2_contingency

    keys = sorted({k for k, _ in reference} | {k for k, _ in window})
    tests: list[tuple[float, str]] = []
    for key in keys:
        values = sorted({v for k, v in reference if k == key} | {v for k, v in window if k == key})
        a = np.asarray([reference.get((key, v), 0) for v in values], dtype=float)
        b = np.asarray([window.get((key, v), 0) for v in values], dtype=float)
        if len(values) < 2 or not a.sum() or not b.sum():
            continue
        p = float(chi2_contingency(np.vstack([a, b]))[1])
        shares_a, shares_b = a / a.sum(), b / b.sum()
        i = int(np.argmax(np.round(np.abs(shares_b - shares_a), 9)))  # ties: the first value
        tests.append((p, f"{key}={values[i]} {shares_a[i]:.2f}->{shares_b[i]:.2f}"))
    if not tests:
        return None, ""
    p, shift = min(tests)
    return min(1.0, p * len(tests)), shift
