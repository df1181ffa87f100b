"""FAISS index builders; inner product over L2-normalised vectors (cosine)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ragrig.errors import ConfigError


def _faiss():
    import faiss

    return faiss


def build_flat(vectors: np.ndarray, cfg: Any) -> Any:
    faiss = _faiss()
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    return index


def build_hnsw(vectors: np.ndarray, cfg: Any) -> Any:
    faiss = _faiss()
    index = faiss.IndexHNSWFlat(vectors.shape[1], cfg.m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = cfg.ef_construction
    # Parallel HNSW insertion depends on thread timing; one thread makes the graph reproducible.
    with _threads(1):
        index.add(vectors)
    return index


def build_ivf(vectors: np.ndarray, cfg: Any) -> Any:
    faiss = _faiss()
    if len(vectors) < cfg.nlist:
        raise ConfigError(f"ivf: nlist={cfg.nlist} exceeds the {len(vectors)} vectors to index")
    quantizer = faiss.IndexFlatIP(vectors.shape[1])
    index = faiss.IndexIVFFlat(quantizer, vectors.shape[1], cfg.nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = cfg.train_seed
    with _threads(1):
        index.train(vectors)
        index.add(vectors)
    return index


class _threads:
    """Temporarily set FAISS's OpenMP thread count."""

    def __init__(self, n: int):
        self.n = n

    def __enter__(self):
        faiss = _faiss()
        self.prev = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(self.n)

    def __exit__(self, *exc):
        _faiss().omp_set_num_threads(self.prev)


def set_search_params(index: Any, ef_search: int, nprobe: int) -> None:
    """efSearch / nprobe are not stored in index files: set them after loading."""
    if hasattr(index, "hnsw"):
        index.hnsw.efSearch = ef_search
    if hasattr(index, "nprobe"):
        index.nprobe = nprobe


def is_exact(index: Any) -> bool:
    faiss = _faiss()
    return isinstance(index, faiss.IndexFlat)


def search(index: Any, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (scores, row ids) of the top `k`; rows missing for small indexes are -1."""
    k = min(k, index.ntotal)
    scores, ids = index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
    return scores, ids
