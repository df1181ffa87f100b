"""index: dense FAISS indexes (flat, HNSW, IVF; IVF-PQ and HNSW-SQ for millions of vectors)
and BM25 indexes over chunks."""

from ragrig.index.base import DENSE_INDEXES, SPARSE_INDEXES

__all__ = ["DENSE_INDEXES", "SPARSE_INDEXES"]
