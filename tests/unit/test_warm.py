"""Warm stage processes (ragrig.runtime.warm): a stage wrapper hands itself to the server and
its fork runs it with the wrapper's arguments, folder, environment, streams and this checkout's
library; exit codes and signals come back; a killed wrapper takes its fork with it; a request
the server must not take (another environment, no server) runs in its own process."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..conftest import PROJECT, project_env, warm_server

# A stage wrapper's shape: _bootstrap first (the hand-off), then the body.
SCRIPT = """
import _bootstrap  # noqa: F401
import os, sys, time
import ragrig
print("argv", sys.argv[1:])
print("cwd", os.getcwd())
print("var", os.environ.get("PROBE_VAR"))
print("fork", getattr(sys, "_ragrig_warm_fork", False), os.getpid())
print("ragrig", ragrig.__file__)
print("path", sys.path[1:3])
print("to stderr", file=sys.stderr)
sys.stdout.flush()
if sys.argv[1:2] == ["sleep"]:
    import signal
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))  # the fork's own handler
    open(sys.argv[2], "w").write(str(os.getpid()))
    time.sleep(60)
sys.exit(int(sys.argv[1]) if sys.argv[1:2] and sys.argv[1].isdigit() else 0)
"""


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A checkout-like folder: stages/ with the real _bootstrap.py and the probe, src/ linked."""
    root = tmp_path_factory.mktemp("checkout")
    (root / "stages").mkdir()
    shutil.copy2(PROJECT / "stages" / "_bootstrap.py", root / "stages" / "_bootstrap.py")
    (root / "stages" / "probe.py").write_text(SCRIPT)
    (root / "src").symlink_to(PROJECT / "src")
    return root


@pytest.fixture(scope="module")
def server():
    with warm_server(("json",)) as sock:
        deadline = time.monotonic() + 60
        while not sock.exists():
            assert time.monotonic() < deadline, "the server did not listen within 60 s"
            time.sleep(0.05)
        yield sock


def _env(sock: Path | None, **extra: str) -> dict[str, str]:
    env = project_env(extra)
    env.pop("RAGRIG_WARM_SOCKET", None)
    if sock is not None:
        env["RAGRIG_WARM_SOCKET"] = str(sock)
    return env


def _run(checkout: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "stages/probe.py", *args],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _lines(out: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in out.splitlines())


def test_the_fork_runs_the_wrapper_with_its_arguments_folder_environment_and_streams(
    checkout, server
):
    # a variable read when used (MLflow's) is the request's own, not a reason to run cold
    proc = _run(
        checkout, _env(server, PROBE_VAR="x1", MLFLOW_TRACKING_URI="sqlite:///x"), "3", "--flag"
    )
    assert proc.returncode == 3, proc.stderr
    got = _lines(proc.stdout)
    assert got["argv"] == "['3', '--flag']"
    assert got["cwd"] == str(checkout)
    assert got["var"] == "x1"
    assert got["fork"].split()[0] == "True"
    # the library is this checkout's (the server's own ragrig modules were dropped)
    assert got["ragrig"] == str(checkout / "src" / "ragrig" / "__init__.py")
    assert proc.stderr == "to stderr\n"


def test_a_request_whose_environment_differs_runs_in_its_own_process(checkout, server):
    differs = _run(checkout, _env(server, PYTHONHASHSEED="7"), "0")
    # an instruction-set cap is read when torch / oneDNN / FAISS load: the server's were not
    capped = _run(checkout, _env(server, ONEDNN_MAX_CPU_ISA="AVX2"), "0")
    alone = _run(checkout, _env(None), "0")
    gone = _run(checkout, _env(checkout / "no-such.sock"), "0")
    for proc in (differs, capped, alone, gone):
        assert proc.returncode == 0, proc.stderr
        assert _lines(proc.stdout)["fork"].startswith("False")


def test_a_wrapper_run_in_process_by_other_code_is_not_handed_over(checkout, server):
    """runpy of a wrapper inside another program (a test, a driver of several stages): the
    stage runs in that program, which goes on after it."""
    code = (
        "import runpy, sys; sys.path.insert(0, 'stages'); sys.argv = ['stages/probe.py', '0']; "
        "runpy.run_path('stages/probe.py', run_name='__main__')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", f"{code}\nprint('after')"],
        cwd=checkout,
        env=_env(server),
        capture_output=True,
        text=True,
        timeout=60,
    )
    # the wrapper's sys.exit(0) ends the program here, in its own process: never in a fork
    assert proc.returncode == 0 and _lines(proc.stdout)["fork"].startswith("False"), proc.stderr


def test_pythonpath_is_the_requests_unless_it_shadows_a_loaded_module(checkout, server, tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    proc = _run(checkout, _env(server, PYTHONPATH=str(extra)), "0")
    got = _lines(proc.stdout)
    assert got["fork"].startswith("True"), proc.stderr
    # after the checkout's src/ (_bootstrap), the request's entry, as a new interpreter has it
    assert got["path"] == repr([str(checkout / "stages"), str(extra)])
    (extra / "json").mkdir()  # would shadow the server's json for a new interpreter
    proc = _run(checkout, _env(server, PYTHONPATH=str(extra)), "0")
    assert _lines(proc.stdout)["fork"].startswith("False"), proc.stderr


def test_signals_are_passed_on_and_a_killed_wrapper_takes_its_fork(checkout, server, tmp_path):
    # SIGTERM reaches the fork, whose handler exits 143; SIGKILL ends the wrapper and the fork
    for signum, expect in ((signal.SIGTERM, 143), (signal.SIGKILL, -signal.SIGKILL)):
        pidfile = tmp_path / f"pid{signum}"
        proc = subprocess.Popen(
            [sys.executable, "stages/probe.py", "sleep", str(pidfile)],
            cwd=checkout,
            env=_env(server),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while not (pidfile.exists() and pidfile.read_text()):
            assert time.monotonic() < deadline, "the fork never started"
            time.sleep(0.05)
        fork = int(pidfile.read_text())
        assert fork != proc.pid
        proc.send_signal(signum)
        assert proc.wait(30) == expect
        deadline = time.monotonic() + 10
        while _alive(fork):
            assert time.monotonic() < deadline, f"the fork outlived its wrapper ({signum})"
            time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # the process may end between the two calls: /proc/PID then says ESRCH or is gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_a_detached_server_serves_until_the_process_it_outlives_ends(checkout, tmp_path):
    # `make repro`'s form: started in the background, stopped by the end of make (here: sleep)
    import tempfile

    sock = Path(tempfile.mkdtemp(prefix="ragrig-warm-")) / "w.sock"  # a short path
    log = tmp_path / "warm.log"
    owner = subprocess.Popen(["sleep", "60"])
    try:
        cmd = [sys.executable, "-m", "ragrig", "warm", str(sock), "--detach"]
        cmd += ["--until", str(owner.pid), "--log", str(log), "--preload", "json"]
        started = subprocess.run(cmd, env=_env(None), capture_output=True, text=True, timeout=30)
        assert started.returncode == 0, started.stderr
        assert started.stdout.startswith("ragrig warm: loading the libraries in the background")
        deadline = time.monotonic() + 60
        while not sock.exists():
            assert time.monotonic() < deadline, "the detached server did not listen within 60 s"
            time.sleep(0.05)
        proc = _run(checkout, _env(sock), "0")
        assert _lines(proc.stdout)["fork"].startswith("True"), proc.stderr
        assert "libraries loaded in" in log.read_text()
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 10
    while sock.exists():
        assert time.monotonic() < deadline, "the server outlived the process it was to outlive"
        time.sleep(0.05)
    shutil.rmtree(sock.parent, ignore_errors=True)
