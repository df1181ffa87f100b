"""The shared run-cache on S3 (ragrig.storage.remote) against an S3 emulator on 127.0.0.1: a sweep's
points push their stages; a fresh copy of the project pointed at the same remote reproduces a
point with `dvc exp run --pull` restoring every stage (embed and index not run); a failed point
pushes nothing; an unreachable endpoint, a missing bucket and refused credentials each fail
before any point runs with one line (the secret never printed)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.s3_emulator import free_port, running_s3, s3  # noqa: F401

from .conftest import copy_project, project_env, sh

pytestmark = [pytest.mark.e2e, pytest.mark.full]

BASE = ["dataset=tiny", "generate=extractive"]
PY = sys.executable


def _storage(s3, bucket: str) -> list[str]:  # noqa: F811
    return [
        "storage=s3",
        f"storage.remote.url=s3://{bucket}/cache",
        f"storage.remote.endpoint_url={s3.endpoint}",
    ]


def _stage_log(ws: Path) -> list[dict]:
    path = ws / ".ragrig" / "stage_log.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.strip()]


def _ran(ws: Path, since: int = 0) -> list[str]:
    return [e["stage"] for e in _stage_log(ws)[since:] if e["status"] == "ok"]


def _local_runs(ws: Path) -> set[str]:
    runs = ws / ".dvc" / "cache" / "runs"
    return {str(p.relative_to(runs.parent)) for p in runs.rglob("*") if p.is_file()}


def _exp_locks(ws: Path) -> dict[str, dict]:
    from ragrig.storage.remote import experiment_lock

    refs = sh(["git", "for-each-ref", "--format=%(refname)", "refs/exps/"], ws).stdout.split()
    return {r.rsplit("/", 1)[-1]: experiment_lock(ws, r.rsplit("/", 1)[-1]) for r in refs}


def _project(dest: Path) -> Path:
    ws = copy_project(dest)
    sh([PY, "-m", "ragrig", "init-dvc"], ws)
    sh([PY, "-m", "ragrig", "params", "write", *BASE], ws)
    sh(["git", "add", "-A"], ws)
    sh(["git", "commit", "-qm", "tiny params"], ws)
    return ws


def _sweep(ws: Path, env: dict, *args: str, sweep_dir: Path | None = None):
    out = sweep_dir or ws / ".ragrig" / "test-sweep"
    return sh([PY, "-m", "ragrig", "sweep", "--sweep-dir", str(out), *args], ws, env, check=False)


@pytest.fixture(scope="module")
def swept(tmp_path_factory, s3):  # noqa: F811
    """A 2-point sweep on the tiny fixture that pushed to bucket ragrig-shared."""
    ws = _project(tmp_path_factory.mktemp("remote") / "a")
    s3.bucket("ragrig-shared")
    env = project_env(s3.env)
    proc = _sweep(ws, env, *BASE, *_storage(s3, "ragrig-shared"), "retrieve.ef_search=16,64")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return ws


def test_sweep_pushes_each_points_stages_and_their_outputs(swept, s3):  # noqa: F811
    from ragrig.storage.remote import run_cache_entries

    keys = s3.keys("ragrig-shared", "cache/")
    remote_runs = {k.removeprefix("cache/") for k in keys if k.startswith("cache/runs/")}
    locks = _exp_locks(swept)
    assert len(locks) == 2
    expected = {
        f"runs/{key[:2]}/{key}/{value}"
        for lock in locks.values()
        for key, value in run_cache_entries(lock).values()
    }
    # every stage of both experiments, each distinct configuration once (parse..index shared)
    stages = {s for lock in locks.values() for s in lock["stages"]}
    assert {"parse", "chunk", "embed", "index", "retrieve", "report"} <= stages
    assert remote_runs == expected and len(expected) > len(stages)
    # every output the experiments name is in the remote (files/md5/<2>/<rest>)
    objs = {k.removeprefix("cache/files/md5/").replace("/", "") for k in keys if "/files/md5/" in k}
    for lock in locks.values():
        for entry in lock["stages"].values():
            for out in entry.get("outs", []):
                assert out["md5"] in objs, (out["path"], out["md5"])
    # the remote is in .dvc/config.local only, with no credential anywhere in the checkout's config
    local = (swept / ".dvc" / "config.local").read_text()
    assert "ragrig-shared/cache" in local and s3.endpoint in local
    config_text = local + (swept / ".dvc" / "config").read_text()
    assert s3.env["AWS_SECRET_ACCESS_KEY"] not in config_text
    assert s3.env["AWS_ACCESS_KEY_ID"] not in config_text
    for log in (swept / ".ragrig" / "test-sweep" / "logs").glob("*.log"):
        text = log.read_text()
        assert "exp run --temp --pull" in text and "ragrig remote: pushed experiment" in text


def test_fresh_copy_reproduces_a_point_from_the_remote_without_computing(
    swept,
    s3,  # noqa: F811
    tmp_path_factory,
):
    ws = _project(tmp_path_factory.mktemp("remote") / "b")
    assert not (ws / ".dvc" / "cache").exists()
    env = project_env(s3.env)
    proc = sh([PY, "-m", "ragrig", "remote", "setup", *_storage(s3, "ragrig-shared")], ws, env)
    assert "credentials from the environment" in proc.stdout
    start = time.perf_counter()
    # the point's overrides as the sweep gave them, less the storage ones (not stage params)
    point = [a for o in [*BASE, "retrieve.ef_search=16"] for a in ("-S", o)]
    proc = sh(["dvc", "exp", "run", "--pull", *point], ws, env)
    seconds = time.perf_counter() - start
    out = proc.stdout + proc.stderr
    # no stage ran: each was restored from the remote's run-cache
    assert _ran(ws) == []
    for stage in ("parse", "chunk", "embed", "index", "retrieve", "report"):
        assert f"Stage '{stage}' is cached - skipping run, checking out outputs" in out, stage
    # the 30 s target is benchmarks/bench_remote_cache.py's (on a loaded shared machine DVC's
    # experiment machinery alone takes 15-30 s); here only a bound far below recomputing
    assert seconds < 120, seconds
    # the very metrics file of the sweep's point (restored, so byte-identical)
    (lock,) = [
        lock
        for lock in _exp_locks(swept).values()
        if lock["stages"]["retrieve"]["params"]["params.yaml"]["retrieve"]["ef_search"] == 16
    ]
    want = next(o["md5"] for o in lock["stages"]["report"]["outs"] if o["path"] == "reports/run")
    mine = yaml.safe_load((ws / "dvc.lock").read_text())["stages"]["report"]["outs"]
    assert next(o["md5"] for o in mine if o["path"] == "reports/run") == want


def test_queue_points_pull_and_push_too(swept, s3):  # noqa: F811
    """`python -m ragrig sweep queue`: queued as `dvc exp run --queue --pull`, pushed on success."""
    before = set(s3.keys("ragrig-shared", "cache/runs/"))
    n0 = len(_stage_log(swept))
    out = swept / ".ragrig" / "queue-sweep"
    proc = sh(
        [PY, "-m", "ragrig", "sweep", "queue", "-j", "1", "--sweep-dir", str(out), *BASE]
        + [*_storage(s3, "ragrig-shared"), "retrieve.ef_search=24"],
        swept,
        project_env(s3.env),
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ran = _ran(swept, n0)
    assert "retrieve" in ran and "embed" not in ran and "index" not in ran
    (log,) = out.glob("logs/*.log")
    assert "ragrig remote: pushed experiment" in log.read_text()
    new = set(s3.keys("ragrig-shared", "cache/runs/")) - before
    assert new and len(new) <= len(ran)  # the stages this point computed, nothing else new


def test_failed_point_pushes_nothing(tmp_path_factory, s3):  # noqa: F811
    ws = _project(tmp_path_factory.mktemp("remote") / "c")
    s3.bucket("ragrig-failed")
    env = project_env(s3.env)
    # parse..retrieve run and are cached locally; rerank fails (no such model)
    proc = _sweep(
        ws,
        env,
        *BASE,
        *_storage(s3, "ragrig-failed"),
        "rerank=cross_encoder",
        "rerank.model=/nonexistent/cross-encoder",
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    ran = _ran(ws)
    assert {"parse", "chunk", "embed", "index", "retrieve"} <= set(ran) and "rerank" not in ran
    assert _local_runs(ws), "the completed stages are in the local run-cache"
    assert s3.keys("ragrig-failed") == []


@contextlib.contextmanager
def _s3_with_auth():
    """An emulator that checks credentials (moto: INITIAL_NO_AUTH_ACTION_COUNT=0): every key
    pair is unknown to it, so every request is refused as with wrong credentials."""
    with running_s3(env={"INITIAL_NO_AUTH_ACTION_COUNT": "0"}) as emulator:
        yield emulator.endpoint


@pytest.fixture(scope="module")
def bare(tmp_path_factory) -> Path:
    return _project(tmp_path_factory.mktemp("remote") / "d")


def _refused_before_any_point(bare: Path, env: dict, storage: list[str]) -> str:
    out = bare / ".ragrig" / "bad-sweep"
    start = time.perf_counter()
    proc = _sweep(bare, env, *BASE, *storage, "retrieve.ef_search=16,64", sweep_dir=out)
    seconds = time.perf_counter() - start
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ragrig sweep: error: "), proc.stderr
    assert proc.stdout == "" and not out.exists()  # no point ran, no log written
    assert seconds < 30, seconds  # config composition included; the check itself is one request
    return lines[0]


def test_unreachable_endpoint_fails_in_seconds_naming_it(bare, s3):  # noqa: F811
    from ragrig.storage.remote import RemoteConfig, RemoteError, preflight

    dead = f"http://127.0.0.1:{free_port()}"
    storage = ["storage=s3", "storage.remote.url=s3://anything/x"]
    line = _refused_before_any_point(
        bare, project_env(s3.env), [*storage, f"storage.remote.endpoint_url={dead}"]
    )
    assert f"S3 endpoint {dead} unreachable" in line
    start = time.perf_counter()
    with pytest.raises(RemoteError, match="unreachable"):
        preflight(RemoteConfig(url="s3://anything", endpoint_url=dead), s3.env)
    assert time.perf_counter() - start < 5


def test_missing_bucket_says_so(bare, s3):  # noqa: F811
    line = _refused_before_any_point(bare, project_env(s3.env), _storage(s3, "no-such-bucket"))
    assert f"S3 bucket 'no-such-bucket' does not exist at {s3.endpoint}" in line


def test_wrong_credentials_say_so_without_printing_them(bare):
    secret = "wrong-secret-9f3a7c"
    env = project_env(
        {
            "AWS_ACCESS_KEY_ID": "AKIAWRONGKEY000",
            "AWS_SECRET_ACCESS_KEY": secret,
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    )
    with _s3_with_auth() as endpoint:
        storage = [
            "storage=s3",
            "storage.remote.url=s3://ragrig-auth/cache",
            f"storage.remote.endpoint_url={endpoint}",
        ]
        line = _refused_before_any_point(bare, env, storage)
        assert "credentials refused" in line and endpoint in line
        assert "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY from the environment" in line
        check = sh([PY, "-m", "ragrig", "remote", "check", *storage], bare, env, check=False)
    for text in (line, check.stdout, check.stderr):
        assert secret not in text and "AKIAWRONGKEY000" not in text
    assert check.returncode == 1 and "credentials refused" in check.stderr


def test_killed_point_is_failed_and_pushes_nothing(tmp_path, monkeypatch):
    """A point whose `dvc exp run` is killed (SIGKILL) is a failed point; nothing is pushed."""
    from ragrig.storage import remote
    from ragrig.storage.remote import RemoteConfig
    from ragrig.sweep import point as sweep_point

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "dvc").write_text("#!/bin/sh\necho 'Stage parse ran'\nkill -9 $$\n")
    (fake / "dvc").chmod(0o755)
    pushed: list = []
    monkeypatch.setattr(remote, "ensure", lambda *a, **k: None)
    monkeypatch.setattr(remote, "push_experiment", lambda *a, **k: pushed.append(a))
    cfg = {"storage": {"remote": RemoteConfig(url="s3://b/c").model_dump()}}
    point = sweep_point.Point(0, ["retrieve.ef_search=16"], "p", cfg, {}, {})
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    outcome = sweep_point.run_point(point, tmp_path, env, tmp_path / "p.log")
    assert not outcome.ok and outcome.error.startswith(f"exit code {-signal.SIGKILL}")
    assert pushed == []
    assert "exp run --temp --pull -S retrieve.ef_search=16" in (tmp_path / "p.log").read_text()


def test_results_table_when_every_point_failed():
    from ragrig.sweep import results

    row = results.row("p", {"retrieve.ef_search": 16}, {}, "failed", "exit code 1: boom", 1.0)
    text = results.table([row])
    assert text.splitlines()[-2:] == ["failed points (1):", "  p: exit code 1: boom"]
