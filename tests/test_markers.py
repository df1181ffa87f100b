"""The tiers: `make test` leaves out `full` and `slow`, `make test-all` adds `full`, `make
test-slow` runs `slow`; the default tier refuses a full test it was made to collect."""

from __future__ import annotations

import subprocess
import sys

from .conftest import PROJECT, project_env

FILES = ["tests/test_scifact.py", "tests/test_fresh_clone.py", "tests/test_markers.py"]


def _collect(*args: str, tier: str | None = None) -> subprocess.CompletedProcess:
    env = project_env({"RAGRIG_TIER": tier} if tier else None)
    if not tier:
        env.pop("RAGRIG_TIER", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
    )


def _collected(*args: str) -> set[str]:
    proc = _collect(*args, *FILES)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {line.split("::")[0] for line in proc.stdout.splitlines() if "::" in line}


def test_each_tier_collects_its_own_tests():
    default = _collected()  # make test (pyproject addopts: -m 'not slow and not full')
    assert default == {"tests/test_markers.py"}
    assert _collected("-m", "not slow") == {"tests/test_fresh_clone.py", "tests/test_markers.py"}
    assert _collected("-m", "slow") == {"tests/test_scifact.py"}  # make test-slow


def test_the_default_tier_refuses_a_full_test():
    proc = _collect("-m", "full", "tests/test_fresh_clone.py", tier="default")
    assert proc.returncode == 4  # pytest's usage error: nothing ran
    assert "the default tier collected" in proc.stderr and "marked full" in proc.stderr
    assert "run them with make test-all" in proc.stderr
