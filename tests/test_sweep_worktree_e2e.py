"""`--executor worktree` on the tiny fixture through real DVC: long-lived workers, a git worktree
per slot, each point reproduced and saved as a DVC experiment in-process. A parallel sweep still
computes each stage configuration once, every point is an experiment `dvc exp show` lists, the
default executor run on the same points afterwards restores every stage and reads identical
metrics, and a failing point is reported while the others run."""

from __future__ import annotations

import collections
import subprocess
from pathlib import Path

import pytest

from .conftest import sh
from .test_sweep_e2e import BASE, GRID, _python, _ran, _runs, tiny_sweep_project
from .test_sweep_e2e import _sweep as sweep_in

pytestmark = [pytest.mark.e2e, pytest.mark.full]


def _sweep(ws: Path, name: str, *args: str, code: int = 0) -> tuple[str, list[dict]]:
    return sweep_in(ws, *args, code=code, name=name)


def _experiments(ws: Path) -> list[str]:
    refs = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname)", "refs/exps/"],
        cwd=ws,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [r.rsplit("/", 1)[-1] for r in refs if r.count("/") >= 4]


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    return tiny_sweep_project(tmp_path_factory.mktemp("sweep-wt") / "proj")


def test_worktree_sweep_is_lazy_saves_experiments_and_matches_temp(ws):
    # --alone none: the fixture's embeddings may run side by side, so both slots are used
    stdout, rows = _sweep(
        ws, "wt", "-j", "2", "--executor", "worktree", "--alone", "none", *BASE, *GRID
    )
    ran = _ran(ws, 0)
    assert {s: ran[s] for s in ("parse", "chunk", "embed", "index", "retrieve")} == {
        "parse": 1,
        "chunk": 2,
        "embed": 2,
        "index": 2,
        "retrieve": 4,
    }
    assert all(r["status"] == "ok" for r in rows), rows
    progress = [ln for ln in stdout.splitlines() if ln.startswith("[")]
    assert len(progress) == 4 and all("  ok  " in ln for ln in progress)
    # each point a DVC experiment of this commit, in the project's refs
    assert len(_experiments(ws)) == 4
    shown = sh(["dvc", "exp", "show", "--no-pager", "--csv"], ws).stdout
    assert sum(name in shown for name in _experiments(ws)) == 4
    slots = sorted(p.name for p in (ws / ".dvc/tmp/exps/standalone").glob("ragrig-slot-*"))
    assert slots == ["ragrig-slot-0", "ragrig-slot-1"]
    # one MLflow child per point under the sweep's parent
    (parent,) = [r for r in _runs(ws) if r.data.tags.get("ragrig.sweep") == "1"]
    children = [r for r in _runs(ws) if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(c.info.run_name for c in children) == sorted(r["point"] for r in rows)

    # the same points through `dvc exp run --temp`: nothing computed, the same metrics
    before = sum(1 for _ in (ws / ".ragrig" / "stage_log.jsonl").open())
    _, temp_rows = _sweep(ws, "temp", "--no-reuse", *BASE, *GRID)
    assert _ran(ws, before) == collections.Counter()
    assert [r["point"] for r in temp_rows] == [r["point"] for r in rows]
    for a, b in zip(rows, temp_rows, strict=True):
        assert a["metrics"] and a["metrics"] == b["metrics"], a["point"]
    assert len(_experiments(ws)) == 8

    # again through the workers: every stage restored or unchanged, the same metrics
    _, again = _sweep(ws, "wt2", "--no-reuse", "--executor", "worktree", *BASE, *GRID)
    assert _ran(ws, before) == collections.Counter()
    assert [r["metrics"] for r in again] == [r["metrics"] for r in rows]

    # rerun without --no-reuse: each point is an experiment of this commit, none runs again
    stdout, reused = _sweep(ws, "wt3", "--executor", "worktree", *BASE, *GRID)
    progress = [ln for ln in stdout.splitlines() if ln.startswith("[")]
    assert len(progress) == 4 and all("nothing to run" in ln for ln in progress)
    assert [r["metrics"] for r in reused] == [r["metrics"] for r in rows]


def test_worktree_failing_point_is_reported_and_the_other_runs(ws):
    stdout, rows = _sweep(
        ws,
        "wtfail",
        "--executor",
        "worktree",
        *BASE,
        "chunk.max_tokens=8",
        "retrieve.ef_search=16",
        "dataset.root=tests/fixtures/tiny_beir,/nonexistent/tiny",
        code=1,
    )
    assert [r["status"] for r in rows] == ["ok", "failed"]
    assert "parse" in rows[1]["error"]
    failed_line = next(ln for ln in stdout.splitlines() if "FAILED" in ln)
    log = Path(failed_line.split("(log: ", 1)[1].rstrip(")"))
    assert "/nonexistent/tiny" in log.read_text()
    (child,) = [
        r
        for r in _runs(ws)
        if r.info.status == "FAILED" and r.info.run_name == "dataset.root=/nonexistent/tiny"
    ]
    assert child.data.tags["ragrig.error"] == rows[1]["error"]


def test_worktree_refuses_uncommitted_tracked_changes(ws):
    readme = ws / "README.md"
    text = readme.read_text()
    readme.write_text(text + "\nchanged\n")
    try:
        proc = sh(
            [_python(), "-m", "ragrig", "sweep", "--executor", "worktree", *BASE],
            ws,
            check=False,
        )
        assert proc.returncode == 1
        assert "README.md" in proc.stderr and "uncommitted" in proc.stderr
    finally:
        readme.write_text(text)
