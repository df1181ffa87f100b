"""What every stage wrapper shares: argument parsing, runtime settings, error reporting, timing."""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from ragrig.errors import RagrigError
from ragrig.paths import project_root

ENV_STAGE_LOG = "RAGRIG_STAGE_LOG"


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--params", default="params.yaml", type=Path)
    p.add_argument("--out", required=True, type=Path, help="the stage's output folder")
    p.add_argument("--inputs", nargs="*", type=Path, default=[], help="upstream stage folders")
    return p


def apply_runtime(seed: int, threads: int) -> None:
    """Seeds and thread counts, from config, applied before any model or index is loaded."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    random.seed(seed)
    import numpy as np

    np.random.seed(seed)


def apply_torch_runtime(seed: int, threads: int) -> None:
    """For stages that run torch models: seed and thread count of torch itself."""
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(threads)


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
    with open(path, "a", encoding="utf-8") as fh:
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
    except Exception:
        log_event(stage, time.perf_counter() - t0, "crashed")
        traceback.print_exc()
        print(f"ragrig {stage}: crashed (traceback above)", file=sys.stderr)
        sys.exit(2)
    seconds = time.perf_counter() - t0
    log_event(stage, seconds, "ok")
    print(f"ragrig {stage}: done in {seconds:.1f} s")
