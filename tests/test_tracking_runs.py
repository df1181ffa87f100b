"""MLflow tracking: one store and experiment with an absolute artifact location, created safely
by parallel processes; a report killed while logging never leaves a run RUNNING."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ragrig.tracking.run import artifact_location, ensure_experiment, log_run

from .conftest import project_env

# A report process that stops for good while logging its first artifact.
_CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from mlflow.tracking import MlflowClient
    from ragrig.tracking import run as tracking

    ready = Path(sys.argv[2])
    def stuck(*args, **kwargs):
        ready.write_text("logging")
        time.sleep(120)
    MlflowClient.log_artifacts = stuck
    art = Path(sys.argv[3])
    tracking.log_run(sys.argv[1], "ragrig", {"retrieve": {"method": "bm25"}},
                     {"retrieval": {"ndcg@10": 0.5}}, [art], art.parent)
    """
)


def _runs(uri: str) -> list[dict]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("ragrig")
    return [
        {
            "id": r.info.run_id,
            "status": r.info.status,
            "metrics": dict(r.data.metrics),
            "params": dict(r.data.params),
            "tags": dict(r.data.tags),
        }
        for r in client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
    ]


def _start_stuck_report(tmp_path: Path, uri: str, name: str) -> tuple[subprocess.Popen, Path]:
    ready = tmp_path / f"{name}.ready"
    art = tmp_path / "metrics.json"
    art.write_text(json.dumps({"x": 1}))
    env = project_env({"PYTHONPATH": os.pathsep.join(sys.path)})
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, uri, str(ready), str(art)], env=env, cwd=tmp_path
    )
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert proc.poll() is None, "the report process ended before logging"
        assert time.monotonic() < deadline
        time.sleep(0.1)
    return proc, art


@pytest.mark.full  # make test-all: a logging process killed
def test_run_killed_while_logging_is_marked_failed(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"

    # SIGTERM (what a stopped `dvc exp`/queue sends): the run is closed FAILED at once
    proc, art = _start_stuck_report(tmp_path, uri, "term")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) != 0
    (term,) = _runs(uri)
    assert term["status"] == "FAILED"
    assert term["tags"]["ragrig.error"] == "Terminated: signal 15"
    assert term["params"]["retrieve.method"] == "bm25"

    # SIGKILL cannot be caught: the run stays RUNNING until the next report opens the store
    proc, art = _start_stuck_report(tmp_path, uri, "kill")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    killed = _runs(uri)[1]
    assert killed["status"] == "RUNNING"
    run_id = log_run(
        uri,
        "ragrig",
        {"retrieve": {"method": "dense"}},
        {"retrieval": {"ndcg@10": 0.25}},
        [art],
        tmp_path,
    )
    runs = {r["id"]: r for r in _runs(uri)}
    assert runs[killed["id"]]["status"] == "FAILED"
    assert "ended before the run was complete" in runs[killed["id"]]["tags"]["ragrig.failure"]
    assert runs[run_id]["status"] == "FINISHED"
    assert runs[run_id]["metrics"] == {"retrieval/ndcg_at_10": 0.25}


def test_experiment_gets_absolute_artifact_location_beside_the_store(tmp_path):
    from mlflow.tracking import MlflowClient

    store = tmp_path / "proj"
    uri = f"sqlite:///{store / 'mlflow.db'}"
    elsewhere = tmp_path / "dvc-temp-copy"
    elsewhere.mkdir()
    art = elsewhere / "summary.txt"
    art.write_text("summary\n")
    cwd = Path.cwd()
    os.chdir(elsewhere)  # a run logged from DVC's temporary copy
    try:
        run_id = log_run(uri, "ragrig", {}, {"m": 1.0}, [art], elsewhere)
    finally:
        os.chdir(cwd)
    exp = MlflowClient(tracking_uri=uri).get_experiment_by_name("ragrig")
    assert exp.artifact_location == (store / "mlartifacts").as_uri()
    assert ensure_experiment(uri, "ragrig") == exp.experiment_id  # idempotent
    assert list(store.glob(f"mlartifacts/{run_id}/artifacts/summary.txt"))
    assert not (elsewhere / "mlruns").exists()
    assert artifact_location("http://127.0.0.1:5000") is None


ENSURE = "import sys; from ragrig.tracking.run import ensure_experiment; print(ensure_experiment(sys.argv[1], 'ragrig'))"
# whole reports logged at once into a store that does not exist yet (parallel sweep points)
LOG = (
    "import sys; from pathlib import Path; from ragrig.tracking.run import log_run, "
    "ensure_experiment; log_run(sys.argv[1], 'ragrig', {'a': 1}, {'m': 1.0}, [], Path('.'), "
    "environ={}); print(ensure_experiment(sys.argv[1], 'ragrig'))"
)


@pytest.mark.full  # make test-all: processes racing on one store
@pytest.mark.parametrize("code", [ENSURE, LOG], ids=["ensure_experiment", "log_run"])
def test_parallel_processes_create_one_store_and_experiment(tmp_path, code):
    n = 3
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = project_env({"PYTHONPATH": os.pathsep.join(sys.path)})
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, uri],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(n)
    ]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0] * n, [o[1][-2000:] for o in outs]
    assert len({o[0].strip() for o in outs}) == 1
    if code == LOG:
        assert [r["status"] for r in _runs(uri)] == ["FINISHED"] * n


def _report_cmd(ws: Path) -> list[str]:
    """The report stage's command as dvc.yaml runs it, with this interpreter."""
    import yaml

    cmd = yaml.safe_load((ws / "dvc.yaml").read_text())["stages"]["report"]["cmd"].split()
    return [sys.executable, *cmd[1:]] if cmd[0] == "python" else cmd


def test_report_keeps_its_files_when_the_store_fails_and_ragrig_log_logs_them(tiny_run, tmp_path):
    import shutil

    from .conftest import copy_run

    ws = copy_run(tiny_run, tmp_path / "ws")
    for name in ("reports/run", "reports/metrics.json", "reports/index.html"):
        path = ws / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n")
    env = project_env({"RAGRIG_MLFLOW_URI": f"sqlite:///{text}"})
    proc = subprocess.run(_report_cmd(ws), cwd=ws, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if "MLflow" in ln]
    assert line.startswith(
        f"report: not logged to MLflow: MLflow tracking store sqlite:///{text}: {text} is not an "
        "SQLite database"
    )
    assert line.endswith("log them once the store works with `ragrig log`")
    assert "Traceback" not in proc.stderr
    for name in ("reports/metrics.json", "reports/index.html", "reports/run/scorecard.csv"):
        assert (ws / name).stat().st_size > 0, name
    uri = f"sqlite:///{tmp_path / 'fixed' / 'mlflow.db'}"
    proc = subprocess.run(
        [sys.executable, "-m", "ragrig", "log"],
        cwd=ws,
        env={**env, "RAGRIG_MLFLOW_URI": uri},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("logged: MLflow run ")
    (run,) = _runs(uri)
    metrics = json.loads((ws / "reports/metrics.json").read_text())
    assert run["status"] == "FINISHED"
    assert run["metrics"]["retrieval/ndcg_at_10"] == pytest.approx(metrics["retrieval"]["ndcg@10"])
