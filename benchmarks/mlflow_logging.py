"""Cost of the report stage's MLflow logging per run (what a sweep point pays on top of its
report), each run in a fresh process as in a sweep: importing MLflow and opening the store,
then logging params, metrics, tags, artifacts and the answers table.

    python benchmarks/mlflow_logging.py --project DIR [--runs 5]

DIR is a checkout whose pipeline has run (e.g. after `make smoke`: reports/run,
reports/metrics.json, data/). Runs go to a fresh store in a temporary folder; the first run
(which creates the store) is reported apart. Not one of run_all's benchmarks: it needs the
outputs of a finished run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from pathlib import Path
import pandas as pd
from ragrig.core.config import load_params
from ragrig.core.io import read_json
from ragrig.tracking.contents import answers_table
proj = Path(sys.argv[2]); out = proj / "reports/run"
params = load_params(proj / "params.yaml"); metrics = read_json(proj / "reports/metrics.json")
answers = answers_table(
    pd.read_parquet(proj / "data/parse/queries.parquet"),
    pd.read_parquet(proj / "data/generate/generations.parquet"),
    pd.read_parquet(proj / "data/judge/judgments.parquet"),
    pd.read_csv(out / "scorecard.csv"),
)
arts = [proj / "reports/metrics.json", out / "per_query.parquet", out / "slices.csv",
        out / "scorecard.csv", out / "summary.txt", *sorted((out / "plots").glob("*.png"))]
t1 = time.perf_counter()
from ragrig.tracking.run import log_run
log_run(sys.argv[1], "ragrig", params, metrics, arts, proj, answers=answers, environ={})
t2 = time.perf_counter()
print(json.dumps({"inputs_s": t1 - t0, "mlflow_s": t2 - t1}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--project", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    src = Path(__file__).resolve().parents[1] / "src"
    with tempfile.TemporaryDirectory() as tmp:
        uri = f"sqlite:///{Path(tmp) / 'mlflow.db'}"
        times = []
        for _ in range(args.runs + 1):
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, uri, str(args.project.resolve())],
                capture_output=True,
                text=True,
                env={**_env(), "PYTHONPATH": str(src)},
                check=True,
            )
            times.append(json.loads(proc.stdout.strip().splitlines()[-1])["mlflow_s"])
    first, rest = times[0], times[1:]
    print(
        f"MLflow logging per run (import, store, run): first run (creates the store) {first:.2f} s"
    )
    print(
        f"  next {len(rest)} runs: median {statistics.median(rest):.2f} s, "
        f"min {min(rest):.2f} s, max {max(rest):.2f} s"
    )


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}


if __name__ == "__main__":
    main()
