"""The sweep engine on the tiny fixture through real DVC: a parallel sweep runs each stage
configuration once, prints one line per point and a results table, logs an MLflow parent run;
its rerun runs nothing and logs nothing; a failing point is counted and recorded; a dataset
root outside the project keeps its relative value, so parse is restored from a plain run."""

from __future__ import annotations

import collections
import json
import shutil
from pathlib import Path

import pytest

from .conftest import FIXTURE, copy_project, project_env, sh

pytestmark = [pytest.mark.e2e, pytest.mark.full]

BASE = ["dataset=tiny", "generate=extractive", "chunk=recursive", "chunk.overlap=2"]
GRID = ["chunk.max_tokens=8,16", "retrieve.ef_search=16,64"]


def _python() -> str:
    return str(Path(project_env()["PATH"].split(":")[0]) / "python")


def _log(ws: Path) -> list[dict]:
    path = ws / ".ragrig" / "stage_log.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.strip()]


def _ran(ws: Path, since: int) -> collections.Counter:
    return collections.Counter(e["stage"] for e in _log(ws)[since:] if e["status"] == "ok")


def _runs(ws: Path) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{ws / 'mlflow.db'}")
    exp = client.get_experiment_by_name("ragrig")
    return client.search_runs([exp.experiment_id], max_results=1000) if exp else []


def _sweep(ws: Path, *args: str, code: int = 0, name: str = "test-sweep") -> tuple[str, list[dict]]:
    out = ws / ".ragrig" / name
    shutil.rmtree(out, ignore_errors=True)
    proc = sh([_python(), "-m", "ragrig", "sweep", "--sweep-dir", str(out), *args], ws, check=False)
    assert proc.returncode == code, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout, json.loads((out / "rows.json").read_text())


def tiny_sweep_project(root: Path) -> Path:
    """A committed copy of the project with the sweep's base params on the tiny fixture."""
    ws = copy_project(root)
    sh([_python(), "-m", "ragrig", "init-dvc"], ws)
    sh([_python(), "-m", "ragrig", "params", "write", *BASE], ws)
    sh(["git", "add", "-A"], ws)
    sh(["git", "commit", "-qm", "tiny params"], ws)
    return ws


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    return tiny_sweep_project(tmp_path_factory.mktemp("sweep") / "proj")


def test_parallel_sweep_computes_each_stage_configuration_once(ws):
    stdout, rows = _sweep(ws, "--multirun", "hydra/launcher=joblib", *BASE, *GRID)
    ran = _ran(ws, 0)
    # the minimum: parse once, chunk/embed/index once per chunk size, retrieve once per point;
    # the report reads retrieval latencies, so it runs once per point
    assert {s: ran[s] for s in ("parse", "chunk", "embed", "index", "retrieve")} == {
        "parse": 1,
        "chunk": 2,
        "embed": 2,
        "index": 2,
        "retrieve": 4,
    }
    assert ran["train_verifier"] == 1 and ran["report"] == 4
    # rerank, generate and judge rerun only when the ranking they read changed
    assert 2 <= ran["rerank"] == ran["generate"] == ran["judge"] <= 4

    # one progress line per point, no DVC chatter, then the table
    lines = stdout.splitlines()
    progress = [ln for ln in lines if ln.startswith("[")]
    assert len(progress) == 4 and all("  ok  " in ln and ln.endswith(" s") for ln in progress)
    assert {ln.split("] ", 1)[1].split("  ")[0] for ln in progress} == {
        f"chunk.max_tokens={t} retrieve.ef_search={e}" for t in (8, 16) for e in (16, 64)
    }
    assert "lock file" not in stdout and "Stage '" not in stdout
    header = next(ln for ln in lines if ln.startswith("chunk.max_tokens"))
    assert header.split()[:4] == ["chunk.max_tokens", "retrieve.ef_search", "nDCG@10", "Recall@100"]
    assert len(lines) < 20

    assert [r["params"] for r in rows] == [
        {"chunk.max_tokens": t, "retrieve.ef_search": e} for t in (8, 16) for e in (16, 64)
    ]
    assert all(r["status"] == "ok" and r["error"] is None for r in rows)
    for r in rows:
        assert 0.0 <= r["metrics"]["retrieval/ndcg_at_10"] <= 1.0
        assert r["metrics"]["latency_ms/retrieve/p95"] > 0

    runs = _runs(ws)
    (parent,) = [r for r in runs if r.data.tags.get("ragrig.sweep") == "1"]
    assert parent.info.status == "FINISHED"
    assert parent.info.run_name.endswith(" chunk.max_tokens retrieve.ef_search")
    assert parent.data.params["chunk.max_tokens"] == "8,16"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(c.info.run_name for c in children) == sorted(r["point"] for r in rows)
    assert {c.data.tags["ragrig.sweep_point"] for c in children} == {r["point"] for r in rows}


def test_rerun_runs_no_stage_and_logs_no_run(ws):
    before, runs_before = len(_log(ws)), len(_runs(ws))
    stdout, rows = _sweep(ws, "-j", "2", *BASE, *GRID)
    assert _ran(ws, before) == collections.Counter()
    assert len(_runs(ws)) == runs_before
    assert all(r["status"] == "ok" and "retrieval/ndcg_at_10" in r["metrics"] for r in rows)
    # each point is an experiment of this commit with exactly its params: none runs again
    progress = [ln for ln in stdout.splitlines() if ln.startswith("[")]
    assert len(progress) == 4 and all("nothing to run" in ln for ln in progress)


def test_outside_dataset_root_keeps_its_params_and_parse_is_restored(ws):
    outside = ws.parent / "outside" / "tiny"
    shutil.copytree(FIXTURE, outside)
    root = "../outside/tiny"
    # a plain run with the same overrides: parse computed once, in the workspace
    sh([_python(), "-m", "ragrig", "params", "write", *BASE, f"dataset.root={root}"], ws)
    sh(["dvc", "repro", "parse"], ws)
    sh(["git", "checkout", "params.yaml"], ws)
    before = len(_log(ws))
    assert _ran(ws, before - 1) == collections.Counter({"parse": 1})
    # one point (a sweep of one is still a DVC experiment in its own copy)
    point = "retrieve.ef_search=16"
    _, rows = _sweep(ws, *BASE, f"dataset.root={root}", point)
    ran = _ran(ws, before)
    assert "parse" not in ran and ran["report"] >= 1  # restored, while later stages did run
    assert all(r["status"] == "ok" for r in rows)
    # the experiments recorded the configured relative root, as the plain run did
    refs = sh(["git", "for-each-ref", "--format=%(refname)", "refs/exps/"], ws).stdout.split()
    roots = set()
    for ref in refs:
        lock = sh(["git", "show", f"{ref}:dvc.lock"], ws).stdout
        roots |= {
            ln.split(":", 1)[1].strip()
            for ln in lock.splitlines()
            if ln.strip().startswith("root:")
        }
    assert root in roots and not any(r.startswith("/") for r in roots)

    # the same sweep again is not rerun; after the outside data changed it is (parse reruns)
    before = len(_log(ws))
    stdout, _ = _sweep(ws, *BASE, f"dataset.root={root}", point)
    assert _ran(ws, before) == collections.Counter() and stdout.count("nothing to run") == 1
    corpus = outside / "corpus.jsonl"
    corpus.write_text(corpus.read_text().replace("Mars has two moons", "Mars has 2 moons"))
    stdout, rows = _sweep(ws, *BASE, f"dataset.root={root}", point)
    assert _ran(ws, before)["parse"] == 1 and "nothing to run" not in stdout
    assert all(r["status"] == "ok" for r in rows)


def test_failing_point_is_counted_recorded_and_the_others_run(ws):
    runs_before = {r.info.run_id for r in _runs(ws)}
    stdout, rows = _sweep(
        ws,
        *BASE,
        "chunk.max_tokens=8",
        "retrieve.ef_search=16",
        "dataset.root=tests/fixtures/tiny_beir,/nonexistent/tiny",
        code=1,
    )
    assert [r["status"] for r in rows] == ["ok", "failed"]
    assert "/nonexistent/tiny" in rows[1]["error"] or "exit code" in rows[1]["error"]
    failed_line = next(ln for ln in stdout.splitlines() if "FAILED" in ln)
    assert "dataset.root=/nonexistent/tiny" in failed_line and "(log: " in failed_line
    log = Path(failed_line.split("(log: ", 1)[1].rstrip(")"))
    assert log.is_file() and "exp run --temp" in log.read_text()
    assert stdout.splitlines()[-3].startswith("failed points (1):")
    new = [r for r in _runs(ws) if r.info.run_id not in runs_before]
    (parent,) = [r for r in new if r.data.tags.get("ragrig.sweep") == "1"]
    assert parent.info.status == "FAILED"
    (child,) = [r for r in new if r.info.status == "FAILED" and r is not parent]
    assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert child.info.run_name == "dataset.root=/nonexistent/tiny"
    assert child.data.tags["ragrig.error"] == rows[1]["error"]
