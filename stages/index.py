"""DVC stage index: chunk vectors -> FAISS index; chunk texts -> BM25 index."""

from __future__ import annotations

import _bootstrap  # noqa: F401  (this checkout's src/ first on sys.path)
from ragrig.runtime import stage


def main() -> None:
    args = stage.parser(__doc__).parse_args()
    from ragrig.core.config import load_section

    stage.apply_threads(stage.read_runtime(args.params, "threads"))

    import time

    import faiss
    import numpy as np

    from ragrig.core.io import atomic_dir, read_table, write_json
    from ragrig.core.progress import bar
    from ragrig.core.registry import resolve
    from ragrig.index import DENSE_INDEXES, SPARSE_INDEXES

    chunk_dir, embed_dir = args.inputs
    cfg = load_section("index", args.params)
    chunks = read_table(chunk_dir / "chunks.parquet", "chunks")
    ids = read_table(embed_dir / "chunk_ids.parquet", "ids")
    if ids["id"].tolist() != chunks["chunk_id"].tolist():
        raise RuntimeError("embedding rows do not match the chunk table; rerun embed")
    vectors = np.load(embed_dir / "chunks.npy")
    # one bar over both indexes: each counts its chunks (FAISS adds every vector in one call,
    # which keeps the HNSW graph as it is; the bar moves when each index is built)
    with bar("index", 2 * len(vectors), "chunks") as b:
        b.note(f"dense {cfg.dense.method}")
        t0 = time.perf_counter()
        dense = resolve(DENSE_INDEXES, cfg.dense.method, "dense index")(vectors, cfg.dense)
        t_dense = time.perf_counter() - t0
        b.update(len(vectors))
        b.note(cfg.sparse.method)
        t0 = time.perf_counter()
        sparse = resolve(SPARSE_INDEXES, cfg.sparse.method, "sparse index").build(
            chunks["text"].tolist(), cfg.sparse
        )
        t_sparse = time.perf_counter() - t0
        b.update(len(vectors))
    with atomic_dir(args.out) as out:
        faiss.write_index(dense, str(out / "dense.faiss"))
        sparse.save(out / "sparse")
        dense_bytes = (out / "dense.faiss").stat().st_size
        write_json(
            out / "manifest.json",
            {
                "dense": cfg.dense.model_dump(),
                "sparse": cfg.sparse.model_dump(),
                "vectors": int(dense.ntotal),
                # the index file's bytes (codes, graph or lists, ids, quantiser) per vector
                "dense_bytes": dense_bytes,
                "dense_bytes_per_vector": round(dense_bytes / max(int(dense.ntotal), 1), 2),
            },
        )
    print(
        f"index: {cfg.dense.method} over {dense.ntotal} vectors in {t_dense:.1f} s, "
        f"{cfg.sparse.method} in {t_sparse:.1f} s"
    )


if __name__ == "__main__":
    stage.run("index", main)
