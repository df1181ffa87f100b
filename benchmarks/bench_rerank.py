"""The reranker the pipeline trains (stage train_rerank): training cost, scoring speed, and
nDCG@10 with and without it on identical candidate lists, per rerank depth.

* training: with `--train`, the train_rerank stage's library call (`run_stage`) on
  `--dataset-root`'s train split with params.yaml's `train_rerank` section (enabled forced on),
  timed: pairs, seconds, pairs/s, the weights' hash; or read from `--model` (a train_rerank
  output folder, default data/train_rerank);
* candidates: the first stage's run, from `--run` (a retrieve stage's run.parquet, e.g. the
  hybrid RRF of the default configuration) or, without it, BM25 (the index stage's sparse
  config) over the chunks, top `--first-depth` documents;
* per depth in `--depths`: the candidate lists reranked by `rerank=trained` (its batch size;
  the rest of each list keeps its order), nDCG@10 / MRR / P@1 / Recall@100 beside the
  first stage's, the per-query latency (median, p95) and scoring pairs/s.

    python benchmarks/bench_rerank.py [--train | --model DIR] [--run RUN.parquet]
        [--depths 20 50 100] [--json PATH]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import _common as C

TARGET_NDCG10 = 0.74  # issue 8: SciFact test, best CPU-only configuration
MEASURES = ["ndcg@10", "recall@100", "rr", "p@1"]


def first_stage_bm25(data: C.Dataset, params: Path, depth: int):
    from ragrig.core.config import load_section, validate_section
    from ragrig.core.registry import resolve
    from ragrig.index import SPARSE_INDEXES
    from ragrig.retrieve import retrieve_all

    sparse_cfg = load_section("index", params).sparse
    index = resolve(SPARSE_INDEXES, sparse_cfg.method, "sparse index").build(
        data.chunks["text"].tolist(), sparse_cfg
    )
    retrieve_cfg = validate_section(
        "retrieve", {"method": "bm25", "depth": depth, "chunk_depth": max(depth, 200)}
    )
    run, _, _ = retrieve_all(
        retrieve_cfg,
        data.query_ids,
        data.query_texts,
        None,
        None,
        index,
        data.chunks["doc_id"].to_numpy(),
        data.chunks["chunk_id"].to_numpy(),
        progress=False,
    )
    return run


def measures(run, qrels) -> dict[str, float]:
    from ragrig.metrics.ir import mean_measures, rankings_from_run

    return mean_measures(rankings_from_run(run), qrels, MEASURES)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    C.add_common_args(p)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--train", action="store_true", help="train now (params' train_rerank)")
    g.add_argument("--model", type=Path, default=C.PROJECT_ROOT / "data" / "train_rerank")
    p.add_argument("--run", type=Path, default=None, help="first-stage run.parquet (else BM25)")
    p.add_argument("--first-depth", type=int, default=100, help="BM25 candidates per query")
    p.add_argument("--depths", type=int, nargs="+", default=[20, 50, 100])
    p.add_argument(
        "--max-queries",
        type=int,
        default=None,
        help="score only the first N test queries (sorted ids), first stage included",
    )
    p.add_argument("--max-pairs", type=int, default=None, help="with --train: cap the pairs")
    p.add_argument("--workdir", type=Path, default=None, help="with --train: model folder here")
    args = p.parse_args(argv)
    C.setup_env()
    threads = C.apply_threads(args.params, torch=True)

    from ragrig.core.config import load_section, validate_section
    from ragrig.core.io import read_json, read_table
    from ragrig.rerank import make_reranker, rerank_run
    from ragrig.train_rerank.train import run_stage

    result = C.header(
        "rerank", ["torch", "transformers", "sentence-transformers", "datasets", "bm25s"]
    )
    data = C.load_dataset(args.dataset_root, args.params)
    if args.train:
        cfg = load_section("train_rerank", args.params)
        update = {"enabled": True}
        if args.max_pairs is not None:
            update["max_pairs"] = args.max_pairs
        cfg = cfg.model_copy(update=update)
        dataset = validate_section(
            "dataset", {"name": args.dataset_root.name, "root": str(args.dataset_root)}
        )
        workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-rerank-"))
        model_dir = workdir / "train_rerank"
        t0 = time.perf_counter()
        manifest = run_stage(cfg, dataset, load_section("parse", args.params), model_dir, threads)
        stage_s = time.perf_counter() - t0
        model_label = "trained now"
    else:
        model_dir = args.model
        manifest = read_json(model_dir / "manifest.json")
        stage_s = None
        model_label = str(model_dir)
    training = {
        k: manifest.get(k)
        for k in (
            "pairs",
            "labels",
            "train_queries",
            "queries_in_pairs",
            "dropped_eval_overlap",
            "mining_seconds",
            "train_seconds",
            "pairs_per_s",
            "train_loss",
            "weights_sha256",
            "threads",
        )
    }
    training["stage_seconds"] = round(stage_s, 1) if stage_s is not None else None
    training["config"] = manifest.get("config")

    if args.run is not None:
        run = read_table(args.run, "run")
        first = f"run file {args.run}"
    else:
        run = first_stage_bm25(data, args.params, args.first_depth)
        first = f"bm25 top {args.first_depth} (index.sparse of params)"
    qids = data.query_ids[: args.max_queries] if args.max_queries else data.query_ids
    run = run[run["qid"].isin(set(qids))]
    qrels = {q: data.qrels[q] for q in qids if q in data.qrels}
    queries = dict(zip(data.query_ids, data.query_texts, strict=True))
    text = dict(zip(data.chunks["chunk_id"], data.chunks["text"], strict=True))
    base = measures(run, qrels)
    rows = []
    for depth in args.depths:
        cfg = validate_section(
            "rerank", {"method": "trained", "model": str(model_dir), "depth": depth}
        )
        reranker = make_reranker(cfg)
        cands = int(
            run.groupby("qid").size().clip(upper=depth).sum()
        )  # pairs scored (lists shorter than depth are not padded)
        t0 = time.perf_counter()
        new, latency = rerank_run(run, queries, text, reranker, depth, progress=False)
        wall = time.perf_counter() - t0
        m = measures(new, qrels)
        lat = latency["latency_ms"]
        rows.append(
            {
                "depth": depth,
                **{k: round(v, 4) for k, v in m.items()},
                "delta_ndcg@10": round(m["ndcg@10"] - base["ndcg@10"], 4),
                "pairs_scored": cands,
                "pairs_per_s": round(cands / wall, 1) if wall else None,
                "latency_ms_median": round(float(lat.median()), 1),
                "latency_ms_p95": round(float(lat.quantile(0.95)), 1),
                "batch_size": cfg.batch_size,
            }
        )
        C.print_table(
            f"rerank=trained, depth {depth}",
            ["measure", "first stage", "reranked"],
            [[k, base[k], m[k]] for k in MEASURES],
        )
    best = max(rows, key=lambda r: r["ndcg@10"]) if rows else None
    result |= {
        "config": {
            "dataset": str(args.dataset_root),
            "queries": len(qids),
            "queries_in_split": len(data.query_ids),
            "model": model_label,
            "first_stage": first,
            "depths": args.depths,
            "threads": threads,
        },
        "training": training,
        "first_stage": {k: round(v, 4) for k, v in base.items()},
        "reranked": rows,
        "target_ndcg10": TARGET_NDCG10,
        "target_met": (best["ndcg@10"] >= TARGET_NDCG10 if best else None)
        if "scifact" in str(args.dataset_root)
        else None,
    }
    C.print_table(
        "training",
        ["pairs", "train s", "pairs/s", "loss"],
        [
            [
                training["pairs"],
                training["train_seconds"],
                training["pairs_per_s"],
                training["train_loss"],
            ]
        ],
    )
    C.print_table(
        "reranked vs first stage",
        ["depth", "nDCG@10", "delta", "MRR", "ms/query p50", "ms p95", "pairs/s"],
        [
            [
                r["depth"],
                r["ndcg@10"],
                r["delta_ndcg@10"],
                r["rr"],
                r["latency_ms_median"],
                r["latency_ms_p95"],
                r["pairs_per_s"],
            ]
            for r in rows
        ],
    )
    C.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
