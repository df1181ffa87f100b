"""Judging the judge: a judge's answer scores against binary human labels (1 = faithful).

Pure functions over aligned sequences of labels and scores in [0, 1]. An answer is predicted
faithful when its score is >= the threshold. Every metric refuses what it cannot measure (empty
input, a single human class where two are needed, a score outside [0, 1]) with a ValueError
naming the problem, rather than returning NaN.

* balanced accuracy: mean of the true-positive and true-negative rates;
* Cohen's kappa between predicted and human labels (scikit-learn);
* ROC-AUC, threshold-free, ties counted half (scikit-learn's trapezoidal AUC, which is exactly
  the Mann-Whitney statistic);
* ECE over `n_bins` equal-width bins [0, 1/n), [1/n, 2/n), ..., [(n-1)/n, 1.0] (the last bin
  closed): sum over non-empty bins of |mean score - share labelled faithful| weighted by the bin's
  share of answers;
* the decision threshold: the distinct score, among those observed, that maximises balanced
  accuracy on the rows it is given (ties -> the lowest such score).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ragrig.core.text import counted


def _arrays(labels: Sequence[int], values: Sequence[float], what: str) -> tuple:
    y = np.asarray(labels)
    v = np.asarray(values, dtype="float64")
    if y.ndim != 1 or v.ndim != 1 or len(y) != len(v):
        raise ValueError(f"labels ({len(y)}) and {what} ({len(v)}) must be aligned 1-d sequences")
    if len(y) == 0:
        raise ValueError("no rows to measure")
    if not np.isin(y, (0, 1)).all():
        other = counted(sorted(set(y.tolist()) - {0, 1}), "other value")
        raise ValueError(f"human labels must be 0 or 1, got {other}")
    if not np.isfinite(v).all():
        raise ValueError(f"{what} must be finite numbers (no None/NaN)")
    return y.astype(int), v


def _scores(labels: Sequence[int], scores: Sequence[float]) -> tuple:
    y, s = _arrays(labels, scores, "scores")
    if (s < 0).any() or (s > 1).any():
        raise ValueError(f"scores must lie in [0, 1], got min {s.min()} max {s.max()}")
    return y, s


def _both_classes(y: np.ndarray, metric: str) -> None:
    if y.min() == y.max():
        raise ValueError(f"{metric} needs both human classes; all {len(y)} labels are {y[0]}")


def predict(scores: Sequence[float], threshold: float) -> list[int]:
    """1 (faithful) where score >= threshold."""
    return [int(s >= threshold) for s in scores]


def balanced_accuracy(labels: Sequence[int], predicted: Sequence[int]) -> float:
    y, p = _arrays(labels, predicted, "predictions")
    _both_classes(y, "balanced accuracy")
    tpr = float((p[y == 1] == 1).mean())
    tnr = float((p[y == 0] == 0).mean())
    return (tpr + tnr) / 2


def cohen_kappa(labels: Sequence[int], predicted: Sequence[int]) -> float:
    from sklearn.metrics import cohen_kappa_score

    y, p = _arrays(labels, predicted, "predictions")
    if not np.isin(p, (0, 1)).all():
        raise ValueError("predicted labels must be 0 or 1")
    if len(set(y.tolist()) | set(p.astype(int).tolist())) < 2:
        raise ValueError("Cohen's kappa is undefined when every label and prediction agree")
    return float(cohen_kappa_score(y, p.astype(int)))


def roc_auc(labels: Sequence[int], scores: Sequence[float]) -> float:
    from sklearn.metrics import roc_auc_score

    y, s = _scores(labels, scores)
    _both_classes(y, "ROC-AUC")
    return float(roc_auc_score(y, s))


@dataclass(frozen=True)
class Bin:
    lo: float
    hi: float  # exclusive, except for the last bin, which includes 1.0
    n: int
    mean_score: float | None  # None for an empty bin
    share_faithful: float | None


def reliability_bins(labels: Sequence[int], scores: Sequence[float], n_bins: int) -> list[Bin]:
    """Equal-width bins over [0, 1]; a score of exactly 1.0 falls in the last bin."""
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    y, s = _scores(labels, scores)
    edges = np.arange(n_bins + 1) / n_bins  # k / n, so 0.3 is exactly the edge of [0.3, 0.4)
    idx = np.searchsorted(edges[1:-1], s, side="right")  # a score on an edge opens the next bin
    out = []
    for b in range(n_bins):
        mask = idx == b
        n = int(mask.sum())
        out.append(
            Bin(
                lo=float(edges[b]),
                hi=float(edges[b + 1]),
                n=n,
                mean_score=float(s[mask].mean()) if n else None,
                share_faithful=float(y[mask].mean()) if n else None,
            )
        )
    return out


def ece(labels: Sequence[int], scores: Sequence[float], n_bins: int = 10) -> float:
    bins = reliability_bins(labels, scores, n_bins)
    total = sum(b.n for b in bins)
    return float(
        sum(b.n / total * abs(b.mean_score - b.share_faithful) for b in bins if b.n)  # type: ignore[operator]
    )


def fit_threshold(labels: Sequence[int], scores: Sequence[float]) -> tuple[float, float]:
    """(threshold, balanced accuracy on these rows): the observed score maximising balanced
    accuracy, the lowest one on a tie. Only the rows passed in are read."""
    y, s = _scores(labels, scores)
    _both_classes(y, "fitting a threshold")
    best_t, best_ba = None, -1.0
    for t in np.unique(s):  # ascending: a later tie never replaces the lower threshold
        ba = balanced_accuracy(y, (s >= t).astype(int))
        if ba > best_ba + 1e-12:
            best_t, best_ba = float(t), ba
    return best_t, best_ba  # type: ignore[return-value]


def prevalence_threshold(labels: Sequence[int], scores: Sequence[float]) -> tuple[float, float]:
    """(threshold, balanced accuracy on these rows) for a score that is a calibrated
    probability: the share of positives among these rows. Calling an answer faithful when
    P(faithful) >= that share is the Bayes decision for balanced accuracy (both classes
    weighted by the inverse of their share), with no free parameter to over-fit."""
    y, s = _scores(labels, scores)
    _both_classes(y, "fitting a threshold")
    t = float(y.mean())
    return t, balanced_accuracy(y, (s >= t).astype(int))


def summarise(
    labels: Sequence[int], scores: Sequence[float], threshold: float, n_bins: int
) -> dict[str, float | int | None]:
    """Every metric at one threshold on one set of rows; a metric that is undefined there
    (one human class) is None, with the reason in `undefined`."""
    out: dict = {"n": len(labels), "n_faithful": int(sum(labels)), "threshold": threshold}
    pred = predict(scores, threshold)
    undefined = {}
    for name, fn, arg in (
        ("balanced_accuracy", balanced_accuracy, pred),
        ("cohen_kappa", cohen_kappa, pred),
        ("roc_auc", roc_auc, scores),
        ("ece", lambda y, s: ece(y, s, n_bins), scores),
    ):
        try:
            out[name] = fn(labels, arg)
        except ValueError as exc:
            out[name] = None
            undefined[name] = str(exc)
    if undefined:
        out["undefined"] = undefined
    return out
