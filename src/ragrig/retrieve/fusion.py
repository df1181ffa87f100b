"""Rank fusion of retrieval lanes: reciprocal rank fusion and convex score combination."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ragrig.core.ranking import check_unique, sort_scores


def rrf(lanes: Mapping[str, Sequence[str]], k: int = 60) -> list[tuple[str, float]]:
    """Reciprocal rank fusion: score(d) = sum over lanes of 1 / (k + rank_lane(d)), ranks from 1."""
    if k <= 0:
        raise ValueError(f"rrf k must be positive, got {k}")
    scores: dict[str, float] = {}
    for name, ranking in lanes.items():
        check_unique(ranking, f"lane {name!r}")
        for rank, doc_id in enumerate(ranking, start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + 1.0 / (k + rank)
    return sort_scores(scores)


def _normalise(scores: Mapping[str, float], method: str) -> dict[str, float]:
    if not scores:
        return {}
    values = list(scores.values())
    if method == "minmax":
        lo, hi = min(values), max(values)
        span = hi - lo
        return {d: (s - lo) / span if span > 0 else 1.0 for d, s in scores.items()}
    if method == "zscore":
        mean = sum(values) / len(values)
        var = sum((v - mean) ** 2 for v in values) / len(values)
        std = var**0.5
        return {d: (s - mean) / std if std > 0 else 0.0 for d, s in scores.items()}
    raise ValueError(f"unknown normalisation {method!r}")


def convex(
    dense: Mapping[str, float],
    sparse: Mapping[str, float],
    alpha: float,
    normalization: str = "minmax",
) -> list[tuple[str, float]]:
    """alpha * norm(dense) + (1 - alpha) * norm(sparse); a document absent from a lane gets
    that lane's minimum normalised score."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    nd, ns = _normalise(dense, normalization), _normalise(sparse, normalization)
    floor_d = min(nd.values(), default=0.0)
    floor_s = min(ns.values(), default=0.0)
    docs = set(nd) | set(ns)
    fused = {d: alpha * nd.get(d, floor_d) + (1 - alpha) * ns.get(d, floor_s) for d in docs}
    return sort_scores(fused)
