"""The documented sweep, smoke and queue commands as the first things a fresh clone does.

The clone holds exactly what git tracks (dvc.lock included if it were committed, unlike
`copy_project`), an empty DVC cache and no MLflow store. Steps share one clone, in order:
parallel sweep on a new store, sequential sweep and smoke run restored from the run-cache,
parallel queue on a new store, then `make repro` back to the default after an experiment.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from .conftest import PROJECT, sh

pytestmark = [pytest.mark.e2e, pytest.mark.full]

TINY = ["dataset=tiny", "generate=extractive"]
PY = sys.executable
VENV = Path(sys.executable).parent.parent


def clone_as_committed(dest: Path) -> Path:
    """What `git clone` gives: tracked files (and new, not yet committed source files), never a
    local dvc.lock that git does not track, with dvc.lock as committed when it is."""
    ls = ["git", "ls-files", "-z"]
    tracked = subprocess.run(ls, cwd=PROJECT, capture_output=True, text=True, check=True)
    others = subprocess.run(
        [*ls, "--others", "--exclude-standard"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        check=True,
    )
    untracked = [f for f in others.stdout.split("\0") if f and f != "dvc.lock"]
    for rel in [f for f in tracked.stdout.split("\0") if f] + untracked:
        src = PROJECT / rel
        if rel == "dvc.lock":
            text = sh(["git", "show", ":dvc.lock"], PROJECT).stdout  # the committed version
            (dest / rel).write_text(text, encoding="utf-8")
        elif src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    (dest / ".venv").symlink_to(VENV)  # `make` finds the installed venv (kept out of git)
    sh(["git", "init", "-q", "-b", "main"], dest)
    sh(["git", "add", "-A"], dest)
    sh(["git", "commit", "-qm", "clone"], dest)
    return dest


def _make(ws: Path, *args: str) -> subprocess.CompletedProcess:
    # -o: never rebuild the shared venv from the copy's requirement files
    return sh(["make", "--no-print-directory", "-o", ".venv/.installed", *args], ws)


def _stage_runs(ws: Path) -> list[str]:
    path = ws / ".ragrig" / "stage_log.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [e["stage"] for e in map(json.loads, lines) if e["status"] == "ok"]


def _runs(ws: Path) -> pd.DataFrame:
    """The point runs of the store (a sweep's parent run, tag ragrig.sweep=1, left out: its
    params list the swept values and it has no report of its own)."""
    code = (
        "import mlflow,sys;mlflow.set_tracking_uri(sys.argv[1]);"
        "e=mlflow.get_experiment_by_name('ragrig');"
        "df=mlflow.search_runs(experiment_names=['ragrig']);"
        "print(e.artifact_location);print(df.to_json(orient='records'))"
    )
    out = sh([PY, "-c", code, f"sqlite:///{ws / 'mlflow.db'}"], ws).stdout.strip().splitlines()
    df = pd.DataFrame(json.loads(out[-1]))
    if "tags.ragrig.sweep" in df.columns:
        df = df[df["tags.ragrig.sweep"] != "1"].reset_index(drop=True)
    df.attrs["artifact_location"] = out[-2]
    return df


def _assert_runs_with_artifacts(ws: Path, runs: pd.DataFrame, ef: list[str]) -> None:
    assert runs.attrs["artifact_location"] == (ws / "mlartifacts").as_uri()
    assert sorted(runs["params.retrieve.ef_search"]) == ef
    assert set(runs["status"]) == {"FINISHED"}
    for run_id in runs["run_id"]:
        arts = ws / "mlartifacts" / run_id / "artifacts"
        assert (arts / "summary.txt").exists() and (arts / "metrics.json").exists(), arts
    assert not list(ws.rglob("mlruns"))


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    ws = clone_as_committed(tmp_path_factory.mktemp("clone"))
    assert not (ws / ".dvc" / "cache").exists() and not (ws / "mlflow.db").exists()
    return ws


def test_first_command_parallel_sweep_on_a_new_store(clone):
    sh(
        [PY, "-m", "ragrig", "sweep", "--multirun", *TINY, "retrieve.ef_search=16,64"]
        + ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
        clone,
    )
    _assert_runs_with_artifacts(clone, _runs(clone), ["16", "64"])


def test_sweep_and_smoke_restore_from_the_run_cache(clone):
    before = len(_stage_runs(clone))
    # both points restore parse..index from the run-cache (what failed over a committed
    # dvc.lock), then retrieve and report
    sh([PY, "-m", "ragrig", "sweep", "--multirun", *TINY, "retrieve.ef_search=24,40"], clone)
    ran = _stage_runs(clone)[before:]
    assert ran.count("retrieve") == 2 and ran.count("report") == 2
    assert not {"parse", "chunk", "embed", "index"} & set(ran)
    before = len(_stage_runs(clone))
    proc = _make(clone, "smoke")  # `dvc exp run -S dataset=tiny -S generate=extractive`
    assert "Ran experiment" in proc.stdout + proc.stderr
    ran = _stage_runs(clone)[before:]
    assert "retrieve" in ran and "embed" not in ran
    runs = _runs(clone)
    assert sorted(runs["params.retrieve.ef_search"]) == ["128", "16", "24", "40", "64"]


def test_parallel_queue_on_a_new_store(clone):
    (clone / "mlflow.db").unlink()
    shutil.rmtree(clone / "mlartifacts")
    before = len(_stage_runs(clone))
    ef = "retrieve.ef_search=32,48"
    _make(clone, "queue", f"ARGS={' '.join(TINY)} {ef}", "JOBS=2")
    ran = _stage_runs(clone)[before:]
    assert ran.count("retrieve") == 2 and "embed" not in ran
    _assert_runs_with_artifacts(clone, _runs(clone), ["32", "48"])


def test_make_repro_returns_to_the_default_after_an_experiment(clone):
    # the copy's default becomes the tiny fixture, so that its `make repro` takes seconds
    config = clone / "conf" / "config.yaml"
    text = config.read_text().replace("dataset: scifact", "dataset: tiny")
    assert "  - generate: smollm2_torch\n" in text  # the committed default, replaced
    config.write_text(text.replace("  - generate: smollm2_torch\n", "  - generate: extractive\n"))
    _make(clone, "params")
    sh(["git", "commit", "-qam", "tiny default"], clone)
    _make(clone, "exp", "ARGS=-S retrieve.ef_search=16")
    assert yaml.safe_load((clone / "params.yaml").read_text())["retrieve"]["ef_search"] == 16
    _make(clone, "repro")
    assert yaml.safe_load((clone / "params.yaml").read_text())["retrieve"]["ef_search"] == 128
    sh([PY, "-m", "ragrig", "params", "check"], clone)
    lock = yaml.safe_load((clone / "dvc.lock").read_text())
    assert lock["stages"]["retrieve"]["params"]["params.yaml"]["retrieve"]["ef_search"] == 128
    assert "Data and pipelines are up to date" in sh(["dvc", "status"], clone).stdout


def test_committed_lock_whose_outputs_are_not_cached_is_refused_before_any_point(tmp_path):
    from ragrig.sweep import missing_lock_outputs

    ws = tmp_path / "ws"
    ws.mkdir()
    sh(["git", "init", "-q", "-b", "main"], ws)
    sh(["dvc", "init", "-q"], ws)
    stale = {"stages": {"chunk": {"outs": [{"path": "data/chunk", "md5": "0" * 32 + ".dir"}]}}}
    (ws / "dvc.lock").write_text(yaml.safe_dump(stale))
    sh(["git", "add", "-A"], ws)
    sh(["git", "commit", "-qm", "lock"], ws)
    assert missing_lock_outputs(ws) == ["data/chunk"]
    proc = sh([PY, "-m", "ragrig", "sweep", "prepare"], ws, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("ragrig sweep: error: the committed dvc.lock names outputs")
    assert "(data/chunk)" in proc.stderr and "git rm --cached dvc.lock" in proc.stderr
    sh(["git", "rm", "-q", "--cached", "dvc.lock"], ws)
    sh(["git", "commit", "-qm", "untrack"], ws)
    assert missing_lock_outputs(ws) == []
