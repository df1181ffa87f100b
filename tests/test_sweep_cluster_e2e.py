"""Sweep points on a cluster through Hydra's launcher plugins, on copies of the session's fixture
run (tiny_run) with real DVC:
the Ray launcher on a 2-CPU Ray cluster (`ray start --head`, stopped by its process id) and
submitit's local executor give each point the metrics the sequential sweep gives it, computing
each stage configuration once; an unreachable Ray address or a missing `sbatch` fails in seconds
before any point runs; a worker killed mid-point is a failed point, the other point still runs."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import BIN, TINY, copy_run, project_env, sh

pytestmark = [pytest.mark.e2e, pytest.mark.full]

BASE = TINY
# two points that differ from retrieve on, in copies of the session's fixture run (tiny_run):
# parse..index are restored from its run-cache, retrieve runs once per point on each launcher
# (test_sweep_e2e sweeps a chunk size through the same engine)
# (values no other test of the shared run's unit computes: its run-cache must not hold them)
GRID = ["retrieve.ef_search=20,36"]
# Ray's token authentication (on by default for `ray start`): a driver joining the cluster
# sends its token only in token mode. The cluster's own token (Ray's format, 32 random bytes in
# hex), given to the head and the drivers, so that nothing reads or writes ~/.ray/auth_token: on
# a new machine there is none, and `ray start` refuses to start without one
TOKEN = secrets.token_hex(32)
RAY_ENV = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN}
# timings and what is derived from them differ run to run; every other metric must not
TIMED = ("latency_ms/", "cost_usd_per_query/")


def quality(metrics: dict[str, float]) -> dict[str, float]:
    return {
        k: v
        for k, v in metrics.items()
        if not k.startswith(TIMED) and not k.endswith(("_ms", "cpu_s"))
    }


def _python() -> str:
    return str(BIN / "python")


def _ran(ws: Path, since: int = 0) -> collections.Counter:
    path = ws / ".ragrig" / "stage_log.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    entries = [json.loads(line) for line in lines if line.strip()][since:]
    return collections.Counter(e["stage"] for e in entries if e["status"] == "ok")


def _project(run: Path, root: Path) -> Path:
    """A copy of the session's fixture run (TINY, its DVC cache and run-cache), its stage log
    emptied: what ran in it is what this module ran."""
    ws = copy_run(run, root)
    (ws / ".ragrig" / "stage_log.jsonl").unlink(missing_ok=True)
    return ws


def _sweep(
    ws: Path, name: str, *args: str, code: int = 0, env: dict | None = None
) -> tuple[str, list[dict], float]:
    out = ws / ".ragrig" / name
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    cmd = [_python(), "-m", "ragrig", "sweep", "--sweep-dir", str(out), *args]
    proc = sh(cmd, ws, env=env, check=False)
    seconds = time.perf_counter() - t0
    assert proc.returncode == code, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads((out / "rows.json").read_text()) if (out / "rows.json").exists() else []
    return proc.stdout + proc.stderr, rows, seconds


# Ports a Ray head takes by default besides its own (dashboard 8265, agent 52365, client 10001,
# workers 10002-19999): a head given one of them as --port refuses to start.
RAY_DEFAULT_PORTS = {6379, 8265, 10001, 52365, *range(10002, 20000)}


def _free_port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in RAY_DEFAULT_PORTS:
            return port


@pytest.fixture(scope="module")
def sequential(tmp_path_factory, tiny_run) -> list[dict]:
    ws = _project(tiny_run, tmp_path_factory.mktemp("seq") / "proj")
    _, rows, _ = _sweep(ws, "seq", "-j", "1", *BASE, *GRID)
    assert [r["status"] for r in rows] == ["ok", "ok"]
    return rows


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    """A Ray head with 2 CPUs on this machine, in its own process group, ended by its id."""
    port = _free_port()
    temp = tmp_path_factory.mktemp("ray")
    cmd = [
        str(BIN / "ray"),
        "start",
        "--head",
        "--block",
        f"--port={port}",
        "--node-ip-address=127.0.0.1",
        "--num-cpus=2",
        "--object-store-memory=100000000",
        "--include-dashboard=false",
        "--disable-usage-stats",
        f"--temp-dir={temp}",
    ]
    log = open(temp / "head.log", "w")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen(
        cmd,
        env=project_env(RAY_ENV),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    address = f"127.0.0.1:{port}"
    deadline = time.time() + 120
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                with contextlib.suppress(ProcessLookupError):  # the head may have exited
                    os.killpg(proc.pid, signal.SIGKILL)
                pytest.fail(f"ray head did not start: {(temp / 'head.log').read_text()[-2000:]}")
            time.sleep(1)
    time.sleep(3)  # the raylet registers after the GCS listens
    try:
        yield address
    finally:
        # `--block` stops the processes it started on SIGTERM, but waits up to ~30 s for its
        # workers to exit; nothing of the cluster outlives the module, so the group is killed
        # after a few seconds
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def ray_ws(tmp_path_factory, tiny_run) -> Path:
    return _project(tiny_run, tmp_path_factory.mktemp("ray") / "proj")


def test_ray_launcher_matches_sequential_and_computes_each_stage_once(
    ray_ws, ray_cluster, sequential
):
    out, rows, _ = _sweep(
        ray_ws,
        "ray",
        "hydra/launcher=ray",
        f"hydra.launcher.ray.init.address={ray_cluster}",
        *BASE,
        *GRID,
        env=project_env(RAY_ENV),
    )
    assert f"on Ray ({ray_cluster})" in out
    assert [r["params"] for r in rows] == [r["params"] for r in sequential]
    assert all(r["status"] == "ok" for r in rows)
    for got, want in zip(rows, sequential, strict=True):
        assert 0.0 <= got["metrics"]["retrieval/ndcg_at_10"] <= 1.0
        assert quality(got["metrics"]) == quality(want["metrics"])
    ran = _ran(ray_ws)
    # parse..index restored from the fixture run's cache; retrieve once per point
    assert {s: ran[s] for s in ("parse", "chunk", "embed", "index", "retrieve", "report")} == {
        "parse": 0,
        "chunk": 0,
        "embed": 0,
        "index": 0,
        "retrieve": 2,
        "report": 2,
    }


def test_submitit_local_matches_sequential(tmp_path_factory, sequential, tiny_run):
    ws = _project(tiny_run, tmp_path_factory.mktemp("submitit") / "proj")
    out, rows, _ = _sweep(ws, "submitit", "hydra/launcher=submitit_local", *BASE, *GRID)
    assert "on submitit local" in out
    assert [r["params"] for r in rows] == [r["params"] for r in sequential]
    for got, want in zip(rows, sequential, strict=True):
        assert got["status"] == "ok"
        assert quality(got["metrics"]) == quality(want["metrics"])
    assert (ws / ".ragrig" / "submitit" / "jobs" / ".submitit").is_dir()  # submitit's own records
    assert (_ran(ws)["parse"], _ran(ws)["embed"], _ran(ws)["retrieve"]) == (0, 0, 2)


def test_unreachable_ray_address_fails_in_seconds_before_any_point(ray_ws):
    port = _free_port()  # nothing listens there
    before = sum(_ran(ray_ws).values())
    out, rows, seconds = _sweep(
        ray_ws,
        "bad",
        "hydra/launcher=ray",
        f"hydra.launcher.ray.init.address=127.0.0.1:{port}",
        *BASE,
        *GRID,
        code=1,
    )
    errors = [ln for ln in out.splitlines() if "error" in ln.lower()]
    assert errors == [
        f"ragrig sweep: error: Ray cluster at 127.0.0.1:{port} "
        f"(hydra.launcher.ray.init.address) is unreachable: Connection refused "
        f"(127.0.0.1:{port})"
    ]
    assert seconds < 30 and rows == [] and not (ray_ws / ".ragrig" / "bad" / "logs").exists()
    assert sum(_ran(ray_ws).values()) == before


def test_joining_without_the_token_says_so_before_any_point(ray_ws, ray_cluster):
    before = sum(_ran(ray_ws).values())
    out, rows, _ = _sweep(
        ray_ws,
        "noauth",
        "hydra/launcher=ray",
        f"hydra.launcher.ray.init.address={ray_cluster}",
        *BASE,
        *GRID,
        code=1,
        env=project_env({"RAY_AUTH_MODE": "disabled"}),
    )
    (line,) = [ln for ln in out.splitlines() if ln.startswith("ragrig sweep: error:")]
    assert line == (
        f"ragrig sweep: error: Ray cluster at {ray_cluster} (hydra.launcher.ray.init.address) "
        "refused the connection: token authentication failed (set RAY_AUTH_MODE=token and give "
        "the cluster's token in RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)"
    )
    assert TOKEN not in out
    assert rows == [] and sum(_ran(ray_ws).values()) == before


def test_missing_sbatch_fails_before_any_point(ray_ws):
    env = project_env({"PATH": str(BIN) + ":/usr/bin:/bin"})
    assert shutil.which("sbatch", path=env["PATH"]) is None
    proc = subprocess.run(
        [_python(), "-m", "ragrig", "sweep", "hydra/launcher=submitit_slurm", *BASE, *GRID],
        cwd=ray_ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "ragrig sweep: error: hydra/launcher=submitit_slurm needs SLURM's `sbatch` on PATH"
        )
    )


def test_killed_worker_is_a_failed_point_and_the_other_runs(ray_ws, ray_cluster):
    out_dir = ray_ws / ".ragrig" / "kill"
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = [
        _python(),
        "-m",
        "ragrig",
        "sweep",
        "--no-reuse",
        "--sweep-dir",
        str(out_dir),
        "hydra/launcher=ray",
        f"hydra.launcher.ray.init.address={ray_cluster}",
        *BASE,
        "retrieve.ef_search=28,44",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=ray_ws,
        env=project_env(RAY_ENV),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    alive = out_dir / "logs" / "000.alive"
    deadline = time.time() + 180
    while not alive.is_file():
        assert proc.poll() is None and time.time() < deadline, proc.stdout.read().decode()
        time.sleep(0.2)
    worker = json.loads(alive.read_text())["pid"]
    os.kill(worker, signal.SIGKILL)  # the Ray worker running point 0, mid-point
    stdout = proc.communicate(timeout=600)[0].decode()
    assert proc.returncode == 1, stdout[-3000:]
    rows = json.loads((out_dir / "rows.json").read_text())
    assert [r["status"] for r in rows] == ["failed", "ok"]
    assert rows[0]["error"].startswith(f"Ray ({ray_cluster}): WorkerCrashedError")
    assert rows[1]["metrics"]["retrieval/ndcg_at_10"] >= 0.0
    failed = next(ln for ln in stdout.splitlines() if "FAILED" in ln)
    assert failed.startswith("[") and "retrieve.ef_search=28" in failed
