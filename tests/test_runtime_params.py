"""Through real DVC on the tiny fixture: runtime.seed reruns only the stage that uses it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .conftest import copy_run, sh

pytestmark = pytest.mark.e2e

BASE = ["dataset=tiny", "generate=extractive", "report.mlflow.enabled=false"]
STAGES = [
    "parse",
    "chunk",
    "train_embed",
    "embed",
    "index",
    "retrieve",
    "train_rerank",
    "rerank",
    "estimate",
    "generate",
    "train_verifier",
    "judge",
    "report",
]


def _ran(ws: Path, since: int) -> list[str]:
    path = ws / ".ragrig" / "stage_log.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(x)["stage"] for x in lines[since:] if json.loads(x)["status"] == "ok"]


def _params(ws: Path, *overrides: str) -> None:
    sh([sys.executable, "-m", "ragrig", "params", "write", *BASE, *overrides], ws)


@pytest.mark.full  # make test-all: test_e2e covers a downstream-only rerun
def test_changing_the_seed_reruns_generate_and_what_follows_only(tmp_path, tiny_run):
    ws = copy_run(tiny_run, tmp_path / "ws")
    assert _ran(ws, 0)[: len(STAGES)] == STAGES  # the session's cold run
    _params(ws)
    sh(["dvc", "repro"], ws)  # the copy as the session's tests left it, brought to BASE
    # lines of the log, failed runs included: _ran(ws, since) slices the lines
    before = len((ws / ".ragrig" / "stage_log.jsonl").read_text().splitlines())

    _params(ws, "runtime.seed=14")
    sh(["dvc", "repro"], ws)
    ran = _ran(ws, before)
    # generate samples its queries with the seed (and estimate prices the same sample); judge
    # and report follow only if its output changed (here: its latencies). Nothing upstream
    # reads the seed, so nothing upstream reruns.
    assert ran[:2] == ["estimate", "generate"], ran
    assert ran == [s for s in STAGES[STAGES.index("estimate") :] if s in ran], ran
    status = sh(["dvc", "status"], ws).stdout
    assert "changed" not in status, status
