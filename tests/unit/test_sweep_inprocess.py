"""The worktree executor's set-up: the slot's git worktree of HEAD sharing the project's DVC
cache, the refusal of uncommitted tracked changes, naming the experiment a rev is."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ragrig.sweep.grid import SweepError
from ragrig.sweep.inprocess import check_clean, experiment_of, prepare_slot, slot_path


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@x", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    _git(tmp_path, "init", "-q")
    (tmp_path / ".dvc").mkdir()
    (tmp_path / ".dvc" / "config").write_text("[core]\n    analytics = false\n")
    (tmp_path / "params.yaml").write_text("a: 1\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "one")
    return tmp_path


def test_slot_is_a_worktree_of_head_with_the_projects_cache(repo):
    path = prepare_slot(repo, 1)
    assert path == slot_path(repo.resolve(), 1)
    assert path == repo.resolve() / ".dvc/tmp/exps/standalone/ragrig-slot-1"
    assert (path / "code.py").read_text() == "x = 1\n"
    assert _git(path, "rev-parse", "HEAD") == _git(repo, "rev-parse", "HEAD")
    assert (path / ".dvc" / "config.local").read_text() == (
        f"[cache]\n    dir = {repo.resolve() / '.dvc' / 'cache'}\n"
    )
    # a new commit and a dirty slot: prepared again, it is HEAD again; untracked outputs stay
    (repo / "code.py").write_text("x = 2\n")
    _git(repo, "commit", "-qam", "two")
    (path / "params.yaml").write_text("a: 7\n")
    (path / "out.bin").write_text("kept")
    assert prepare_slot(repo, 1) == path
    assert (path / "code.py").read_text() == "x = 2\n"
    assert (path / "params.yaml").read_text() == "a: 1\n"
    assert (path / "out.bin").read_text() == "kept"
    assert _git(path, "rev-parse", "HEAD") == _git(repo, "rev-parse", "HEAD")


def test_uncommitted_tracked_changes_are_refused_but_params_and_lock(repo):
    check_clean(repo)
    (repo / "params.yaml").write_text("a: 2\n")
    (repo / "untracked.txt").write_text("u")
    check_clean(repo)
    (repo / "code.py").write_text("x = 3\n")
    with pytest.raises(SweepError, match=r"uncommitted changes: code\.py;"):
        check_clean(repo)


def test_experiment_of_names_the_ref_pointing_at_a_rev(repo):
    head = _git(repo, "rev-parse", "HEAD")
    assert experiment_of(repo, head) is None
    _git(repo, "update-ref", f"refs/exps/{head[:2]}/{head[2:]}/tidy-name", head)
    _git(repo, "update-ref", "refs/exps/exec/EXEC_HEAD", head)
    assert experiment_of(repo, head) == "tidy-name"
