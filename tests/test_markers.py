"""The tiers: `make test` leaves out `full` and `slow`, `make test-all` adds `full`, `make
test-slow` runs `slow`; the default tier refuses a full test it was made to collect."""

from __future__ import annotations

import subprocess
import sys

from .conftest import PROJECT, project_env
from .schedule import LONGEST_FIRST, SHARED_RUN, unit_of

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
    proc = _collect("-m", "not slow", *FILES)
    modules = [line.split("::")[0] for line in proc.stdout.splitlines() if "::" in line]
    # the longest module first (tests/schedule.py), though named after test_scifact's
    assert modules[0] == "tests/test_fresh_clone.py" and set(modules) == {
        "tests/test_fresh_clone.py",
        "tests/test_markers.py",
    }
    assert _collected("-m", "slow") == {"tests/test_scifact.py"}  # make test-slow


def test_the_default_tier_refuses_a_full_test():
    proc = _collect("-m", "full", "tests/test_fresh_clone.py", tier="default")
    assert proc.returncode == 4  # pytest's usage error: nothing ran
    assert "the default tier collected" in proc.stderr and "marked full" in proc.stderr
    assert "run them with make test-all" in proc.stderr


def test_units_of_work_keep_the_shared_run_on_one_worker():
    for module in LONGEST_FIRST:
        assert module == SHARED_RUN or (PROJECT / module).is_file(), module
        assert unit_of(f"{module}::t") == module or module == SHARED_RUN, module
    for module in ("test_e2e", "test_canary_key", "test_runtime_params", "test_sweep_cluster_e2e"):
        assert unit_of(f"tests/{module}.py::test_x[a::b]") == SHARED_RUN
    assert unit_of("tests/test_markers.py::test_x") == "tests/test_markers.py"
    assert unit_of("tests/unit/test_embed.py::test_x[minilm]") == "tests/unit/test_embed.py"
