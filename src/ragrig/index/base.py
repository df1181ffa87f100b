"""The index backends by name: dense FAISS builders and BM25 index classes."""

from __future__ import annotations

DENSE_INDEXES = {
    "flat": "ragrig.index.dense:build_flat",
    "hnsw": "ragrig.index.dense:build_hnsw",
    "ivf": "ragrig.index.dense:build_ivf",
    "ivf_pq": "ragrig.index.dense:build_ivf_pq",
    "hnsw_sq": "ragrig.index.dense:build_hnsw_sq",
}
SPARSE_INDEXES = {
    "bm25s": "ragrig.index.sparse:Bm25sIndex",
    "rank_bm25": "ragrig.index.sparse:RankBm25Index",
}
