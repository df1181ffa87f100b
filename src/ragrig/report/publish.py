"""What the report logs to MLflow: one run with the metrics, the run's files as artifacts, the
answers table, the answers as traces (when configured) and each torch stage's precision."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ragrig.report.base import Report, ReportInputs
from ragrig.report.inputs import precision_decisions


def artifact_files(metrics: Path, out: Path, html: Path | None) -> list[Path]:
    """The report's files an MLflow run keeps, in a fixed order."""
    return [
        metrics,
        *(out / name for name in ("per_query.parquet", "slices.csv", "scorecard.csv")),
        *(out / name for name in ("deltas.csv", "deltas.json", "summary.txt")),
        *sorted((out / "plots").glob("*.png")),
        *(out / n for n in ("filters.csv", "position.csv", "answers.html") if (out / n).exists()),
        *([html] if html is not None else []),
    ]


def publish(
    uri: str,
    mlflow_cfg: Any,
    params: dict,
    report: Report,
    inputs: ReportInputs,
    files: list[Path],
    stage_dirs: tuple[Path, Path, Path],
) -> tuple[str, float]:
    """Log the run; give its id and the seconds logging took. `stage_dirs`: the embed, generate
    and judge outputs, whose manifests hold the resolved precision."""
    from ragrig.tracking.contents import answer_traces, answers_table, precision_tags
    from ragrig.tracking.run import log_run

    started = time.perf_counter()
    run_id = log_run(
        uri,
        mlflow_cfg.experiment,
        params,
        report.metrics,
        files,
        Path.cwd(),
        answers=answers_table(
            inputs.queries, inputs.generations, inputs.judgments, report.scorecard
        ),
        artifacts_location=mlflow_cfg.artifact_location,
        traces=(
            answer_traces(inputs.queries, inputs.generations, inputs.judgments, inputs.judge_veto)
            if mlflow_cfg.traces
            else None
        ),
        tags=precision_tags(precision_decisions(*stage_dirs)),
    )
    return run_id, time.perf_counter() - started
