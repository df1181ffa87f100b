"""Calls that a timeout can stop: an object living in a child process, each call bounded.

An in-process llama.cpp call cannot be interrupted from Python. `BoundedWorker` builds the object
(e.g. the GGUF judge model) in a child process and sends it one call at a time; a call that does
not answer within `timeout_s` raises TimeoutError and the child is killed, so the work really
stops. The next call starts a fresh child (the object is built again: a model load). An
exception inside the child comes back as WorkerError with its type and message; a child that
dies mid-call raises WorkerError too (counted by the caller, never a hang). A child whose
parent is gone (killed by SIGKILL, or by SIGTERM outside a stage) ends itself within a second.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from collections.abc import Callable
from typing import Any


class WorkerError(RuntimeError):
    """The call failed in the child process (its exception, or the child died)."""


def _orphaned_exit(parent: int, every_s: float = 0.5) -> None:
    """End this child once its parent is gone (killed by a signal it could not handle): a
    call in progress, e.g. a long llama.cpp generation, must not run on for nobody."""
    while True:
        time.sleep(every_s)
        if os.getppid() != parent:
            os._exit(1)


def _serve(
    factory: Callable[..., Any], args: tuple, method: str, conn: Any, parent: int | None = None
) -> None:
    if parent is not None:
        threading.Thread(target=_orphaned_exit, args=(parent,), daemon=True).start()
    try:
        target = factory(*args)
    except BaseException as exc:  # the build failed: report it on the first call
        conn.send(("build_error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", None))
    while True:
        try:
            call_args, call_kwargs = conn.recv()
        except EOFError:
            return
        try:
            conn.send(("ok", getattr(target, method)(*call_args, **call_kwargs)))
        except BaseException as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


class BoundedWorker:
    """`factory(*args)` built in a child process; `call(...)` runs `method` on it within
    `timeout_s` seconds (building included on a first call). `factory` must be importable by
    name (a module-level function or class): the child is started with `spawn`."""

    def __init__(
        self, factory: Callable[..., Any], args: tuple = (), method: str = "__call__",
        timeout_s: float = 60.0, build_timeout_s: float = 300.0,
    ):  # fmt: skip
        if timeout_s <= 0 or build_timeout_s <= 0:
            raise ValueError("timeouts must be positive")
        self.factory, self.args, self.method = factory, args, method
        self.timeout_s, self.build_timeout_s = timeout_s, build_timeout_s
        self._proc: Any = None
        self._conn: Any = None
        self.restarts = 0  # children killed after a timeout or a death
        self.cpu_s = 0.0  # CPU seconds the children spent in calls (killed calls included)

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=_serve,
            args=(self.factory, self.args, self.method, child, os.getpid()),
            daemon=True,
        )
        proc.start()
        child.close()
        self._proc, self._conn = proc, parent
        status, detail = self._receive(self.build_timeout_s, "building the worker")
        if status != "ready":
            self.close()
            raise WorkerError(f"building the worker failed: {detail}")

    def _receive(self, timeout_s: float, what: str, before_kill: float | None = None) -> tuple:
        try:
            ready = self._conn.poll(timeout_s)
        except (EOFError, OSError):
            ready = True
        if not ready:
            if before_kill is not None:  # the stopped call's CPU is counted too
                self.cpu_s += max(self._child_cpu() - before_kill, 0.0)
            self._kill()
            raise TimeoutError(f"{what}: no answer within {timeout_s:g} s (worker stopped)")
        try:
            return self._conn.recv()
        except (EOFError, OSError):
            code = None
            if self._proc is not None:
                self._proc.join(5)
                code = self._proc.exitcode
            self._kill()
            raise WorkerError(f"{what}: the worker process died (exit code {code})") from None

    def _child_cpu(self) -> float:
        import psutil

        try:
            t = psutil.Process(self._proc.pid).cpu_times()
        except (psutil.Error, AttributeError):
            return 0.0
        return t.user + t.system

    def call(self, *args: Any, **kwargs: Any) -> Any:
        if self._proc is None or not self._proc.is_alive():
            if self._proc is not None:
                self._kill()
            self._start()
        c0 = self._child_cpu()
        try:
            self._conn.send((args, kwargs))
        except (BrokenPipeError, OSError):
            self._kill()
            raise WorkerError("the worker process died before the call") from None
        status, value = self._receive(self.timeout_s, "call", before_kill=c0)
        self.cpu_s += max(self._child_cpu() - c0, 0.0)
        if status == "ok":
            return value
        raise WorkerError(value)

    def _kill(self) -> None:
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.kill()
            self._proc.join(5)
            self.restarts += 1
        self.close()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._proc is not None and self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(5)
        self._proc = self._conn = None

    def __enter__(self) -> BoundedWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
