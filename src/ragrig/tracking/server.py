"""Start and stop an `mlflow server` over the project's tracking store, as one process group."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ragrig.core.errors import ServiceError
from ragrig.runtime.process import pid_alive


def _state_file(root: Path) -> Path:
    return root / ".ragrig" / "mlflow_server.json"


def start(
    root: Path,
    backend_uri: str,
    host: str = "127.0.0.1",
    port: int = 5000,
    timeout: float = 90.0,
    artifacts: str | None = None,
    env: dict[str, str] | None = None,
) -> dict:
    """Start the server in its own session (process group) and wait until its REST API answers.
    `artifacts`: where runs logged through it keep their artifacts (e.g. s3://bucket/prefix;
    default <root>/mlartifacts); `env`: added to its environment (PGPASSWORD, AWS_*,
    MLFLOW_S3_ENDPOINT_URL: credentials never go on its command line)."""
    import requests

    from ragrig.tracking.stores import sqlalchemy_uri

    backend_uri = sqlalchemy_uri(backend_uri)
    state = _state_file(root)
    if state.exists():
        info = json.loads(state.read_text())
        if pid_alive(info["pid"]):
            return info
        state.unlink()
    state.parent.mkdir(parents=True, exist_ok=True)
    _check_port_free(host, port)
    artifacts = artifacts or str(root / "mlartifacts")
    env = {**os.environ, **(env or {}), "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1"}
    with open(root / ".ragrig" / "mlflow_server.log", "ab") as log:  # the child keeps its own copy
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mlflow",
                "server",
                "--host",
                host,
                "--port",
                str(port),
                "--backend-store-uri",
                backend_uri,
                "--artifacts-destination",
                artifacts,
                "--workers",
                "1",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=root,
            env=env,
        )
    url = f"http://{host}:{port}"
    info = {"pid": proc.pid, "pgid": os.getpgid(proc.pid), "url": url, "backend_uri": backend_uri}
    log_path = root / ".ragrig" / "mlflow_server.log"
    state.write_text(json.dumps(info))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            state.unlink(missing_ok=True)
            raise ServiceError(f"mlflow server exited with code {proc.returncode}; see {log_path}")
        try:
            if requests.get(f"{url}/health", timeout=2).status_code == 200:
                return info
        except requests.RequestException:
            pass
        time.sleep(0.5)
    stop(root)
    raise ServiceError(f"mlflow server did not answer on {url} within {timeout:.0f} s")


def _check_port_free(host: str, port: int) -> None:
    """mlflow server exits quietly when its port is taken: say so before starting it.

    The probe binds with SO_REUSEADDR, as the server itself does: without it, the TIME_WAIT
    connections a just-stopped server leaves behind make a free port look taken for a minute.
    """
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ServiceError(
                f"port {port} on {host} is in use ({exc.strerror}); "
                f"choose another: make ui PORT=<port> (or ragrig ui start --port <port>)"
            ) from exc


def group_members(pgid: int) -> list[int]:
    """Live processes of a process group (also for checking that stop left nothing behind)."""
    import psutil

    members = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.info["pid"]) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                members.append(p.info["pid"])
        except (ProcessLookupError, psutil.Error, OSError):
            continue
    return members


def stop(root: Path, timeout: float = 20.0) -> int:
    """Stop the whole process group (the server spawns a dozen children); return how many
    processes were running. SIGTERM first, SIGKILL for any left after `timeout`."""
    state = _state_file(root)
    if not state.exists():
        return 0
    info = json.loads(state.read_text())
    pgid = info["pgid"]
    members = group_members(pgid)
    if members:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and group_members(pgid):
            time.sleep(0.2)
        if group_members(pgid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            time.sleep(0.5)
    with contextlib.suppress(ChildProcessError):  # reap our own child if this process started it
        os.waitpid(info["pid"], os.WNOHANG)
    state.unlink(missing_ok=True)
    return len(members)
