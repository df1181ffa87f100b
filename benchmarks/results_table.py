"""The results table of docs/benchmarks.md: BM25, each embedder's dense lane, hybrid RRF and convex, each with
each reranker, on a BEIR test split, beside the published figures.

    python benchmarks/results_table.py                      # SciFact test, the configured embedder
    python benchmarks/results_table.py --embed all --rerank identity cross_encoder
    python benchmarks/results_table.py --markdown           # the table as Markdown, for docs/benchmarks.md

Each embedder (`--embed`: options of conf/embed, `all` for every one) embeds the corpus once;
the dense index and BM25 are built once (their build seconds are the `index s` column; the
corpus embedding is `embed s`); every method then runs query by query through the retrieve
stage's own code with the settings in conf/retrieve/<method>.yaml, and every reranker
(`--rerank`: options of conf/rerank) reorders each run through the rerank stage's code. Query
latency is the median per query of query embedding (dense and hybrid lanes) + retrieval +
reranking. Metrics are the report's: nDCG@10, Recall@100, MRR at document level over the
split's queries with a relevant document.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import _common as C

METHODS = ("bm25", "dense", "hybrid_rrf", "hybrid_convex")
MEASURES = ("ndcg@10", "recall@100", "rr")
# Published SciFact test nDCG@10 beside the row they compare with (method, reranker).
PUBLISHED = {
    ("bm25", "identity"): (
        C.PUBLISHED_BM25_FLAT_SCIFACT_NDCG10,
        "Anserini BM25 flat, k1 0.9 b 0.4",
    ),
    ("bm25", "cross_encoder"): (0.682, "BM25 top-100 + ms-marco MiniLM-L6 cross-encoder"),
    ("dense", "identity"): (0.741, "BGE-base-en-v1.5 (110M)"),
    ("hybrid_rrf", "identity"): (0.742, "RRF of BM25 and BGE-base (110M)"),
}


def _option(conf: Path, group: str, name: str) -> dict[str, Any]:
    import yaml

    path = conf / group / f"{name}.yaml"
    if not path.exists():
        options = sorted(p.stem for p in (conf / group).glob("*.yaml"))
        raise SystemExit(f"results_table: no {group} option {name!r}; options: {options}")
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


def _options(conf: Path, group: str, names: list[str]) -> list[str]:
    if names == ["all"]:
        return sorted(p.stem for p in (conf / group).glob("*.yaml"))
    return names


def _configured(params: Path, group: str) -> str:
    """The option of conf/<group> whose values equal params.yaml's section (for the default)."""
    from ragrig.core.config import load_params

    section = load_params(params).get(group) or {}
    for path in sorted((C.PROJECT_ROOT / "conf" / group).glob("*.yaml")):
        if _option(C.PROJECT_ROOT / "conf", group, path.stem).get("method") == section.get(
            "method"
        ):
            return path.stem
    raise SystemExit(f"results_table: no conf/{group} option matches params.yaml's {group}")


def run_table(
    data: C.Dataset,
    params: Path,
    conf: Path,
    embeds: list[str],
    reranks: list[str],
    chunk_vectors: Path | None = None,
) -> list[dict[str, Any]]:
    import numpy as np

    from ragrig.core.config import load_section, validate_section
    from ragrig.core.registry import resolve
    from ragrig.embed import encode_queries_timed, make_embedder
    from ragrig.index import DENSE_INDEXES, SPARSE_INDEXES
    from ragrig.metrics.ir import mean_measures, rankings_from_run
    from ragrig.rerank import make_reranker, rerank_run
    from ragrig.retrieve import retrieve_all

    index_cfg = load_section("index", params)
    chunk_doc = data.chunks["doc_id"].to_numpy()
    chunk_ids = data.chunks["chunk_id"].to_numpy()
    texts = data.chunks["text"].tolist()
    t0 = time.perf_counter()
    sparse = resolve(SPARSE_INDEXES, index_cfg.sparse.method, "sparse index").build(
        texts, index_cfg.sparse
    )
    bm25_s = time.perf_counter() - t0
    retrieve_cfgs = {m: validate_section("retrieve", _option(conf, "retrieve", m)) for m in METHODS}
    rerankers = {r: validate_section("rerank", _option(conf, "rerank", r)) for r in reranks}
    queries = dict(zip(data.query_ids, data.query_texts, strict=True))
    chunk_text = dict(zip(chunk_ids, texts, strict=True))
    rows: list[dict[str, Any]] = []
    for embed in embeds:
        ecfg = validate_section("embed", _option(conf, "embed", embed))
        passages = make_embedder(ecfg, role="passage")
        t0 = time.perf_counter()
        if chunk_vectors is None:
            vectors = passages.encode(texts)
        else:  # written earlier by the embed stage for this embedder: read, checked on a sample
            from ragrig.tools.tune_first_stage import load_chunk_vectors

            vectors = load_chunk_vectors(chunk_vectors, texts, list(chunk_ids), passages)
        embed_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        dense = resolve(DENSE_INDEXES, index_cfg.dense.method, "dense index")(
            vectors, index_cfg.dense
        )
        dense_s = time.perf_counter() - t0
        qvecs, q_ms = encode_queries_timed(
            passages.with_prefix(ecfg.query_prefix), data.query_texts, progress=False
        )
        for method in METHODS:
            if method == "bm25" and embed != embeds[0]:
                continue  # BM25 does not depend on the embedder
            cfg = retrieve_cfgs[method]
            run, _, lat = retrieve_all(
                cfg,
                data.query_ids,
                data.query_texts,
                qvecs,
                dense,
                sparse,
                chunk_doc,
                chunk_ids,
                progress=False,
            )
            base_ms = lat["latency_ms"].to_numpy()
            if method != "bm25":
                base_ms = base_ms + np.asarray(q_ms)
            for rname, rcfg in rerankers.items():
                reranker = make_reranker(rcfg)
                final, rlat = rerank_run(
                    run, queries, chunk_text, reranker, getattr(rcfg, "depth", None), False
                )
                ms = base_ms + rlat.set_index("qid").loc[lat["qid"], "latency_ms"].to_numpy()
                m = mean_measures(rankings_from_run(final), data.qrels, list(MEASURES))
                pub = PUBLISHED.get((method, rname))
                rows.append(
                    {
                        "method": method,
                        "embedder": "-" if method == "bm25" else embed,
                        "reranker": rname,
                        **m,
                        "query_ms_p50": float(np.median(ms)),
                        "index_s": bm25_s
                        if method == "bm25"
                        else dense_s + (bm25_s if method.startswith("hybrid") else 0.0),
                        "embed_s": 0.0 if method == "bm25" else embed_s,
                        "published_ndcg@10": pub[0] if pub else None,
                        "published": pub[1] if pub else "",
                    }
                )
    return rows


COLUMNS = [
    ("method", "method"),
    ("embedder", "embedder"),
    ("reranker", "reranker"),
    ("ndcg@10", "nDCG@10"),
    ("recall@100", "R@100"),
    ("rr", "MRR"),
    ("query_ms_p50", "query ms p50"),
    ("index_s", "index s"),
    ("embed_s", "embed s"),
    ("published_ndcg@10", "published nDCG@10"),
    ("published", "published system"),
]


def markdown(rows: list[dict[str, Any]]) -> str:
    head = "| " + " | ".join(label for _, label in COLUMNS) + " |"
    sep = "|" + "|".join("---" for _ in COLUMNS) + "|"
    lines = [head, sep]
    for r in rows:
        cells = []
        for key, _ in COLUMNS:
            v = r[key]
            if v is None:
                cells.append("")
            elif isinstance(v, float):
                cells.append(
                    f"{v:.4f}" if key in MEASURES or key.startswith("published") else f"{v:.1f}"
                )
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    C.add_common_args(p)
    p.add_argument("--split", default="test")
    p.add_argument("--conf", type=Path, default=C.PROJECT_ROOT / "conf")
    p.add_argument("--embed", nargs="+", default=None, help="conf/embed options, or all")
    p.add_argument("--rerank", nargs="+", default=["identity"], help="conf/rerank options")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument(
        "--chunk-vectors",
        type=Path,
        default=None,
        help="corpus vectors of the one --embed option (data/embed/chunks.npy): `embed s` is "
        "then the time to read and check them",
    )
    args = p.parse_args(argv)
    C.setup_env()
    C.apply_threads(args.params, torch=True)
    embeds = _options(args.conf, "embed", args.embed or [_configured(args.params, "embed")])
    reranks = _options(args.conf, "rerank", args.rerank)
    if args.chunk_vectors is not None and len(embeds) != 1:
        p.error("--chunk-vectors holds one embedder's vectors: give one --embed option")
    data = C.load_dataset(args.dataset_root, args.params, split=args.split)
    print(
        f"results table: {args.dataset_root.name} {args.split}, {len(data.query_ids)} queries, "
        f"{len(data.chunks)} chunks; embedders {embeds}, rerankers {reranks}",
        flush=True,
    )
    t0 = time.perf_counter()
    rows = run_table(data, args.params, args.conf, embeds, reranks, args.chunk_vectors)
    wall = time.perf_counter() - t0
    if args.markdown:
        print(markdown(rows))
    else:
        C.print_table(
            "first-stage methods (nDCG@10, R@100, MRR; median query latency; build seconds)",
            [label for _, label in COLUMNS],
            [[r[k] if r[k] is not None else "" for k, _ in COLUMNS] for r in rows],
        )
    C.write_json(
        args.json,
        {
            **C.header("results_table", ["faiss-cpu", "bm25s", "sentence-transformers"]),
            "config": {
                "dataset": str(args.dataset_root),
                "split": args.split,
                "queries": len(data.query_ids),
                "chunks": len(data.chunks),
                "embedders": embeds,
                "rerankers": reranks,
                "chunk_vectors": str(args.chunk_vectors) if args.chunk_vectors else None,
            },
            "rows": rows,
            "wall_s": wall,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
