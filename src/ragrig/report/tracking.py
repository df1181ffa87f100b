"""Record a report as one MLflow run: flattened params, metrics, tags and artifacts."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from ragrig.metrics.aggregate import flatten, mlflow_key
from ragrig.paths import project_root

ENV_URI = "RAGRIG_MLFLOW_URI"


def tracking_uri(configured: str | None, cwd: Path) -> str:
    """Configured URI, else $RAGRIG_MLFLOW_URI, else sqlite:///<project>/mlflow.db (absolute)."""
    if configured:
        return configured
    if os.environ.get(ENV_URI):
        return os.environ[ENV_URI]
    return f"sqlite:///{project_root(cwd) / 'mlflow.db'}"


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
    """Log one run; return its run id."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    import mlflow

    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(experiment)
    p_hash = params_hash(params)
    name = f"{params.get('dataset', {}).get('name', 'data')}-{params.get('retrieve', {}).get('method', '')}-{p_hash[:8]}"
    tags = {
        "git_commit": git_commit(cwd),
        "params_hash": p_hash,
        "dvc_exp_name": os.environ.get("DVC_EXP_NAME", ""),
    }
    with mlflow.start_run(run_name=name, tags=tags) as run:
        flat = flatten_params(params)
        items = sorted(flat.items())
        for i in range(0, len(items), 90):
            mlflow.log_params(dict(items[i : i + 90]))
        mlflow.log_metrics(flatten(metrics))
        for path in artifacts:
            if path.exists():
                mlflow.log_artifact(str(path))
        return run.info.run_id
