"""DVC stage retrieve: queries -> document runs per lane and fused; ANN recall against exact."""

from __future__ import annotations

import _bootstrap  # noqa: F401  (this checkout's src/ first on sys.path)
from ragrig.runtime import stage


def main() -> None:
    args = stage.parser(__doc__).parse_args()
    from ragrig.core.config import load_section

    stage.apply_threads(stage.read_runtime(args.params, "threads"))

    import faiss
    import numpy as np

    from ragrig.core.config import validate_section
    from ragrig.core.io import atomic_dir, read_json, read_table, write_json, write_table
    from ragrig.core.registry import resolve
    from ragrig.index import SPARSE_INDEXES
    from ragrig.retrieve import check_ann, lanes_of, retrieve_all

    parse_dir, chunk_dir, embed_dir, index_dir = args.inputs
    cfg = load_section("retrieve", args.params)
    index_manifest = read_json(index_dir / "manifest.json")
    sparse_cfg = validate_section(
        "index", {"dense": index_manifest["dense"], "sparse": index_manifest["sparse"]}
    ).sparse
    queries = read_table(parse_dir / "queries.parquet", "queries")
    chunks = read_table(chunk_dir / "chunks.parquet", "chunks")
    lanes = lanes_of(cfg.method)
    dense = faiss.read_index(str(index_dir / "dense.faiss")) if "dense" in lanes else None
    sparse = (
        resolve(SPARSE_INDEXES, sparse_cfg.method, "sparse index").load(
            index_dir / "sparse", sparse_cfg
        )
        if "bm25" in lanes
        else None
    )
    qvecs = np.load(embed_dir / "queries.npy") if dense is not None else None
    run, lane_runs, latency = retrieve_all(
        cfg,
        queries["qid"].tolist(),
        queries["text"].tolist(),
        qvecs,
        dense,
        sparse,
        chunks["doc_id"].to_numpy(),
        chunks["chunk_id"].to_numpy(),
    )
    ann, ann_fields = check_ann(
        cfg,
        dense,
        np.load(embed_dir / "chunks.npy", mmap_mode="r"),
        queries["qid"].tolist(),
        qvecs,
    )
    summary = {"method": cfg.method, "queries": len(queries), **ann_fields}
    with atomic_dir(args.out) as out:
        write_table(run, out / "run.parquet", "run")
        write_table(lane_runs, out / "lanes.parquet", "lanes")
        write_table(latency, out / "latency.parquet", "latency")
        if ann is not None:
            write_table(ann, out / "ann_recall.parquet", "ann_recall")
        write_json(out / "manifest.json", summary)
    msg = f"retrieve: {cfg.method}, {run['qid'].nunique()} queries"
    if ann is not None:
        msg += f", ANN recall@{cfg.ann_recall_k} vs exact {summary['ann_recall_mean']:.4f}"
    print(msg)


if __name__ == "__main__":
    stage.run("retrieve", main)
