"""The index stage's computation: the configured dense index over the chunk vectors and the
configured sparse index over the chunk texts, each timed."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ragrig.core.progress import bar
from ragrig.core.registry import resolve
from ragrig.index.base import DENSE_INDEXES, SPARSE_INDEXES


@dataclass(frozen=True)
class Built:
    dense: Any  # a faiss.Index
    sparse: Any  # a sparse index with .save(folder)
    dense_s: float
    sparse_s: float


def build_indexes(chunks: pd.DataFrame, ids: list[str], vectors: np.ndarray, cfg: Any) -> Built:
    """Both indexes of `cfg` (an IndexConfig); the vectors' rows must be the chunk table's."""
    if ids != chunks["chunk_id"].tolist():
        raise RuntimeError("embedding rows do not match the chunk table; rerun embed")
    # one bar over both indexes: each counts its chunks (FAISS adds every vector in one call,
    # which keeps the HNSW graph as it is; the bar moves when each index is built)
    with bar("index", 2 * len(vectors), "chunks") as b:
        b.note(f"dense {cfg.dense.method}")
        t0 = time.perf_counter()
        dense = resolve(DENSE_INDEXES, cfg.dense.method, "dense index")(vectors, cfg.dense)
        dense_s = time.perf_counter() - t0
        b.update(len(vectors))
        b.note(cfg.sparse.method)
        t0 = time.perf_counter()
        sparse = resolve(SPARSE_INDEXES, cfg.sparse.method, "sparse index").build(
            chunks["text"].tolist(), cfg.sparse
        )
        sparse_s = time.perf_counter() - t0
        b.update(len(vectors))
    return Built(dense, sparse, dense_s, sparse_s)


def manifest(built: Built, cfg: Any, dense_bytes: int) -> dict[str, Any]:
    """The stage's manifest, given the size of the dense index file written."""
    n = int(built.dense.ntotal)
    return {
        "dense": cfg.dense.model_dump(),
        "sparse": cfg.sparse.model_dump(),
        "vectors": n,
        # the index file's bytes (codes, graph or lists, ids, quantiser) per vector
        "dense_bytes": dense_bytes,
        "dense_bytes_per_vector": round(dense_bytes / max(n, 1), 2),
    }
