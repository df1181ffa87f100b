"""`ragrig log`: log a report already on disk to MLflow (one the report stage could not log)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "log",
        help="log the report on disk (reports/, its inputs under data/) to the MLflow store "
        "params.yaml names: for a run the report stage could not log",
    )
    p.add_argument("--params", type=Path, default=Path("params.yaml"))
    p.add_argument("--metrics", type=Path, default=Path("reports/metrics.json"))
    p.add_argument("--out", type=Path, default=Path("reports/run"), help="the report's folder")
    p.add_argument("--html", type=Path, default=Path("reports/index.html"))
    p.add_argument("--data", type=Path, default=Path("data"), help="the stages' outputs")
    p.set_defaults(func=cmd_log)


def cmd_log(args: argparse.Namespace) -> int:
    from ragrig.report.publish import publish_saved
    from ragrig.tracking.stores import redact

    uri, run_id, took = publish_saved(args.params, args.metrics, args.out, args.html, args.data)
    print(f"logged: MLflow run {run_id} in {redact(uri)} ({took:.1f} s)")
    return 0
