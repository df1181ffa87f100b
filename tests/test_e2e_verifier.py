"""judge=verifier through real DVC on the tiny fixture: the train_verifier stage trains on the
fixture's training claims, the judge stage reads its model, and a judge-only change never reruns
the training."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest

from .conftest import copy_project, sh

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BASE = [
    "dataset=tiny",
    "generate=extractive",
    "judge=verifier",
    "judge.model=null",  # the train_verifier stage's output, not the shipped model
    "report.mlflow.enabled=false",
    "train_verifier.enabled=true",
    "train_verifier.max_pairs=16",
]


def _ran(ws, since: int = 0) -> list[str]:
    path = ws / ".ragrig" / "stage_log.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(x)["stage"] for x in lines[since:] if json.loads(x)["status"] == "ok"]


def test_verifier_judge_through_dvc(tmp_path):
    ws = copy_project(tmp_path)
    sh([sys.executable, "-m", "ragrig", "init-dvc"], ws)
    sh([sys.executable, "-m", "ragrig", "params", "write", *BASE], ws)
    sh(["dvc", "repro"], ws)
    manifest = json.loads((ws / "data/train_verifier/manifest.json").read_text())
    assert manifest["trained"] is True and manifest["pairs"] == 16
    assert manifest["claims_dropped_held_out"] == []
    judged = pd.read_parquet(ws / "data/judge/judgments.parquet")
    scored = judged[judged["status"] == "scored"]
    assert len(scored) > 0
    for claims in scored["claims"]:
        for c in json.loads(claims):
            assert 0.0 <= c["p_supported"] <= 1.0
    before = len(_ran(ws))
    sh(
        [
            sys.executable,
            "-m",
            "ragrig",
            "params",
            "write",
            *BASE,
            "judge.support_threshold=0.3",
        ],
        ws,
    )
    sh(["dvc", "repro"], ws)
    ran = _ran(ws, before)
    assert "train_verifier" not in ran and ran[:1] == ["judge"], ran
