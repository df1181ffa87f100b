"""DVC stage rerank: rescore the top documents of each query (identity, a cross-encoder, or the
reranker the train_rerank stage trained)."""

from __future__ import annotations

import _bootstrap  # noqa: F401  (this checkout's src/ first on sys.path)
from ragrig.runtime import stage


def main() -> None:
    args = stage.parser(__doc__).parse_args()
    from ragrig.core.config import load_section

    threads = stage.read_runtime(args.params, "threads")
    stage.apply_threads(threads)
    cfg = load_section("rerank", args.params)
    if cfg.method != "identity":
        stage.apply_torch_threads(threads)

    from ragrig.core.io import atomic_dir, read_table, write_json, write_table
    from ragrig.rerank import make_reranker, rerank_run

    parse_dir, chunk_dir, retrieve_dir = args.inputs
    queries = read_table(parse_dir / "queries.parquet", "queries")
    chunks = read_table(chunk_dir / "chunks.parquet", "chunks")
    run = read_table(retrieve_dir / "run.parquet", "run")
    reranker = make_reranker(cfg)
    depth = getattr(cfg, "depth", None)
    new_run, latency = rerank_run(
        run,
        dict(zip(queries["qid"], queries["text"], strict=True)),
        dict(zip(chunks["chunk_id"], chunks["text"], strict=True)),
        reranker,
        depth,
    )
    with atomic_dir(args.out) as out:
        write_table(new_run, out / "run.parquet", "run")
        write_table(latency, out / "latency.parquet", "latency")
        write_json(
            out / "manifest.json",
            {
                "method": cfg.method,
                "depth": depth,
                "queries": int(new_run["qid"].nunique()),
                # the trained model's weights hash (train_rerank's manifest), when there is one
                "weights_sha256": getattr(reranker, "manifest", {}).get("weights_sha256"),
            },
        )
    print(f"rerank: {cfg.method} over {new_run['qid'].nunique()} queries")


if __name__ == "__main__":
    stage.run("rerank", main)
