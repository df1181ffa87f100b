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
Within a point, dvc.lock is written once (`reproduce_batched`) and `exp save` does not commit
again what `reproduce` has just recorded (`lock_trusted`); see the notes above them.

The slot's worktree holds HEAD only: a sweep with uncommitted changes to tracked files (other
than params.yaml and dvc.lock) is refused, where `--temp` would run them.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ragrig.core.text import sample
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
            f"uncommitted changes: {sample(dirty)}; commit them or use the default "
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


# -- DVC's per-point work, cheaper --------------------------------------------------------------
#
# On the fixture a point restores or skips every stage, and most of its time went into dvc.lock:
# `repro` re-reads (ruamel's round-trip parser) and rewrites the whole lockfile after every stage
# it runs or restores (treeverse/dvc#10629, #10630), and `exp save` then re-hashes every stage's
# deps and outputs, re-saves each to the run-cache and rewrites the lockfile once more
# (`dvc commit --force`), to record what `repro` has just recorded. The two adjustments below
# apply in the worker process only, to its own worktree, which no other process writes.


def _write_lock(repo: Any, stages: list[Any]) -> None:
    """Record `stages` in their lockfile(s) in one write: what DVC's `Lockfile.dump_stages` writes
    (the same round-trip YAML, entries from `to_lockfile`), but into a temporary file beside it,
    flushed to disk, then renamed over the lockfile. A crash leaves the previous complete lockfile
    (its entries of the stages restored since are stale: the next point finds them changed and
    restores them again), never a half-written one (DVC's own dump truncates in place)."""
    from dvc.stage.serialize import to_lockfile
    from dvc.utils.serialize import dump_yaml, parse_yaml_for_update

    by_file: dict[str, tuple[Any, list[Any]]] = {}
    for stage in stages:
        lock = stage.dvcfile._lockfile
        by_file.setdefault(lock.path, (lock, []))[1].append(stage)
    for path, (lock, group) in by_file.items():
        data = {}
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fd:
                data = parse_yaml_for_update(fd.read(), path)
        if not data:
            data.update({"schema": "2.0"})
        data["stages"] = data.get("stages", {})
        modified = False
        for stage in group:
            entry = to_lockfile(stage)
            modified |= data["stages"].get(stage.name, {}) != entry[stage.name]
            data["stages"].update(entry)
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            dump_yaml(tmp, data)
            with open(tmp, "rb") as fd:
                os.fsync(fd.fileno())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        if modified:
            repo.scm_context.track_file(lock.relpath)


def reproduce_batched(repo: Any) -> list[Any]:
    """`repo.reproduce()` writing dvc.lock once, after the last stage, instead of after each.

    DVC's `reproduce` takes the per-stage step as `repro_fn`; ours is DVC's
    (`dvc.repo.reproduce._reproduce_stage`) without its `stage.dump()`, the stages it ran or
    restored being written together by `_write_lock`, still inside the repository lock. DVC
    writes after each stage so that parallel `repro`s in one workspace see finished stages; no
    other `repro` runs in a slot. If a stage fails, the stages finished before it are written
    all the same (as DVC would have), then the error goes on."""
    from dvc.repo import lock_repo

    done: list[Any] = []

    def repro_stage(stage: Any, **kwargs: Any) -> Any:
        ret = stage.reproduce(**kwargs)
        if ret and not kwargs.get("dry", False):
            done.append(ret)
        return ret

    with lock_repo(repo), repo.scm_context:
        try:
            return repo.reproduce(repro_fn=repro_stage)
        finally:
            if done:
                _write_lock(repo, done)


@contextmanager
def lock_trusted() -> Iterator[None]:
    """`exp save` without its `dvc commit --force` of every stage.

    `Executor.save` commits all stages (`repo.commit([], force=True)`: re-hash every dep and
    output, save each stage to the run-cache, rewrite the lockfile) before the git commit, since
    a workspace may have changed since its last `repro`. Right after `reproduce_batched` in the
    worker's own worktree it has not: every stage was either run or restored (hashed, in the
    cache and the run-cache, written to dvc.lock) or found unchanged against its dvc.lock entry
    (deps, params and outputs, outputs in the cache). So while this is active, a whole-pipeline
    commit returns the stages as dvc.lock records them (what it would have written), from which
    `exp save` derives the experiment's hash and name; anything else is DVC's own commit.
    tests/unit/test_sweep_inprocess.py checks that `dvc commit --force` after a point changes
    nothing."""
    from dvc.repo import Repo

    original = Repo.commit

    # Not re-locked as DVC's is (that would reset the index `exp save` has just loaded from
    # dvc.lock for its top-level metrics and plots, and load it again): the index is that one.
    def commit(self: Any, target: Any = None, *args: Any, **kwargs: Any) -> list[Any]:
        if not target and not args and kwargs.get("data_only"):
            # the stash's commit of data sources (`.dvc` files) before saving: nothing to do
            # when the pipeline has none (DVC would collect and filter every stage to find so)
            if not any(stage.is_data_source for stage in self.index.stages):
                return []
            return original(self, target, *args, **kwargs)
        if target or args or kwargs.get("with_deps"):
            return original(self, target, *args, **kwargs)
        return list(self.index.stages)

    Repo.commit = commit
    try:
        yield
    finally:
        Repo.commit = original


_YAML_MEMO_SIZE = 64


def memoize_yaml_parsing() -> None:
    """Parse each distinct YAML text once in this process: DVC's `parse_yaml` (safe and
    round-trip) returns a deep copy of the first parse of the same text and type; and each
    distinct `${...}` expression of dvc.yaml once.

    A point re-reads the same few files dozens of times (params.yaml once per params dependency
    of every stage, dvc.yaml and dvc.lock for each index DVC builds): on the fixture 63 parses of
    about 6 distinct texts, a third of a point's time in ruamel. Keyed by the text itself, a file
    that changes is parsed again; the copies keep DVC's in-place edits (of the lockfile's data)
    out of the memo. Idempotent; meant for the worker process, whose only job is its points."""
    import copy
    from collections import OrderedDict

    import dvc.utils.serialize as ser
    import dvc.utils.serialize._yaml as y
    import dvc.utils.strictyaml as strict

    if getattr(y.parse_yaml, "_ragrig_memo", False):
        return
    parse = y.parse_yaml
    memo: OrderedDict[tuple[str, str], Any] = OrderedDict()

    def parse_yaml(text: str, path: Any, typ: str = "safe") -> Any:
        key = (typ, text)
        if key in memo:
            memo.move_to_end(key)
        else:
            memo[key] = parse(text, path, typ)
            if len(memo) > _YAML_MEMO_SIZE:
                memo.popitem(last=False)
        return copy.deepcopy(memo[key])

    parse_yaml._ragrig_memo = True  # type: ignore[attr-defined]
    for module in (y, ser, strict):
        module.parse_yaml = parse_yaml
    # each `${...}` of dvc.yaml is parsed by pyparsing again whenever DVC loads the pipeline
    # (three times a point, ~1,700 expressions on the fixture): the parse of an expression is a
    # string that depends on the expression alone
    import functools

    import dvc.parsing.interpolate as interpolate

    interpolate.parse_expr = functools.lru_cache(maxsize=4096)(interpolate.parse_expr)


# -- the worker process ---------------------------------------------------------------------

_SLOT: Path | None = None


def _warm_up(slot: Path) -> None:
    """The worker's one-time start-up, before its first point: import DVC, compose the params once
    (nothing written), and load the slot's pipeline once (the modules DVC imports on first use: stage
    loading, outputs, the graph, git), as the slot's worktree is made here too. The points'
    seconds are then what each point costs; the sweep's wall time includes this once per slot."""
    import dvc.repo.experiments.executor.base  # noqa: F401
    import dvc.repo.reproduce  # noqa: F401
    import dvc.stage.cache  # noqa: F401
    import yaml
    from dvc.repo import Repo

    from ragrig.compose.params import compose_yaml, validate_composition

    memoize_yaml_parsing()
    # Hydra's first composition initialises it, the first validation imports the config models
    validate_composition(yaml.safe_load(compose_yaml(slot / "conf", [])))
    cwd = os.getcwd()
    os.chdir(slot)
    try:
        with Repo(str(slot)) as repo:
            repo.index.graph  # noqa: B018
            repo.scm.get_rev()
    finally:
        os.chdir(cwd)


def _init_worker(project: str, slots: Any) -> None:
    global _SLOT
    _SLOT = prepare_slot(Path(project), slots.get())
    _warm_up(_SLOT)


def run_in_slot(
    overrides: list[str], env: dict[str, str], log: str, slot: Path | None = None
) -> tuple[bool, float, str | None, str | None]:
    """One point in this process's slot: (ok, seconds, error, experiment name). Output (DVC's
    and the stages') goes to `log`."""
    from ragrig.compose.params import write_params

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

        memoize_yaml_parsing()
        marks = [("params", time.perf_counter(), time.process_time())]
        write_params(slot / "conf", slot / "params.yaml", overrides)
        with Repo(str(slot)) as repo:
            marks.append(("reproduce", time.perf_counter(), time.process_time()))
            reproduce_batched(repo)
            marks.append(("exp save", time.perf_counter(), time.process_time()))
            with lock_trusted():
                rev = repo.experiments.save()
        marks.append(("", time.perf_counter(), time.process_time()))
        name = experiment_of(slot, rev)
        spent = ", ".join(
            f"{a[0]} {b[1] - a[1]:.2f} s (CPU {b[2] - a[2]:.2f} s)"
            for a, b in zip(marks, marks[1:], strict=False)
        )
        print(f"# in-process DVC worker: {spent}", flush=True)
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
        from ragrig.sweep.point import Outcome

        ok, seconds, error, name = self.pool.submit(
            run_in_slot, list(point.overrides), env, str(log)
        ).result()
        return Outcome(ok, seconds, error, log, name)

    def close(self) -> None:
        self.pool.shutdown(wait=True)
