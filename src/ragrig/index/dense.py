"""FAISS index builders; inner product over L2-normalised vectors (cosine)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ragrig.core.errors import ConfigError


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


def training_sample(vectors: np.ndarray, n: int, seed: int) -> np.ndarray:
    """At most `n` rows, a seeded uniform sample kept in row order (all rows when fewer)."""
    if len(vectors) <= n:
        return vectors
    rows = np.sort(np.random.default_rng(seed).choice(len(vectors), n, replace=False))
    return np.ascontiguousarray(vectors[rows])


def build_ivf_pq(vectors: np.ndarray, cfg: Any) -> Any:
    """IVF-PQ (inner product), trained on a seeded sample; with `refine`, an IndexRefine that
    re-scores k_factor x k candidates from sq8 codes or the full vectors."""
    faiss = _faiss()
    d = vectors.shape[1]
    if d % cfg.pq_m:
        raise ConfigError(f"ivf_pq: pq_m={cfg.pq_m} must divide the vector dimension {d}")
    sample = training_sample(vectors, cfg.train_sample, cfg.train_seed)
    # k-means needs at least one training vector per centroid (FAISS warns below 39 each)
    if len(sample) < cfg.nlist or len(sample) < 2**cfg.pq_bits:
        raise ConfigError(
            f"ivf_pq: {len(sample)} training vectors for nlist={cfg.nlist} and "
            f"2^pq_bits={2**cfg.pq_bits} centroids: use fewer lists or bits, or more vectors"
        )
    quantizer = faiss.IndexFlatIP(d)
    ivf = faiss.IndexIVFPQ(
        quantizer, d, cfg.nlist, cfg.pq_m, cfg.pq_bits, faiss.METRIC_INNER_PRODUCT
    )
    ivf.cp.seed = cfg.train_seed
    ivf.pq.cp.seed = cfg.train_seed
    index = ivf
    if cfg.refine != "none":
        fine = (
            faiss.IndexFlatIP(d)
            if cfg.refine == "flat"
            else faiss.IndexScalarQuantizer(
                d, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
            )
        )
        index = faiss.IndexRefine(ivf, fine)
        index.k_factor = cfg.k_factor
    with _threads(1):
        index.train(sample)
        index.add(vectors)
    return index


_SQ_TYPES = {"sq8": "QT_8bit", "sq4": "QT_4bit", "fp16": "QT_fp16"}


def build_hnsw_sq(vectors: np.ndarray, cfg: Any) -> Any:
    """HNSW whose stored vectors are scalar-quantised (trained on a seeded sample)."""
    faiss = _faiss()
    qtype = getattr(faiss.ScalarQuantizer, _SQ_TYPES[cfg.quantizer])
    index = faiss.IndexHNSWSQ(vectors.shape[1], qtype, cfg.m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = cfg.ef_construction
    with _threads(cfg.build_threads):
        index.train(training_sample(vectors, cfg.train_sample, cfg.train_seed))
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
    """efSearch / nprobe are not stored in index files: set them after loading (on the IVF
    inside an IndexRefine too)."""
    faiss = _faiss()
    if hasattr(index, "hnsw"):
        index.hnsw.efSearch = ef_search
    if hasattr(index, "nprobe"):
        index.nprobe = nprobe
    elif isinstance(index, faiss.Index) and (ivf := faiss.try_extract_index_ivf(index)):
        ivf.nprobe = nprobe  # the IVF inside an IndexRefine


def is_exact(index: Any) -> bool:
    faiss = _faiss()
    return isinstance(index, faiss.IndexFlat)


def search(index: Any, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (scores, row ids) of the top `k`; rows missing for small indexes are -1."""
    k = min(k, index.ntotal)
    scores, ids = index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
    return scores, ids


def search_within(
    index: Any, queries: np.ndarray, k: int, rows: np.ndarray, ef_search: int, nprobe: int
) -> tuple[np.ndarray, np.ndarray]:
    """`search` restricted to the chunk `rows` (a hard metadata filter applied inside the
    search: FAISS's IDSelector in the index's search parameters, so HNSW and IVF skip the other
    vectors rather than returning fewer than k). No row: every id -1."""
    faiss = _faiss()
    k = min(k, index.ntotal)
    q = np.ascontiguousarray(queries, dtype=np.float32)
    if len(rows) == 0 or k == 0:
        return (
            np.full((len(q), k), -np.inf, dtype=np.float32),
            np.full((len(q), k), -1, dtype=np.int64),
        )
    sel = faiss.IDSelectorBatch(np.ascontiguousarray(rows, dtype=np.int64))
    params = _selector_params(faiss, index, sel, ef_search, nprobe)
    scores, ids = index.search(q, k, params=params)
    return scores, ids


def _selector_params(faiss: Any, index: Any, sel: Any, ef_search: int, nprobe: int) -> Any:
    """Search parameters of the index's own kind carrying `sel` (a bare SearchParameters
    would reset efSearch / nprobe to FAISS's defaults)."""
    if isinstance(index, faiss.IndexRefine):
        base = _selector_params(faiss, index.base_index, sel, ef_search, nprobe)
        return faiss.IndexRefineSearchParameters(k_factor=index.k_factor, base_index_params=base)
    if isinstance(index, faiss.IndexHNSW):
        return faiss.SearchParametersHNSW(sel=sel, efSearch=ef_search)
    if isinstance(index, faiss.IndexIVF):
        return faiss.SearchParametersIVF(sel=sel, nprobe=nprobe)
    return faiss.SearchParameters(sel=sel)
