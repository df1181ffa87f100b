"""What every retrieve backend shares: its types, protocol and backend registry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ragrig.core.ranking import sort_scores
from ragrig.retrieve.fusion import convex, rrf
from ragrig.retrieve.tuning import UNTUNED


@dataclass(frozen=True)
class Hits:
    """Best-first chunk hits of one query in one lane: (chunk row ids, scores)."""

    rows: np.ndarray
    scores: np.ndarray


def to_documents(
    hits: Hits, chunk_doc: np.ndarray, chunk_ids: np.ndarray, depth: int
) -> list[tuple[str, str, float]]:
    """Aggregate chunk hits to documents: a document's score is its best chunk's.

    Returns (doc_id, best chunk_id, score), best first, ties broken by doc_id, at most `depth`.
    """
    best: dict[str, tuple[float, str]] = {}
    for row, score in zip(hits.rows.tolist(), hits.scores.tolist(), strict=True):
        if row < 0:
            continue
        doc = chunk_doc[row]
        if doc not in best or score > best[doc][0]:
            best[doc] = (float(score), str(chunk_ids[row]))
    ranked = sort_scores({d: s for d, (s, _) in best.items()})[:depth]
    return [(d, best[d][1], s) for d, s in ranked]


def fuse(
    method: str, lanes: dict[str, list[tuple[str, str, float]]], cfg: Any
) -> list[tuple[str, str, float]]:
    """Combine document lanes per the configured hybrid method."""
    best_chunk: dict[str, str] = {}
    for lane in lanes.values():
        for doc, chunk, _ in lane:
            best_chunk.setdefault(doc, chunk)
    # unset (null): the untuned setting; the retrieve stage fills in a value tuned on the
    # corpus first (ragrig.retrieve.tuning.choose_fusion)
    if method == "hybrid_rrf":
        k = UNTUNED[method][1] if cfg.rrf_k is None else cfg.rrf_k
        fused = rrf({name: [d for d, _, _ in lane] for name, lane in lanes.items()}, k=k)
    elif method == "hybrid_convex":
        dense = {d: s for d, _, s in lanes["dense"]}
        sparse = {d: s for d, _, s in lanes["bm25"]}
        alpha = UNTUNED[method][1] if cfg.alpha is None else cfg.alpha
        fused = convex(dense, sparse, alpha, cfg.normalization)
    else:
        raise ValueError(f"{method!r} is not a hybrid method")
    return [(d, best_chunk[d], s) for d, s in fused[: cfg.depth]]
