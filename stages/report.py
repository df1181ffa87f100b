"""DVC stage report: metrics.json, per-query and slice tables, plots, and one MLflow run."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import _bootstrap  # noqa: F401  (this checkout's src/ first on sys.path)
from ragrig.runtime import stage


def main() -> None:
    p = stage.parser(__doc__)
    p.add_argument("--metrics", type=Path, required=True)
    p.add_argument("--html", type=Path, default=None, help="the run's HTML scorecard")
    p.add_argument("--ingestion", type=Path, default=None, help="the chunk stage's ingestion.json")
    args = p.parse_args()
    seed = stage.read_runtime(args.params, "seed")  # every bootstrap: intervals, deltas, the page
    import numpy as np
    import pandas as pd

    from ragrig.core.config import load_params, load_section
    from ragrig.core.io import atomic_dir, read_json, read_table, write_json
    from ragrig.report import ReportInputs, build_report
    from ragrig.report.html import write_run_page
    from ragrig.report.paired import rerank_comparison, write_deltas, write_trec_files
    from ragrig.report.plots import write_plots
    from ragrig.report.scorecard import Vectors
    from ragrig.report.summary import format_summary
    from ragrig.report.views import run_tables, write_views
    from ragrig.tracking.contents import answer_traces, answers_table, precision_tags
    from ragrig.tracking.run import configure, log_run, preload

    parse_dir, embed_dir, retrieve_dir, rerank_dir, generate_dir, judge_dir = args.inputs
    cfg = load_section("report", args.params)
    uri = None
    if cfg.mlflow.enabled:
        preload()
        # the store and artifact bucket reachable, before the report computes (seconds)
        uri = configure(cfg.mlflow, Path.cwd())
    ann_path = retrieve_dir / "ann_recall.parquet"
    manifest = read_json(retrieve_dir / "manifest.json")
    inputs = ReportInputs(
        queries=read_table(parse_dir / "queries.parquet", "queries"),
        qrels=read_table(parse_dir / "qrels.parquet", "qrels"),
        retrieved=read_table(retrieve_dir / "run.parquet", "run"),
        lanes=read_table(retrieve_dir / "lanes.parquet", "lanes"),
        reranked=read_table(rerank_dir / "run.parquet", "run"),
        ann=read_table(ann_path, "ann_recall") if ann_path.exists() else None,
        ann_timing={k: manifest[k] for k in ("approx_ms", "exact_ms") if k in manifest} or None,
        latency=pd.concat(
            [
                read_table(d / "latency.parquet", "latency")
                for d in (embed_dir, retrieve_dir, rerank_dir)
            ],
            ignore_index=True,
        ),
        generations=read_table(generate_dir / "generations.parquet", "generations"),
        judgments=read_table(judge_dir / "judgments.parquet", "judgments"),
        unjudged_not_parsed=read_json(parse_dir / "manifest.json").get("queries_unjudged", 0),
        vectors=Vectors(
            query_ids=read_table(embed_dir / "query_ids.parquet", "ids")["id"].tolist(),
            queries=np.load(embed_dir / "queries.npy", mmap_mode="r"),
            chunk_ids=read_table(embed_dir / "chunk_ids.parquet", "ids")["id"].tolist(),
            chunks=np.load(embed_dir / "chunks.npy", mmap_mode="r"),
        ),
        judge_weights=read_json(judge_dir / "manifest.json").get("weights"),
    )
    labels_file = Path(cfg.scorecard.labels.file)
    if labels_file.exists():  # people's labels of these answers (ragrig label): checked whole
        from ragrig.dataset.labels import read_labels, run_answers

        answers = run_answers(inputs.generations, inputs.judgments)
        inputs = dataclasses.replace(
            inputs, labels=read_labels(labels_file, answers), labels_file=str(labels_file)
        )
    report = build_report(inputs, cfg, seed=seed)
    # the reranker's paired deltas on identical candidate sets (bootstrap seeded by runtime.seed)
    deltas = rerank_comparison(inputs, report, seed)
    report.metrics["deltas"] = {"rerank_vs_retrieve": deltas.metrics()}
    if args.ingestion is not None:  # attribution, boundaries, coherence, near-duplicates
        report.metrics["ingestion"] = read_json(args.ingestion)
    params = load_params(args.params)
    summary = format_summary(report.metrics, params)
    with atomic_dir(args.out) as out:
        report.per_query.to_parquet(out / "per_query.parquet", index=False)
        report.slices.to_csv(out / "slices.csv", index=False, float_format="%.6f")
        report.scorecard.to_csv(out / "scorecard.csv", index=False, float_format="%.6f")
        (out / "summary.txt").write_text(summary + "\n", encoding="utf-8")
        write_plots(report, out / "plots")
        # headline.json, latency.csv, recall_at_k.csv: what dvc metrics/plots/exp show read
        write_views(report.metrics, run_tables(inputs.reranked, inputs.lanes), inputs.qrels, out)
        write_deltas(deltas, out)
        write_trec_files(inputs, out)
    write_json(args.metrics, report.metrics)
    if args.html is not None:
        write_run_page(
            report.metrics, args.html, per_query=report.per_query, params=params, seed=seed
        )
    print(summary)
    if uri is not None:
        started = time.perf_counter()
        run_id = log_run(
            uri,
            cfg.mlflow.experiment,
            params,
            report.metrics,
            [
                args.metrics,
                args.out / "per_query.parquet",
                args.out / "slices.csv",
                args.out / "scorecard.csv",
                args.out / "deltas.csv",
                args.out / "deltas.json",
                args.out / "summary.txt",
                *sorted((args.out / "plots").glob("*.png")),
                *([args.html] if args.html is not None else []),
            ],
            Path.cwd(),
            answers=answers_table(
                inputs.queries, inputs.generations, inputs.judgments, report.scorecard
            ),
            artifacts_location=cfg.mlflow.artifact_location,
            traces=(
                answer_traces(inputs.queries, inputs.generations, inputs.judgments)
                if cfg.mlflow.traces
                else None
            ),
            tags=precision_tags(
                {
                    name: read_json(folder / "manifest.json").get("precision_decision")
                    for name, folder in (
                        ("embed", embed_dir),
                        ("generate", generate_dir),
                        ("judge", judge_dir),
                    )
                }
            ),
        )
        waited = time.perf_counter() - started
        print(f"report: MLflow run {run_id} in {uri} (logged in {waited:.1f} s)")


if __name__ == "__main__":
    stage.run("report", main)
