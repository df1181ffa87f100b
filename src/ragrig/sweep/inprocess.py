"""Sweep points run by long-lived DVC workers (`--executor worktree`), without a new
`dvc exp run --temp` per point.

Each parallel slot is one worker process that keeps a git worktree of the project's HEAD at
`.dvc/tmp/exps/standalone/ragrig-slot-<n>` (beside DVC's own temporary experiment copies, so the
dataset-root links of `prepare.link_dataset_root` resolve the same) whose DVC cache is the
project's (`.dvc/config.local`: the same objects and the same run-cache). A point writes its
`params.yaml` with DVC's own Hydra composition (what `-S` writes), runs `Repo.reproduce()` in
the worker's process (stages unchanged since the slot's last point are skipped, others restored
from the run-cache or run), then `Repo.experiments.save()`: a DVC experiment of HEAD, listed by
`dvc exp show` in the project like a `--temp` one. The interpreter, DVC's imports and the
worktree stay from one point to the next; the stash and temporary copy of `--temp` are gone.

The slot's worktree holds HEAD only: a sweep with uncommitted changes to tracked files (other
than params.yaml and dvc.lock) is refused, where `--temp` would run them.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from ragrig.sweep.grid import SweepError
from ragrig.sweep.prepare import EXP_PARENTS

SLOT_PREFIX = "ragrig-slot-"
_ALLOWED_DIRTY = {"params.yaml", "dvc.lock"}


def _git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise SweepError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()}")
    return proc


def check_clean(project: Path) -> None:
    """Refuse uncommitted changes a slot's worktree of HEAD would not see."""
    status = _git(project, "status", "--porcelain", "--untracked-files=no").stdout
    dirty = sorted({ln[3:].strip() for ln in status.splitlines() if ln.strip()} - _ALLOWED_DIRTY)
    if dirty:
        raise SweepError(
            "--executor worktree runs the points on HEAD, and these tracked files have "
            f"uncommitted changes: {', '.join(dirty[:10])}; commit them or use the default "
            "executor (`dvc exp run --temp`)"
        )


def slot_path(project: Path, n: int) -> Path:
    return project / EXP_PARENTS[0] / f"{SLOT_PREFIX}{n}"


def prepare_slot(project: Path, n: int) -> Path:
    """The slot's worktree at HEAD (made once, then reset to HEAD), sharing the project's DVC
    cache; its outputs of the last point stay (unchanged stages are then skipped)."""
    project = project.resolve()
    path = slot_path(project, n)
    head = _git(project, "rev-parse", "HEAD").stdout.strip()
    if not (path / ".git").exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        _git(project, "worktree", "prune")
        _git(project, "worktree", "add", "--detach", "-f", str(path), head)
    else:
        _git(path, "checkout", "-q", "--detach", "-f", head)
        _git(path, "reset", "-q", "--hard", head)
    cache = project / ".dvc" / "cache"
    (path / ".dvc" / "config.local").write_text(f"[cache]\n    dir = {cache}\n", encoding="utf-8")
    return path


def experiment_of(project: Path, rev: str) -> str | None:
    """The name of the experiment whose ref points at `rev`."""
    refs = _git(
        project, "for-each-ref", "--points-at", rev, "--format=%(refname)", "refs/exps/"
    ).stdout.split()
    names = [r.rsplit("/", 1)[-1] for r in refs if r.count("/") >= 4]
    return names[0] if names else None


# -- the worker process ---------------------------------------------------------------------

_SLOT: Path | None = None


def _init_worker(project: str, slots: Any) -> None:
    global _SLOT
    _SLOT = prepare_slot(Path(project), slots.get())


def run_in_slot(
    overrides: list[str], env: dict[str, str], log: str, slot: Path | None = None
) -> tuple[bool, float, str | None, str | None]:
    """One point in this process's slot: (ok, seconds, error, experiment name). Output (DVC's
    and the stages') goes to `log`."""
    from ragrig.params import write_params

    slot = slot or _SLOT
    if slot is None:
        raise SweepError("run_in_slot outside a worker with a slot")
    start = time.perf_counter()
    cwd = os.getcwd()
    os.chdir(slot)  # DVC resolves the stages it collects against the working directory
    saved_env = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    saved = os.dup(1), os.dup(2)
    os.write(fd, f"# in-process DVC worker, {slot}: {' '.join(overrides)}\n".encode())
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    try:
        from dvc.repo import Repo

        write_params(slot / "conf", slot / "params.yaml", overrides)
        with Repo(str(slot)) as repo:
            repo.reproduce()
            rev = repo.experiments.save()
        name = experiment_of(slot, rev)
        print(f"Ran experiment(s): {name}", flush=True)
        return True, time.perf_counter() - start, None, name
    except Exception as exc:  # the point failed: its error, the sweep goes on
        traceback.print_exc()
        error = f"{type(exc).__name__}: {exc}"
        cause = exc.__cause__
        if cause is not None:
            error += f" ({type(cause).__name__}: {cause})"
        return False, time.perf_counter() - start, error, None
    finally:
        import sys

        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (*saved, fd):
            os.close(f)
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(cwd)


class WorkerPool:
    """`jobs` worker processes, each with its own slot (a process of its own: the stages a
    point runs inherit its environment, which carries the point's MLflow labels)."""

    def __init__(self, project: Path, jobs: int):
        check_clean(project)
        ctx = mp.get_context("spawn")
        slots = ctx.Manager().Queue()
        for n in range(jobs):
            slots.put(n)
        self._slots = slots
        self.pool = ProcessPoolExecutor(
            max_workers=jobs,
            mp_context=ctx,
            initializer=_init_worker,
            initargs=(str(project.resolve()), slots),
        )

    def run(self, point: Any, env: dict[str, str], log: Path) -> Any:
        from ragrig.sweep.engine import Outcome

        ok, seconds, error, name = self.pool.submit(
            run_in_slot, list(point.overrides), env, str(log)
        ).result()
        return Outcome(ok, seconds, error, log, name)

    def close(self) -> None:
        self.pool.shutdown(wait=True)
