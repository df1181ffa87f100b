"""DVC stage report: metrics.json, per-query and slice tables, plots, and one MLflow run."""

from __future__ import annotations

import os
import sys
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
    from ragrig.core.config import load_params, load_section
    from ragrig.core.errors import ServiceError
    from ragrig.core.io import atomic_dir, read_json, write_json
    from ragrig.report import answers_page
    from ragrig.report.answers_page import write_answers_page
    from ragrig.report.html import write_run_page
    from ragrig.report.inputs import read_inputs
    from ragrig.report.paired import write_deltas, write_trec_files
    from ragrig.report.plots import write_plots
    from ragrig.report.publish import artifact_files, not_logged_line, publish
    from ragrig.report.step import compute
    from ragrig.report.views import run_tables, write_views
    from ragrig.tracking.run import configure, preload

    cfg = load_section("report", args.params)
    uri, not_logged = None, None
    if cfg.mlflow.enabled:
        preload()
        # the store and artifact bucket reachable, before the report computes (seconds); one
        # that is not still gets the report's files, which are the run's results
        try:
            uri = configure(cfg.mlflow, Path.cwd())
        except ServiceError as exc:
            not_logged = str(exc)
    _, embed_dir, _, _, generate_dir, judge_dir = args.inputs
    inputs = read_inputs(
        *args.inputs,
        labels_file=Path(cfg.scorecard.labels.file),
        documents=cfg.coverage.intent is not None and cfg.coverage.doc_type is not None,
    )
    params = load_params(args.params)
    ingestion = read_json(args.ingestion) if args.ingestion is not None else None
    done = compute(inputs, cfg, params, seed, ingestion)
    report, deltas, summary = done.report, done.deltas, done.summary
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
        for name, table in done.tables.items():
            table.to_csv(out / name, index=False, float_format="%.6f")
        # each answer with its claims, passages and the judge's reasons, linked from the page
        write_answers_page(
            out / answers_page.NAME,
            inputs.queries,
            inputs.generations,
            inputs.judgments,
            answers_page.slice_columns(report.per_query, list(report.metrics["slices"])),
            inputs.judge_veto,
            back=os.path.relpath(args.html, args.out) if args.html is not None else None,
        )
    write_json(args.metrics, report.metrics)
    if args.html is not None:
        href = os.path.relpath(args.out / answers_page.NAME, args.html.parent)
        write_run_page(
            report.metrics,
            args.html,
            per_query=report.per_query,
            params=params,
            seed=seed,
            sections=[answers_page.scorecard_section(inputs.judgments, href)],
        )
    print(summary)
    if uri is not None:
        files = artifact_files(args.metrics, args.out, args.html)
        stage_dirs = (embed_dir, generate_dir, judge_dir)
        try:
            run_id, waited = publish(uri, cfg.mlflow, params, report, inputs, files, stage_dirs)
        except ServiceError as exc:  # the files above stay: they are the results
            not_logged = str(exc)
        else:
            print(f"report: MLflow run {run_id} in {uri} (logged in {waited:.1f} s)")
    if not_logged is not None:
        written = [args.metrics, args.out, *([args.html] if args.html is not None else [])]
        print(not_logged_line(not_logged, written), file=sys.stderr)


if __name__ == "__main__":
    stage.run("report", main)
