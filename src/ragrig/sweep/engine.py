"""Running a sweep: validate every point, open the MLflow parent, run the points (in parallel
where they share no uncomputed stage), one progress line per point, the results table."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from ragrig.core.text import sample
from ragrig.sweep import launchers, results
from ragrig.sweep.grid import (
    SweepError,
    _key,
    compose_point,
    grid,
    group_options,
    label,
    swept_keys,
)
from ragrig.sweep.plan import ALONE_STAGES, Schedule, StageGraph, stage_keys
from ragrig.sweep.point import (
    Outcome,
    Point,
    error_lines,
    experiment_metrics,
    experiment_name,
    run_point,
)
from ragrig.sweep.prepare import check_lock_outputs, link_dataset_root

MAX_EXIT = 125


def _swept_value(cfg: dict[str, Any], key: str, override_value: str, conf: Path) -> Any:
    """The point's value of a swept key: a config group's option name, else the config's."""
    if group_options(key, conf) is not None:
        return override_value.strip("'\"")
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return override_value.strip("'\"")  # a config group: the option's name
        node = node[part]
    return node if isinstance(node, int | float | str | bool) or node is None else str(node)


def plan(project: Path, overrides: list[str]) -> tuple[list[Point], dict[str, list[str]]]:
    """Every point, composed and validated before anything runs."""
    conf = project / "conf"
    swept = swept_keys(overrides, conf)
    graph = StageGraph.from_dvc_yaml(project / "dvc.yaml")
    points = []
    for i, ovs in enumerate(grid(overrides, conf)):
        cfg = compose_point(ovs, conf)
        values = {
            _key(o): _swept_value(cfg, _key(o), o.split("=", 1)[1], conf)
            for o in ovs
            if _key(o) in swept
        }
        points.append(Point(i, ovs, label(ovs, swept), cfg, values, stage_keys(cfg, graph)))
    return points, swept


def _git(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=project, capture_output=True, text=True)


_HASHES: dict[Path, str] = {}
# what a DVC experiment commits on top of its baseline (anything else: uncommitted changes then)
_EXPERIMENT_FILES = {"params.yaml", "dvc.lock"}


def _stage_outs(project: Path) -> list[str]:
    """The output paths dvc.yaml declares."""
    import yaml

    stages = (yaml.safe_load((project / "dvc.yaml").read_text()) or {}).get("stages") or {}
    return [
        str(next(iter(o)) if isinstance(o, dict) else o).rstrip("/")
        for spec in stages.values()
        for o in spec.get("outs") or []
    ]


def _experiment_file(path: str, outs: list[str]) -> bool:
    """A file an experiment commits besides code: params.yaml and dvc.lock; `exp save` (the
    worktree executor) also force-adds the top-level metrics and plots inside stage outputs and
    its own `.dvc/tmp/repro.dat`."""
    return (
        path in _EXPERIMENT_FILES
        or path.startswith(".dvc/tmp/")
        or any(path == o or path.startswith(o + "/") for o in outs)
    )


def _outside_deps_unchanged(project: Path, lock: dict[str, Any]) -> bool:
    """Every dependency outside the repository (a dataset root such as ../shared/...) still has
    the hash the experiment's dvc.lock recorded (git covers everything inside)."""
    deps = [
        d
        for st in (lock.get("stages") or {}).values()
        for d in st.get("deps") or []
        if str(d.get("path", "")).startswith(("../", "/"))
    ]
    if not deps:
        return True
    from dvc.repo import Repo
    from dvc_data.hashfile.build import build

    paths = {(project / d["path"]).resolve() for d in deps}
    if any(not p.exists() for p in paths):
        return False
    todo = [p for p in paths if p not in _HASHES]
    if todo:
        with Repo(str(project)) as repo:
            for path in todo:
                _, _, obj = build(repo.cache.local, str(path), repo.fs, "md5", dry_run=True)
                _HASHES[path] = str(obj.hash_info.value)
    return all(_HASHES[(project / d["path"]).resolve()] == d.get("md5") for d in deps)


def existing_experiments(project: Path, points: list[Point]) -> dict[int, str]:
    """Points already run as a DVC experiment of this commit with exactly these params, whose
    every stage is therefore restored from the run-cache if run again: index -> experiment.

    Only with no uncommitted change to a tracked file (DVC would run the point with it), and
    only when every dependency outside the repository is unchanged."""
    import yaml

    head = _git(project, "rev-parse", "HEAD").stdout.strip()
    if not head or _git(project, "status", "--porcelain", "--untracked-files=no").stdout.strip():
        return {}
    refs = _git(
        project, "for-each-ref", "--format=%(refname)", f"refs/exps/{head[:2]}/{head[2:]}/"
    ).stdout.split()
    by_params: dict[str, tuple[str, str]] = {}
    for ref in refs:
        text = _git(project, "show", f"{ref}:params.yaml")
        if text.returncode == 0:
            key = json.dumps(yaml.safe_load(text.stdout), sort_keys=True, default=str)
            by_params.setdefault(key, (ref, ref.rsplit("/", 1)[-1]))
    found: dict[int, str] = {}
    outs = _stage_outs(project)
    for p in points:
        hit = by_params.get(json.dumps(p.cfg, sort_keys=True, default=str))
        if hit is None:
            continue
        lock = _git(project, "show", f"{hit[0]}:dvc.lock")
        changed = _git(project, "diff", "--name-only", "HEAD", hit[0]).stdout.split()
        if lock.returncode != 0 or [c for c in changed if not _experiment_file(c, outs)]:
            continue  # run from a workspace with other changes than its params: not this code
        parsed = yaml.safe_load(lock.stdout) or {}
        if "report" in (parsed.get("stages") or {}) and _outside_deps_unchanged(project, parsed):
            found[p.index] = hit[1]
    return found


class Progress:
    def __init__(self, total: int, stream: Any = None):
        self.total, self.done = total, 0
        self.stream = stream or sys.stdout
        self.lock = threading.Lock()

    def line(self, point: Point, outcome: Outcome) -> None:
        with self.lock:
            self.done += 1
            status = "ok" if outcome.ok else "FAILED"
            if outcome.reused:
                status = f"ok (experiment {outcome.experiment} of this commit, nothing to run)"
            text = f"[{self.done}/{self.total}] {point.label}  {status}  {outcome.seconds:.1f} s"
            if not outcome.ok:
                text += f"  (log: {outcome.log})"
            print(text, file=self.stream, flush=True)


def run_parallel(
    points: list[Point],
    jobs: int,
    run: Any,
    progress: Progress,
    alone: frozenset[str] = ALONE_STAGES,
) -> dict[int, Outcome]:
    """Run the points `jobs` at a time, never two that need the same uncomputed stage, and a
    point computing an `alone` stage by itself."""
    if not points:
        return {}
    schedule = Schedule([p.keys for p in points], alone)
    outcomes: dict[int, Outcome] = {}
    running: dict[Future, int] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        while schedule.pending or running:
            for i in schedule.ready(jobs - len(running)):
                running[pool.submit(run, points[i])] = i
            if not running:  # nothing can start and nothing runs: cannot happen, but never spin
                raise SweepError("sweep scheduler stalled")
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                i = running.pop(fut)
                try:
                    outcome = fut.result()
                except Exception as exc:  # the point's runner itself broke
                    outcome = Outcome(False, 0.0, f"{type(exc).__name__}: {exc}", Path("-"))
                outcomes[points[i].index] = outcome
                schedule.finish(i, outcome.ok)
                progress.line(points[i], outcome)
    return outcomes


_STATUS = re.compile(r"^\s*\S+\s+(\S+)\s+.*\s(Queued|Running|Success|Failed)\s*$")
_WORKERS = re.compile(r"Worker status: (\d+) active, (\d+) idle")


def _queue_status(project: Path) -> tuple[dict[str, str], int | None]:
    """Status of each queued experiment by name, and the number of live queue workers."""
    out = subprocess.run(
        ["dvc", "queue", "status"], cwd=project, capture_output=True, text=True
    ).stdout
    status = {m.group(1): m.group(2) for line in out.splitlines() if (m := _STATUS.match(line))}
    workers = _WORKERS.search(out)
    return status, (int(workers.group(1)) + int(workers.group(2)) if workers else None)


def run_queue(
    points: list[Point],
    jobs: int,
    project: Path,
    env: dict[str, str],
    logs: Path,
    progress: Progress,
    poll: float = 2.0,
    alone: frozenset[str] = ALONE_STAGES,
) -> dict[int, Outcome]:
    """Through DVC's experiment queue: batches of points that share no uncomputed stage, each
    batch queued, run `jobs` at a time by `dvc queue start -j`, and waited for."""
    from ragrig.storage import remote as shared

    outcomes: dict[int, Outcome] = {}
    if not points:
        return outcomes
    remote = shared.for_points([p.cfg for p in points])
    for batch in Schedule([p.keys for p in points], alone).batches(jobs):
        names: dict[str, int] = {}
        for i in batch:
            cmd = ["dvc", "--wait-for-lock", "exp", "run", "--queue", *shared.pull_args(remote)]
            cmd += [a for o in points[i].overrides for a in ("-S", o)]
            proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True)
            found = re.search(r"Queued experiment '([^']+)'", proc.stdout + proc.stderr)
            if proc.returncode != 0 or not found:
                raise SweepError(f"{' '.join(cmd)} failed:\n{proc.stdout}{proc.stderr}")
            names[found.group(1)] = i
        subprocess.run(
            ["dvc", "queue", "start", "-j", str(jobs)],
            cwd=project,
            env=env,
            check=True,
            capture_output=True,
        )
        t0 = time.perf_counter()
        idle_polls = 0
        while names.keys() - outcomes_names(outcomes, names):
            status, workers = _queue_status(project)
            for name, i in names.items():
                if i in outcomes or status.get(name) not in {"Success", "Failed"}:
                    continue
                log = logs / f"{points[i].index:03d}.log"
                text = subprocess.run(
                    ["dvc", "queue", "logs", name], cwd=project, capture_output=True, text=True
                )
                log.write_text(f"# dvc queue logs {name}\n{text.stdout}{text.stderr}")
                secs = time.perf_counter() - t0  # since its batch started
                ok = status[name] == "Success"
                error = None if ok else f"{name}: {error_lines(log)}"
                if ok and (error := shared.push_point(project, remote, name, log)) is not None:
                    ok = False
                outcomes[i] = Outcome(ok, secs, error, log, name)
                progress.line(points[i], outcomes[i])
            pending = [n for n, i in names.items() if i not in outcomes]
            if not pending:
                break
            idle_polls = idle_polls + 1 if workers == 0 else 0
            if idle_polls >= 15:  # no worker left for 15 polls while points are still pending
                raise SweepError(
                    f"no DVC queue worker is running and {len(pending)} point(s) are not done "
                    f"({sample(pending)}); see `dvc queue status` and `dvc queue start`"
                )
            time.sleep(poll)
    return {points[i].index: o for i, o in outcomes.items()}


def outcomes_names(outcomes: dict[int, Outcome], names: dict[str, int]) -> set[str]:
    return {n for n, i in names.items() if i in outcomes}


def base_env(project: Path, uri: str | None) -> dict[str, str]:
    from ragrig.runtime.stage import ENV_STAGE_LOG, stage_log_path
    from ragrig.tracking.run import ENV_URI, tracking_uri

    env = dict(os.environ)
    env.setdefault(ENV_URI, uri or tracking_uri(None, project))
    env.setdefault(ENV_STAGE_LOG, str(stage_log_path()))
    return env


def sweep(
    project: Path,
    overrides: list[str],
    jobs: int = 1,
    executor: str = "temp",
    sweep_dir: Path | None = None,
    stream: Any = None,
    reuse: bool = True,
    alone: frozenset[str] = ALONE_STAGES,
) -> int:
    """Run a sweep; return the number of failed points (the exit code, capped at 125)."""
    from ragrig.sweep.runs import ParentRun, now_ms, run_metrics
    from ragrig.tracking.run import configure

    stream = stream or sys.stdout
    sweep_dir = sweep_dir or project / ".ragrig" / "sweeps" / time.strftime("%Y-%m-%d_%H-%M-%S")
    cluster = None
    if launchers.requested(overrides):  # probed first: an unusable cluster fails in seconds
        if executor == "queue":
            raise SweepError("the DVC queue runs points on this machine: drop hydra/launcher=")
        cluster = launchers.ClusterLauncher.prepare(project, overrides, sweep_dir)
    if executor == "worktree":
        from ragrig.sweep.inprocess import check_clean

        if cluster is not None:
            raise SweepError(
                "--executor worktree runs points on this machine: drop hydra/launcher="
            )
        check_clean(project)
    check_lock_outputs(project)
    points, swept = plan(project, overrides)
    from ragrig.storage import remote as shared

    remote = shared.for_points([p.cfg for p in points])
    if remote is not None:  # one line naming the endpoint or bucket, before any point runs
        shared.ensure(project, remote, dict(os.environ))
    for root in dict.fromkeys(str(p.cfg["dataset"]["root"]) for p in points):
        link_dataset_root(project, root)
    logs = sweep_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    mlflow_cfg = points[0].cfg["report"]["mlflow"]
    parent = None
    uri = None
    if mlflow_cfg.get("enabled", True):
        # an unreachable store or refused credentials: one line, in seconds, before any point
        uri = configure(mlflow_cfg, project)
        parent = ParentRun.open(
            uri,
            mlflow_cfg.get("experiment", "ragrig"),
            swept,
            [p.cfg for p in points],
            artifacts=mlflow_cfg.get("artifact_location"),
        )
    env = base_env(project, uri)
    since = now_ms()
    print(
        f"sweep: {len(points)} point(s), "
        + (f"on {cluster.describe()}" if cluster else f"{jobs} at a time")
        + f"; logs in {logs}"
        + (f"; MLflow parent run {parent.run_id}" if parent else ""),
        file=stream,
        flush=True,
    )
    progress = Progress(len(points), stream)

    workers = None
    if executor == "worktree":
        if remote is not None:
            raise SweepError("--executor worktree does not pull or push a shared run-cache")
        from ragrig.sweep.inprocess import WorkerPool

        workers = WorkerPool(project, max(1, jobs))

    def one(point: Point) -> Outcome:
        point_env = {**env, **(parent.env(point.label) if parent else {})}
        log = logs / f"{point.index:03d}.log"
        if workers is not None:
            return workers.run(point, point_env, log)
        return run_point(point, project, point_env, log)

    done = existing_experiments(project, points) if reuse else {}
    outcomes = {
        i: Outcome(True, 0.0, None, logs / f"{i:03d}.log", name, reused=True)
        for i, name in done.items()
    }
    for i, name in done.items():
        if (error := shared.push_point(project, remote, name, outcomes[i].log)) is not None:
            outcomes[i] = Outcome(False, 0.0, error, outcomes[i].log, name)
        progress.line(points[i], outcomes[i])
    todo = [p for p in points if p.index not in done]
    try:
        if executor == "queue":
            queue_env = {**env, **(parent.env("") if parent else {})}
            queue_env.pop("RAGRIG_SWEEP_POINT", None)
            outcomes |= run_queue(todo, jobs, project, queue_env, logs, progress, alone=alone)
        elif cluster is not None:
            envs = {p.index: {**env, **(parent.env(p.label) if parent else {})} for p in todo}
            outcomes |= cluster.run(todo, envs, logs, progress)
        else:
            outcomes |= run_parallel(todo, jobs, one, progress, alone)
    except BaseException:
        if parent:
            parent.close(len(points), len(points))
        raise
    finally:
        if workers is not None:
            workers.close()

    rows = []
    for p in points:
        o = outcomes[p.index]
        metrics: dict[str, float] = {}
        if o.ok:
            name = o.experiment or experiment_name(o.log)
            metrics = experiment_metrics(project, name) if name else {}
        if parent is not None and o.ok:
            from ragrig.tracking.contents import params_hash

            run = parent.child(p.label, params_hash(p.cfg), since)
            metrics = metrics or run_metrics(run)
        elif parent is not None and not parent.has_child(p.label, since):
            parent.failed_child(p.label, {k: str(v) for k, v in p.swept.items()}, o.error or "")
        rows.append(
            results.row(p.label, p.swept, metrics, "ok" if o.ok else "failed", o.error, o.seconds)
        )
    n_failed = sum(r["status"] != "ok" for r in rows)
    if parent:
        parent.close(n_failed, len(points))
    rows_path = results.write_rows(rows, sweep_dir)
    results.write_sweep_page(rows, sweep_dir)
    print("", file=stream)
    print(results.table(rows), file=stream)
    print(f"rows: {rows_path}", file=stream, flush=True)
    return min(n_failed, MAX_EXIT)
