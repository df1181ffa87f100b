"""MLflow stores that misbehave: a read-only, locked or non-database sqlite store and a tracking
URI naming a plain file each fail in one line naming the store; a lock is waited for, bounded."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from ragrig.core.errors import ServiceError
from ragrig.tracking.run import configure, log_run


def _log(uri: str, folder: Path, lock_timeout_s: float = 30) -> str:
    art = folder / "metrics.json"
    art.write_text('{"m": 1.0}\n')
    return log_run(uri, "ragrig", {}, {"m": 1.0}, [art], folder, environ={},
                   lock_timeout_s=lock_timeout_s)  # fmt: skip


def _preflight(uri: str, folder: Path) -> None:
    configure({"tracking_uri": uri, "artifact_location": None, "s3_endpoint_url": None,
               "password_env": None, "connect_timeout_s": 2}, folder)  # fmt: skip


def _one_line(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert "\n" not in msg and "Traceback" not in msg
    return msg


@pytest.fixture
def store(tmp_path: Path) -> tuple[str, Path]:
    """A store holding one run."""
    db = tmp_path / "store" / "mlflow.db"
    uri = f"sqlite:///{db}"
    _log(uri, tmp_path)
    return uri, db


def test_read_only_store_is_named(store, tmp_path: Path) -> None:
    uri, db = store
    if os.geteuid() == 0:
        # root writes through file modes: open the same file read-only through SQLite's own
        # URI filename instead (what a read-only mount or another owner's 0444 file gives)
        uri = f"sqlite:///file:{db}?mode=ro&uri=true"
        undo = None
    else:
        db.chmod(0o444)
        db.parent.chmod(0o555)
        undo = lambda: (db.parent.chmod(0o755), db.chmod(0o644))  # noqa: E731
    try:
        for attempt in (lambda: _preflight(uri, tmp_path), lambda: _log(uri, tmp_path)):
            with pytest.raises(ServiceError) as exc:
                attempt()
            msg = _one_line(exc)
            assert msg.startswith("MLflow tracking store sqlite:///")
            assert f"{db} is read-only, so no run can be written" in msg
    finally:
        if undo is not None:
            undo()


def test_locked_store_is_waited_for_then_named(store, tmp_path: Path) -> None:
    uri, db = store
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")  # another process's write, kept open
    try:
        started = time.monotonic()
        with pytest.raises(ServiceError) as exc:
            _log(uri, tmp_path, lock_timeout_s=0.6)
        waited = time.monotonic() - started
        msg = _one_line(exc)
        assert msg.startswith(f"MLflow tracking store {uri}: the database is locked by another ")
        assert "stayed locked for 0.6 s (report.mlflow.lock_timeout_s)" in msg
        assert 0.6 <= waited < 5  # bounded: not MLflow's 20 s a statement
        # released within the bound: the run is logged after the wait
        threading.Timer(0.5, holder.rollback).start()
        started = time.monotonic()
        assert _log(uri, tmp_path, lock_timeout_s=10)
        assert 0.4 <= time.monotonic() - started < 10
    finally:
        holder.close()


@pytest.mark.parametrize("spelling", ["sqlite", "path", "file"])
def test_tracking_uri_naming_a_text_file_is_named(spelling: str, tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n")
    uri = {"sqlite": f"sqlite:///{text}", "path": str(text), "file": text.as_uri()}[spelling]
    want = (
        f"{text} is not an SQLite database (another kind of file)"
        if spelling == "sqlite"
        else f"{text} is a file, not a tracking store"
    )
    for attempt in (lambda: _preflight(uri, tmp_path), lambda: _log(uri, tmp_path)):
        with pytest.raises(ServiceError) as exc:
            attempt()
        msg = _one_line(exc)
        assert msg.startswith(f"MLflow tracking store {uri}: ") and want in msg
    assert text.read_text() == "not a database\n"
