"""The example a newcomer runs (examples/toy_rag_service.py, docs/own-system.md): the toy
service on 127.0.0.1 evaluated through generate=rag_http by `dvc repro` on the fixture run
(tiny_run), then its interaction log through `ragrig traces`."""

from __future__ import annotations

import json
import subprocess

import pandas as pd

from .conftest import BIN, PROJECT, copy_run, project_env, sh

PY = str(BIN / "python")


def test_the_toy_service_is_judged_through_rag_http_and_its_log_through_traces(tmp_path, tiny_run):
    log = tmp_path / "interactions.jsonl"
    service = subprocess.Popen(
        [PY, str(PROJECT / "examples" / "toy_rag_service.py"), "--port", "0", "--log", str(log)],
        stdout=subprocess.PIPE,
        text=True,
        env=project_env(),
    )
    try:
        first = service.stdout.readline()
        assert first.startswith("toy RAG service on http://127.0.0.1:"), first
        url = first.split()[4]
        ws = copy_run(tiny_run, tmp_path / "ws")
        sh([PY, "-m", "ragrig", "params", "write", "dataset=tiny", "generate=rag_http",
            f"generate.url={url}"], ws)  # fmt: skip
        out = sh(["dvc", "repro"], ws).stdout
    finally:
        service.terminate()
        service.wait(timeout=30)
    queries = pd.read_parquet(ws / "data" / "parse" / "queries.parquet")
    gens = pd.read_parquet(ws / "data" / "generate" / "generations.parquet")
    assert len(gens) == len(queries) and set(gens["status"]) <= {"ok", "empty"}
    assert f"generate: rag_http {url}: {len(gens)} answers" in out
    # each context passage is a chunk of the document the service named
    first_ids = json.loads(gens["context_chunk_ids"].iloc[0])
    assert len(first_ids) == 3 and all(c.endswith("#0") for c in first_ids)
    metrics = json.loads((ws / "reports" / "metrics.json").read_text())
    assert metrics["counts"]["generation_status"]["ok"] == int((gens["status"] == "ok").sum())

    lines = log.read_text().splitlines()
    assert len(lines) == len(queries)
    proc = subprocess.run(
        [PY, "-m", "ragrig", "traces", str(log), "--sample-rate", "1", "--no-mlflow", "--quiet",
         "--params", str(ws / "params.yaml"), "--out", str(tmp_path / "traces")],
        cwd=ws, env=project_env(), capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    table = pd.read_csv(tmp_path / "traces" / "windows.csv")
    assert int(table["lines"].sum()) == len(queries) == int(table["judged"].sum())
    assert f"traces {log}: {len(queries)} lines, 0 left out" in proc.stdout
