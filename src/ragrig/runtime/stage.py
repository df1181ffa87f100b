"""What every stage wrapper shares: argument parsing, runtime settings, error reporting, timing."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragrig.core.errors import RagrigError
from ragrig.core.paths import project_root

ENV_STAGE_LOG = "RAGRIG_STAGE_LOG"


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--params", default="params.yaml", type=Path)
    p.add_argument("--out", required=True, type=Path, help="the stage's output folder")
    p.add_argument("--inputs", nargs="*", type=Path, default=[], help="upstream stage folders")
    return p


def read_runtime(params: Path, key: str) -> Any:
    """One key of the `runtime` section, validated: a stage reads only the keys it declares.

    DVC reruns a stage when a parameter it lists in dvc.yaml changes, so each stage lists, and
    reads, exactly the runtime keys it uses (`runtime.threads`; `runtime.seed` only where
    randomness enters the output), never the whole section.
    """
    from ragrig.core.config import load_params, validate_section
    from ragrig.core.errors import ConfigError

    section = load_params(params).get("runtime") or {}
    if key not in section:
        raise ConfigError(f"{params} has no runtime.{key}")
    return getattr(validate_section("runtime", {key: section[key]}), key)


def read_system(params: Path, key: str) -> Any:
    """One key of the `system` section (the team's files), validated, like read_runtime: the
    run file is retrieve's dependency only, the answers file generate's."""
    from ragrig.core.config import load_params, validate_section
    from ragrig.core.errors import ConfigError

    section = load_params(params).get("system") or {}
    if key not in section:
        raise ConfigError(f"{params} has no system.{key}")
    return getattr(validate_section("system", {key: section[key]}), key)


def apply_threads(threads: int) -> None:
    """Thread counts of the numeric libraries (`runtime.threads`), set before any of them loads."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # A pool that loaded before this call (a stage forked by a warm server, ragrig.runtime.warm)
    # read its size from the environment of its time: set it now, as the variables would have.
    if "numpy" in sys.modules or "torch" in sys.modules:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def apply_torch_threads(threads: int) -> None:
    """For stages that run torch models: torch's own thread count."""
    import torch

    torch.set_num_threads(threads)


def apply_seed(seed: int) -> None:
    """Seed Python's and numpy's global generators (`runtime.seed`).

    Only a stage whose output depends on randomness calls this and declares `runtime.seed`;
    the others are deterministic without a seed, so changing it does not rerun them.
    """
    random.seed(seed)
    import numpy as np

    np.random.seed(seed)


def stage_log_path() -> Path:
    if os.environ.get(ENV_STAGE_LOG):
        return Path(os.environ[ENV_STAGE_LOG])
    return project_root(Path.cwd()) / ".ragrig" / "stage_log.jsonl"


def log_event(stage: str, seconds: float, status: str, **extra: object) -> None:
    """Append one line per stage execution (not a DVC output: a run-cache restore logs nothing)."""
    path = stage_log_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "stage": stage,
        "seconds": round(seconds, 3),
        "status": status,
        "time": time.time(),
        "cwd": str(Path.cwd()),
        **extra,
    }
    if getattr(sys, "_ragrig_warm_fork", False):
        record["warm"] = True  # run in a fork of a warm server (ragrig.runtime.warm)
    # the log is a convenience: a full disk must not hide the stage's own error behind this one
    with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")


def run(stage: str, main: Callable[[], None]) -> None:
    """Run a stage body: a RagrigError prints one clear line and exits 1; timing is logged."""
    t0 = time.perf_counter()
    try:
        main()
    except RagrigError as exc:
        log_event(stage, time.perf_counter() - t0, "failed", error=str(exc)[:500])
        print(f"ragrig {stage}: error: {exc}", file=sys.stderr)
        sys.exit(1)
    except Exception as exc:
        from ragrig.core.io import is_disk_full

        if isinstance(exc, OSError) and is_disk_full(exc):
            # a write outside the output helpers (which name their file): one line all the same
            where = f" while writing {exc.filename}" if exc.filename else ""
            log_event(stage, time.perf_counter() - t0, "failed", error=str(exc)[:500])
            print(f"ragrig {stage}: error: disk full{where}: {exc}", file=sys.stderr)
            sys.exit(1)
        log_event(stage, time.perf_counter() - t0, "crashed")
        traceback.print_exc()
        print(f"ragrig {stage}: crashed (traceback above)", file=sys.stderr)
        sys.exit(2)
    seconds = time.perf_counter() - t0
    log_event(stage, seconds, "ok")
    print(f"ragrig {stage}: done in {seconds:.1f} s")
