"""DVC stage index: chunk vectors -> FAISS index; chunk texts -> BM25 index."""

from __future__ import annotations

import _bootstrap  # noqa: F401  (this checkout's src/ first on sys.path)
from ragrig.runtime import stage


def main() -> None:
    args = stage.parser(__doc__).parse_args()
    from ragrig.core.config import load_section

    stage.apply_threads(stage.read_runtime(args.params, "threads"))

    from ragrig.core.io import atomic_dir, load_array, read_table, write_faiss, write_json
    from ragrig.index.step import build_indexes, manifest

    chunk_dir, embed_dir = args.inputs
    cfg = load_section("index", args.params)
    chunks = read_table(chunk_dir / "chunks.parquet", "chunks")
    ids = read_table(embed_dir / "chunk_ids.parquet", "ids")["id"].tolist()
    built = build_indexes(chunks, ids, load_array(embed_dir / "chunks.npy"), cfg)
    with atomic_dir(args.out) as out:
        write_faiss(built.dense, out / "dense.faiss")
        built.sparse.save(out / "sparse")
        write_json(
            out / "manifest.json", manifest(built, cfg, (out / "dense.faiss").stat().st_size)
        )
    print(
        f"index: {cfg.dense.method} over {built.dense.ntotal} vectors in {built.dense_s:.1f} s, "
        f"{cfg.sparse.method} in {built.sparse_s:.1f} s"
    )


if __name__ == "__main__":
    stage.run("index", main)
