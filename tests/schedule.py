"""The order tests run in, and how pytest-xdist shares them among its workers.

- A test module is one unit of work, so its module-scoped fixture is built once.
- The modules that read the session's `tiny_run` fixture are one unit together, so that the
  one cold `dvc repro` of the fixture is built once per run, not once per worker.
- The longest modules start first (LONGEST_FIRST, from `--durations` of `make test-all`), so a
  run does not end with one worker in a long module while the other idles.
"""

from __future__ import annotations

import functools
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PROJECT = TESTS.parent
SHARED_RUN = "tiny_run"

# Longest first: order only, so a renamed module costs time, never a result (tests/test_markers.py
# checks that each entry exists and is a unit of its own).
LONGEST_FIRST = [
    "tests/test_benchmarks_smoke.py",
    SHARED_RUN,  # the fixture run, the end-to-end tests and the cluster sweeps on its copies
    "tests/test_sweep_e2e.py",
    "tests/test_sweep_worktree_e2e.py",
    "tests/test_remote_cache.py",
    "tests/test_fresh_clone.py",
    "tests/test_tracking_postgres.py",
    "tests/unit/test_embed_ray.py",
    "tests/unit/test_generate_torch.py",
    "tests/test_mlflow_ui_view.py",
    "tests/test_e2e_other_corpus.py",
]


@functools.cache
def uses_shared_run(module: str) -> bool:
    """Whether the test module `module` (a path relative to the project) reads tiny_run."""
    path = PROJECT / module
    return path.suffix == ".py" and "tiny_run" in path.read_text(encoding="utf-8")


def unit_of(nodeid: str) -> str:
    """The unit of work of a test: its module, or SHARED_RUN for the modules reading tiny_run."""
    module = nodeid.split("::", 1)[0]
    return SHARED_RUN if uses_shared_run(module) else module


def rank(nodeid: str) -> int:
    unit = unit_of(nodeid)
    return LONGEST_FIRST.index(unit) if unit in LONGEST_FIRST else len(LONGEST_FIRST)


def make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        """xdist's scope scheduling with unit_of as the scope, in collection order."""

        def __init__(self, config, log=None):
            super().__init__(config, log)
            config.option.loadscopereorder = False  # keep the LONGEST_FIRST order

        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return UnitScheduling(config, log)
