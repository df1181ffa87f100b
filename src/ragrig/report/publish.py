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
        lock_timeout_s=mlflow_cfg.lock_timeout_s,
    )
    return run_id, time.perf_counter() - started


# The report stage's files and inputs, as dvc.yaml names them (`ragrig log` reads them back)
STAGE_INPUTS = ("parse", "embed", "retrieve", "rerank", "generate", "judge")
LOG_LATER = "ragrig log"


def not_logged_line(reason: str, files: list[Path]) -> str:
    """What the console says when the run could not be logged: why, that the files on disk are
    whole, and the command that logs them later."""
    where = ", ".join(str(f) for f in files)
    return (
        f"report: not logged to MLflow: {reason}; the report's files are complete ({where}): "
        f"log them once the store works with `{LOG_LATER}`"
    )


def publish_saved(
    params_path: Path, metrics: Path, out: Path, html: Path | None, data: Path
) -> tuple[str, str, float]:
    """Log a report already on disk (the report stage's files, its inputs under `data`) as the
    stage would have: give the tracking URI, the run id and the seconds logging took."""
    import pandas as pd

    from ragrig.core.config import load_params, load_section
    from ragrig.core.errors import DataValidationError
    from ragrig.core.io import read_json
    from ragrig.report.inputs import read_inputs
    from ragrig.tracking.run import configure

    missing = [p for p in (params_path, metrics, out / "scorecard.csv") if not p.exists()]
    if missing:
        raise DataValidationError(
            f"no report to log: {', '.join(map(str, missing))} missing (run the pipeline first)"
        )
    cfg = load_section("report", params_path)
    uri = configure(cfg.mlflow, Path.cwd())
    dirs = [data / name for name in STAGE_INPUTS]
    inputs = read_inputs(*dirs, labels_file=Path(cfg.scorecard.labels.file))
    scorecard = pd.read_csv(out / "scorecard.csv")
    report = Report(
        per_query=pd.DataFrame(), slices=pd.DataFrame(), metrics=read_json(metrics),
        scorecard=scorecard if len(scorecard.columns) else None,
    )  # fmt: skip
    files = artifact_files(metrics, out, html if html is not None and html.exists() else None)
    params = load_params(params_path)
    run_id, took = publish(
        uri, cfg.mlflow, params, report, inputs, files, (dirs[1], dirs[4], dirs[5])
    )
    return uri, run_id, took
