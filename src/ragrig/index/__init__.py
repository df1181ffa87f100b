"""index: dense FAISS indexes (flat, HNSW, IVF) and BM25 indexes over chunks."""
