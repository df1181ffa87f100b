"""DVC stage embed: chunks and queries -> normalised vectors (+ per-query encoding latency)."""

from __future__ import annotations

import _bootstrap  # noqa: F401  (this checkout's src/ first on sys.path)
from ragrig.runtime import stage


def main() -> None:
    args = stage.parser(__doc__).parse_args()
    from ragrig.core.config import load_section

    threads = stage.read_runtime(args.params, "threads")
    stage.apply_threads(threads)
    stage.apply_torch_threads(threads)

    import pandas as pd

    from ragrig.core.io import (
        atomic_dir,
        read_parquet,
        read_table,
        save_array,
        write_json,
        write_table,
    )
    from ragrig.core.progress import bar
    from ragrig.embed import encode_chunks, encode_queries_timed, make_embedder

    parse_dir, chunk_dir = args.inputs
    cfg = load_section("embed", args.params)
    table = chunk_dir / "chunks.parquet"
    if cfg.executor.kind == "ray":  # the texts are read by the encoder actors, window by window
        chunks = read_parquet(table, columns=["chunk_id"])
    else:
        chunks = read_table(table, "chunks")
    queries = read_table(parse_dir / "queries.parquet", "queries")
    passages = make_embedder(cfg, role="passage")
    # one bar over the whole stage: every chunk, then every query (encoded one at a time)
    with bar("embed", len(chunks) + len(queries), "texts") as b:
        chunk_vecs = encode_chunks(
            cfg, passages, table, lambda: chunks["text"].tolist(), done=b.update
        )
        query_vecs, lat = encode_queries_timed(
            passages.with_prefix(cfg.query_prefix), queries["text"].tolist(), done=b.update
        )
    precision = None
    if hasattr(cfg, "precision"):  # a torch encoder: what `auto` resolved to on this CPU
        from ragrig.weights.precision import precision_record, resolve_precision

        precision = precision_record(cfg.precision, resolve_precision(cfg.precision))
    with atomic_dir(args.out) as out:
        save_array(out / "chunks.npy", chunk_vecs)
        save_array(out / "queries.npy", query_vecs)
        write_table(pd.DataFrame({"id": chunks["chunk_id"]}), out / "chunk_ids.parquet", "ids")
        write_table(pd.DataFrame({"id": queries["qid"]}), out / "query_ids.parquet", "ids")
        write_table(
            pd.DataFrame({"qid": queries["qid"], "stage": "embed_query", "latency_ms": lat}),
            out / "latency.parquet",
            "latency",
        )
        write_json(
            out / "manifest.json",
            {
                "method": cfg.method,
                "window": cfg.window,
                "executor": cfg.executor.kind,
                **passages.fingerprint(),
                "dim": int(chunk_vecs.shape[1]),
                "chunks": len(chunks),
                "queries": len(queries),
                "precision_decision": precision,
            },
        )
    how = ""
    if precision is not None:
        flags = ", ".join(precision["cpu_bf16_flags"]) or "no native bf16"
        how = f", {precision['resolved']}" + (
            f" (auto: {flags})" if precision["requested"] == "auto" else ""
        )
    print(
        f"embed: {chunk_vecs.shape[0]} chunks and {query_vecs.shape[0]} queries, "
        f"dim {chunk_vecs.shape[1]}{how}"
    )


if __name__ == "__main__":
    stage.run("embed", main)
