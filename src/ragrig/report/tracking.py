"""Record a report as one MLflow run: flattened params, metrics, tags and artifacts.

A run is FINISHED only once everything is logged. A run whose process died while logging is
marked FAILED: at once when the process is interrupted or terminated (SIGINT/SIGTERM), and for an
uncatchable kill (SIGKILL, power loss) by the next process that opens the store.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ragrig.metrics.aggregate import flatten, mlflow_key
from ragrig.paths import project_root
from ragrig.process import pid_alive

ENV_URI = "RAGRIG_MLFLOW_URI"


def tracking_uri(configured: str | None, cwd: Path) -> str:
    """Configured URI, else $RAGRIG_MLFLOW_URI, else sqlite:///<project>/mlflow.db (absolute)."""
    if configured:
        return configured
    if os.environ.get(ENV_URI):
        return os.environ[ENV_URI]
    return f"sqlite:///{project_root(cwd) / 'mlflow.db'}"


TAG_PID = "ragrig.pid"
TAG_HOST = "ragrig.host"
TAG_FAILURE = "ragrig.failure"


def sqlite_path(uri: str) -> Path | None:
    """The database file of a `sqlite:///` URI (absolute), else None."""
    prefix = "sqlite:///"
    if not uri.startswith(prefix):
        return None
    return Path(uri[len(prefix) :]).resolve()


def artifact_location(uri: str) -> str | None:
    """Where a new experiment keeps its artifacts: `<store folder>/mlartifacts` (absolute) for a
    local sqlite store. Never the working directory: during `dvc exp run --temp` or a queued
    experiment that is DVC's temporary copy, deleted afterwards. None (the server's default
    artifact root) for a tracking server."""
    db = sqlite_path(uri)
    return (db.parent / "mlartifacts").as_uri() if db is not None else None


@contextlib.contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Serialise store creation between processes: two processes opening a not-yet-created
    sqlite store race on its schema (`table ... already exists`)."""
    db = sqlite_path(uri)
    if db is None:
        yield
        return
    import fcntl

    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.with_name(db.name + ".lock"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_experiment(uri: str, experiment: str) -> str:
    """Create the store (schema) and the experiment once, with an absolute artifact location;
    return the experiment id. Safe to call from parallel processes."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow.tracking import MlflowClient

    with store_lock(uri):
        client = MlflowClient(tracking_uri=uri)
        found = client.get_experiment_by_name(experiment)
        if found is not None:
            return found.experiment_id
        return client.create_experiment(experiment, artifact_location=artifact_location(uri))


def fail_abandoned_runs(uri: str, experiment_id: str) -> list[str]:
    """Mark FAILED every RUNNING run of this experiment that a process on this host started and
    that process is gone (killed while logging); return their run ids."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    host = socket.gethostname()
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"attributes.status = 'RUNNING' and tags.`{TAG_HOST}` = '{host}'",
        max_results=1000,
    )
    failed = []
    for run in runs:
        pid = run.data.tags.get(TAG_PID, "")
        if pid.isdigit() and not pid_alive(int(pid)):
            client.set_tag(
                run.info.run_id, TAG_FAILURE, f"process {pid} ended before the run was complete"
            )
            client.set_terminated(run.info.run_id, status="FAILED")
            failed.append(run.info.run_id)
    return failed


class _Terminated(BaseException):
    """Raised in the logging process on SIGTERM so the open run is closed as FAILED."""


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise _Terminated(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def params_hash(params: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()


def flatten_params(params: dict[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in params.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            out.update(flatten_params(value, name))
        else:
            out[mlflow_key(name)] = (
                json.dumps(value) if isinstance(value, list | type(None)) else str(value)
            )
    return out


def git_commit(cwd: Path) -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def log_run(
    uri: str,
    experiment: str,
    params: dict[str, Any],
    metrics: dict[str, Any],
    artifacts: list[Path],
    cwd: Path,
) -> str:
    """Log one run; return its run id. The run ends FINISHED only when params, metrics and
    artifacts are all logged; an exception or SIGINT/SIGTERM on the way ends it FAILED."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    import mlflow

    experiment_id = ensure_experiment(uri, experiment)
    fail_abandoned_runs(uri, experiment_id)
    mlflow.set_tracking_uri(uri)
    p_hash = params_hash(params)
    name = f"{params.get('dataset', {}).get('name', 'data')}-{params.get('retrieve', {}).get('method', '')}-{p_hash[:8]}"
    tags = {
        "git_commit": git_commit(cwd),
        "params_hash": p_hash,
        "dvc_exp_name": os.environ.get("DVC_EXP_NAME", ""),
        TAG_PID: str(os.getpid()),
        TAG_HOST: socket.gethostname(),
    }
    with (
        _sigterm_raises(),
        mlflow.start_run(experiment_id=experiment_id, run_name=name, tags=tags) as run,
    ):
        flat = flatten_params(params)
        items = sorted(flat.items())
        for i in range(0, len(items), 90):
            mlflow.log_params(dict(items[i : i + 90]))
        mlflow.log_metrics(flatten(metrics))
        for path in artifacts:
            if path.exists():
                mlflow.log_artifact(str(path))
        return run.info.run_id
