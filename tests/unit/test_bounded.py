"""ragrig.runtime.bounded: an object in a child process, each call bounded by a timeout that stops it."""

from __future__ import annotations

import importlib
import time

import pytest

from ragrig.runtime.bounded import BoundedWorker, WorkerError


def _module_worker(name: str, method: str, timeout_s: float = 10.0) -> BoundedWorker:
    # the child builds importlib.import_module(name) and calls its `method`
    return BoundedWorker(importlib.import_module, (name,), method=method, timeout_s=timeout_s)


def test_a_call_returns_its_value_and_counts_the_childs_cpu():
    with _module_worker("math", "factorial") as w:
        assert w.call(10) == 3628800
        assert w.call(5) == 120  # the same child serves the next call
        assert w.restarts == 0 and w.cpu_s >= 0.0


def test_a_call_past_the_timeout_is_stopped_and_the_next_call_starts_a_new_child():
    with _module_worker("time", "sleep", timeout_s=0.5) as w:
        t0 = time.perf_counter()
        with pytest.raises(TimeoutError, match=r"no answer within 0.5 s \(worker stopped\)"):
            w.call(30)
        assert time.perf_counter() - t0 < 10  # not the 30 s of the call
        assert w.restarts == 1 and w._proc is None  # the child was killed, not left running
        assert w.call(0.01) is None  # a fresh child answers
        assert w.restarts == 1


def test_an_exception_in_the_child_comes_back_with_its_type_and_the_child_stays():
    with _module_worker("time", "sleep") as w:
        with pytest.raises(WorkerError, match="ValueError: sleep length must be non-negative"):
            w.call(-1)
        pid = w._proc.pid
        assert w.call(0) is None and w._proc.pid == pid and w.restarts == 0


def test_a_child_that_dies_mid_call_is_an_error_not_a_hang():
    with _module_worker("os", "_exit") as w:
        with pytest.raises(WorkerError, match=r"the worker process died \(exit code 3\)"):
            w.call(3)
        assert w.restarts == 1


def test_a_failed_build_is_reported_on_the_call():
    w = _module_worker("no_such_module_for_ragrig", "anything")
    with pytest.raises(WorkerError, match="building the worker failed: ModuleNotFoundError"):
        w.call()
    assert w._proc is None


def test_timeouts_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        BoundedWorker(importlib.import_module, ("math",), timeout_s=0)


def test_a_child_whose_parent_is_killed_ends_itself(tmp_path):
    """A parent killed by SIGKILL mid-call (no cleanup runs): its child, busy in a 60 s call,
    sees it gone and exits within seconds instead of running on for nobody."""
    import os
    import signal
    import subprocess
    import sys

    script = tmp_path / "parent.py"
    script.write_text(
        "import importlib\n"
        "from ragrig.runtime.bounded import BoundedWorker\n"
        "if __name__ == '__main__':\n"
        "    w = BoundedWorker(importlib.import_module, ('time',), method='sleep', timeout_s=120)\n"
        "    w._start()\n"
        "    print(w._proc.pid, flush=True)\n"
        "    w.call(60)\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    time.sleep(1.5)  # the call sent: the child is asleep in it, not waiting for one
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)  # still there?
        except ProcessLookupError:
            break
        with open(f"/proc/{child}/stat") as fh:  # a zombie has exited too
            if fh.read().split(")")[1].split()[0] == "Z":
                break
        time.sleep(0.2)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the orphaned child was still running 10 s after its parent was killed")
