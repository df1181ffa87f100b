"""`make test-slow` runs real tests, and the default `make test` leaves them out."""

from __future__ import annotations

import subprocess
import sys

from .conftest import PROJECT, project_env

FILES = ["tests/test_scifact.py", "tests/test_markers.py"]


def _collected(*args: str) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", *args, *FILES],
        cwd=PROJECT,
        env=project_env(),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {line.split("::")[0] for line in proc.stdout.splitlines() if "::" in line}


def test_slow_tests_exist_and_only_make_test_slow_runs_them():
    slow = _collected("-m", "slow")  # what `make test-slow` runs
    assert "tests/test_scifact.py" in slow
    default = _collected()  # what `make test` runs (pyproject addopts: -m 'not slow')
    assert "tests/test_scifact.py" not in default
    assert "tests/test_markers.py" in default
