"""The worktree executor's set-up: the slot's git worktree of HEAD sharing the project's DVC
cache, the refusal of uncommitted tracked changes, naming the experiment a rev is."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ragrig.sweep.grid import SweepError
from ragrig.sweep.inprocess import (
    check_clean,
    experiment_of,
    memoize_yaml_parsing,
    prepare_slot,
    slot_path,
)


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


# -- dvc.lock written once per point, exp save without the redundant commit ------------------

PIPELINE = """stages:
  one:
    cmd: python -c "open('a.txt', 'w').write(open('params.yaml').read().split(':')[1].strip())"
    params: [a]
    outs: [a.txt]
  two:
    cmd: python -c "open('b.txt', 'w').write(open('a.txt').read() * 2)"
    deps: [a.txt]
    outs: [b.txt]
  three:
    cmd: python -c "t = open('b.txt').read(); assert t != '99', t; open('c.txt', 'w').write(t + '!')"
    deps: [b.txt]
    outs: [c.txt]
"""


def _dvc(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    import sys

    return subprocess.run(
        [sys.executable, "-m", "dvc", *args], cwd=cwd, capture_output=True, text=True
    )


@pytest.fixture
def dvc_repo(tmp_path: Path, monkeypatch) -> Path:
    """A git + DVC project of three chained stages (`three` fails when `a` is 9), committed
    without a lock; the working directory is the project (DVC's API resolves against it)."""
    ws = tmp_path / "p"
    ws.mkdir()
    _git(ws, "init", "-q")
    _git(ws, "config", "user.name", "t")
    _git(ws, "config", "user.email", "t@x")
    assert _dvc(ws, "init", "-q").returncode == 0
    _dvc(ws, "config", "core.analytics", "false")
    (ws / "dvc.yaml").write_text(PIPELINE)
    (ws / "params.yaml").write_text("a: 1\n")
    _git(ws, "add", "-A")
    _git(ws, "commit", "-qm", "pipeline")
    monkeypatch.chdir(ws)
    return ws


def _reproduce(ws: Path) -> list:
    from dvc.repo import Repo

    from ragrig.sweep.inprocess import reproduce_batched

    with Repo(str(ws)) as repo:
        return [s.name for s in reproduce_batched(repo)]


def test_batched_reproduce_writes_dvcs_own_lock_in_one_write(dvc_repo, tmp_path, monkeypatch):
    import shutil

    from dvc.dvcfile import Lockfile

    # the lockfile plain `dvc repro` writes, in a copy of the same project
    twin = tmp_path / "twin"
    shutil.copytree(dvc_repo, twin)
    assert _dvc(twin, "repro", "-q").returncode == 0

    dumps: list = []
    monkeypatch.setattr(Lockfile, "dump_stages", lambda self, *a, **k: dumps.append(a))
    writes: list = []
    real_replace = os.replace
    monkeypatch.setattr(
        os,
        "replace",
        lambda a, b: (writes.append(b) if "lock" in str(b) else 0, real_replace(a, b)),
    )
    assert _reproduce(dvc_repo) == ["one", "two", "three"]
    assert dumps == []  # DVC's per-stage dump never ran
    assert writes == [str(dvc_repo / "dvc.lock")]  # one write for three stages
    assert (dvc_repo / "dvc.lock").read_text() == (twin / "dvc.lock").read_text()
    assert (dvc_repo / "c.txt").read_text() == "11!"
    assert "up to date" in _dvc(dvc_repo, "status").stdout
    assert not list(dvc_repo.glob("dvc.lock.*"))
    # nothing changed: nothing reproduced, nothing written
    writes.clear()
    assert _reproduce(dvc_repo) == []
    assert writes == []


def test_a_failing_stage_still_records_the_stages_finished_before_it(dvc_repo):
    from dvc.exceptions import ReproductionError
    from dvc.utils.serialize import load_yaml

    _reproduce(dvc_repo)
    (dvc_repo / "params.yaml").write_text("a: 9\n")
    with pytest.raises(ReproductionError, match="three"):
        _reproduce(dvc_repo)
    lock = load_yaml(dvc_repo / "dvc.lock")["stages"]
    assert lock["one"]["params"]["params.yaml"] == {"a": 9}
    assert [o["path"] for o in lock["two"]["outs"]] == ["b.txt"]
    status = _dvc(dvc_repo, "status", "--json").stdout
    assert '"one"' not in status and '"two"' not in status and '"three"' in status


def test_a_crash_while_writing_leaves_the_previous_complete_lock(dvc_repo, monkeypatch):
    import dvc.utils.serialize as ser

    _reproduce(dvc_repo)
    before = (dvc_repo / "dvc.lock").read_text()
    (dvc_repo / "params.yaml").write_text("a: 2\n")

    def half_then_crash(path, data, **kwargs):
        Path(path).write_text(before[: len(before) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(ser, "dump_yaml", half_then_crash)
    with pytest.raises(KeyboardInterrupt):
        _reproduce(dvc_repo)
    assert (dvc_repo / "dvc.lock").read_text() == before
    assert not list(dvc_repo.glob("dvc.lock.*"))
    monkeypatch.undo()
    monkeypatch.chdir(dvc_repo)
    # the stale entries are found changed and reproduced by the next point
    assert _reproduce(dvc_repo) == ["one", "two", "three"]
    assert (dvc_repo / "c.txt").read_text() == "22!"


def test_exp_save_without_recommit_is_a_real_experiment_dvc_commit_would_not_change(dvc_repo):
    import json

    from dvc.repo import Repo

    from ragrig.sweep.inprocess import lock_trusted

    original = Repo.commit
    (dvc_repo / "params.yaml").write_text("a: 3\n")
    with Repo(str(dvc_repo)) as repo:
        from ragrig.sweep.inprocess import reproduce_batched

        reproduce_batched(repo)
        with lock_trusted():
            assert Repo.commit is not original
            rev = repo.experiments.save()
    assert Repo.commit is original
    name = experiment_of(dvc_repo, rev)
    assert name
    lock = (dvc_repo / "dvc.lock").read_text()
    assert _git(dvc_repo, "show", f"{rev}:dvc.lock") + "\n" == lock
    # what DVC's own commit in exp save would have recorded: nothing to change
    assert _dvc(dvc_repo, "commit", "-f", "-q").returncode == 0
    assert (dvc_repo / "dvc.lock").read_text() == lock
    assert "up to date" in _dvc(dvc_repo, "status").stdout
    shown = json.loads(_dvc(dvc_repo, "exp", "show", "--json").stdout)
    exps = [e for base in shown for e in (base.get("experiments") or []) if e.get("name") == name]
    assert len(exps) == 1
    data = exps[0]["revs"][0]["data"]
    assert data["params"]["params.yaml"]["data"] == {"a": 3}


def test_yaml_memo_parses_each_text_once_and_hands_out_copies(monkeypatch):
    import dvc.parsing.interpolate as interpolate
    import dvc.utils.serialize as ser
    import dvc.utils.serialize._yaml as y
    import dvc.utils.strictyaml as strict

    calls = []
    original = y.parse_yaml

    def counting(text, path, typ="safe"):
        calls.append((typ, text))
        return original(text, path, typ)

    for module in (y, ser, strict):  # restored after the test
        monkeypatch.setattr(module, "parse_yaml", counting)
    monkeypatch.setattr(interpolate, "parse_expr", interpolate.parse_expr)
    memoize_yaml_parsing()
    memoize_yaml_parsing()  # idempotent: one memo
    assert y.parse_yaml is ser.parse_yaml is strict.parse_yaml is not counting
    text = "stages:\n  a:\n    cmd: echo ${x}\n    params: [p]\n"
    first = y.parse_yaml(text, "dvc.yaml")
    first["stages"]["a"]["cmd"] = "changed by DVC"
    again = strict.parse_yaml(text, "dvc.yaml")
    assert again == {"stages": {"a": {"cmd": "echo ${x}", "params": ["p"]}}}  # a copy
    assert calls == [("safe", text)]
    rt = y.parse_yaml_for_update(text, "dvc.lock")  # round-trip: parsed once more, as rt
    assert calls[-1] == ("rt", text) and type(rt).__name__ == "CommentedMap"
    assert y.parse_yaml_for_update(text, "dvc.lock") == rt and len(calls) == 2
    assert y.parse_yaml(text + "\n# edited\n", "dvc.yaml") == again and len(calls) == 3
    assert interpolate.parse_expr("a.b[0]") == "a.b.0" == interpolate.parse_expr("a.b[0]")
    assert interpolate.parse_expr.cache_info().hits >= 1
