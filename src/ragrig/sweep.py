"""Sweeps through DVC experiments: a Hydra multirun, or DVC's experiment queue.

    python -m ragrig.sweep --multirun retrieve.ef_search=32,64,128 chunk=document,recursive
    python -m ragrig.sweep queue -j 2 retrieve.ef_search=32,64,128 chunk=document,recursive
    python -m ragrig.sweep prepare        # what both do first (also run by `make exp`)

Each multirun point becomes `dvc exp run --temp -S <override> ...`; `queue` queues every grid
point with `dvc exp run --queue`, starts `dvc queue start -j N` and waits for the points. Either
way stages whose command, code, inputs and params are unchanged are restored from DVC's run-cache
instead of being recomputed, and each point's report stage logs its own MLflow run into the
project's store.

Before any point starts, `prepare` validates the composed config, refuses a committed dvc.lock
whose directory outputs this clone's DVC cache does not hold (DVC then fails every experiment
that restores a stage from the run-cache), and creates the MLflow store and experiment once, so
parallel points never race on a new store's schema.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from ragrig.errors import RagrigError

CONF_DIR = str(Path.cwd() / "conf")
_PLAIN = re.compile(r"[A-Za-z0-9_./:+@-]*")


class SweepError(RagrigError):
    """A sweep cannot start or one of its points failed."""


def point_overrides(task_overrides: list[str], dataset_root: str, project: Path) -> list[str]:
    """The point's overrides, plus an absolute dataset root when the configured one is a relative
    path outside the project (a temporary experiment copy lives elsewhere)."""
    overrides = list(task_overrides)
    root = Path(dataset_root)
    if not root.is_absolute():
        resolved = (project / root).resolve()
        if not resolved.is_relative_to(project.resolve()):
            overrides.append(f"dataset.root={_quote(str(resolved))}")
    return overrides


def _quote(value: str) -> str:
    """A Hydra override value: as is when plain, else single-quoted."""
    if _PLAIN.fullmatch(value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def config_overrides(overrides: list[str]) -> list[str]:
    """The overrides that change the config (not Hydra's own `hydra/...` settings)."""
    return [o for o in overrides if not o.lstrip("+~").startswith("hydra")]


def grid(overrides: list[str]) -> list[list[str]]:
    """Every point of a sweep: the product of each override's values (`a=1,2 b=x,y` -> 4)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    choices = []
    for o in OverridesParser.create().parse_overrides(config_overrides(overrides)):
        if o.is_sweep_override():
            key = o.get_key_element()
            # each value comes back in override syntax (quoted when it needs to be)
            choices.append([f"{key}={v}" for v in o.sweep_string_iterator()])
        else:
            choices.append([o.input_line])
    return [list(p) for p in itertools.product(*choices)]


def compose_point(overrides: list[str]) -> dict:
    """Compose and validate one point's config exactly as `dvc exp run -S` will."""
    from ragrig.params import compose, validate_composition

    cfg = compose(CONF_DIR, overrides)
    validate_composition(cfg)
    return cfg


def missing_lock_outputs(project: Path) -> list[str]:
    """Directory outputs named by the committed dvc.lock whose `.dir` object is not in this
    clone's DVC cache.

    During an experiment DVC stages each stage's files; after a stage restored from the run-cache
    it looks its dependencies up in a data index still built from the committed dvc.lock, and a
    dependency inside a directory output whose `.dir` object is absent fails the experiment
    (`failed to load directory ('data', 'chunk')`), from the second sweep point on.
    """
    import yaml

    proc = subprocess.run(
        ["git", "show", "HEAD:dvc.lock"], cwd=project, capture_output=True, text=True
    )
    if proc.returncode != 0:
        return []  # dvc.lock not committed: nothing stale to look up
    lock = yaml.safe_load(proc.stdout) or {}
    dirs = [
        (out["path"], out["md5"])
        for stage in (lock.get("stages") or {}).values()
        for out in stage.get("outs") or []
        if str(out.get("md5", "")).endswith(".dir")
    ]
    if not dirs:
        return []
    from dvc.repo import Repo

    with Repo(str(project)) as repo:
        odb = repo.cache.local
        return [path for path, md5 in dirs if not os.path.exists(odb.oid_to_path(md5))]


def prepare(project: Path, overrides: list[str] | None = None) -> str | None:
    """Checks and set-up done once before any sweep point starts, for the sweep's first point
    (the MLflow settings of all points); return the tracking URI."""
    from ragrig.report.tracking import ensure_experiment, tracking_uri

    missing = missing_lock_outputs(project)
    if missing:
        raise SweepError(
            f"the committed dvc.lock names outputs this clone's DVC cache does not hold "
            f"({', '.join(missing)}); DVC would fail every experiment that restores a stage "
            "from the run-cache. Stop tracking it (`git rm --cached dvc.lock` and commit) or "
            "run `make repro` once to fill the cache"
        )
    cfg = compose_point(grid(overrides or [])[0])
    mlflow_cfg = cfg["report"]["mlflow"]
    if not mlflow_cfg.get("enabled", True):
        return None
    uri = tracking_uri(mlflow_cfg.get("tracking_uri"), project)
    ensure_experiment(uri, mlflow_cfg.get("experiment", "ragrig"))
    return uri


def _point_env(project: Path, uri: str | None) -> dict[str, str]:
    from ragrig.report.tracking import ENV_URI, tracking_uri
    from ragrig.stage import ENV_STAGE_LOG, stage_log_path

    env = dict(os.environ)
    env.setdefault(ENV_URI, uri or tracking_uri(None, project))
    env.setdefault(ENV_STAGE_LOG, str(stage_log_path()))
    return env


def run_point(overrides: list[str], project: Path) -> int:
    cmd = ["dvc", "exp", "run", "--temp"]
    for o in overrides:
        cmd += ["-S", o]
    print("sweep point:", " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=project, env=_point_env(project, None)).returncode


def _app() -> None:
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import DictConfig, OmegaConf

    @hydra.main(config_path=CONF_DIR, config_name="config", version_base=None)
    def point(cfg: DictConfig) -> int:
        from ragrig.params import validate_composition

        validate_composition(OmegaConf.to_container(cfg, resolve=True))  # fail before any compute
        project = Path(hydra.utils.get_original_cwd())
        overrides = point_overrides(
            list(HydraConfig.get().overrides.task), cfg.dataset.root, project
        )
        code = run_point(overrides, project)
        if code != 0:
            raise RuntimeError(f"sweep point {overrides} failed with exit code {code}")
        return code

    point()


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


def queue(project: Path, overrides: list[str], jobs: int, poll: float = 2.0) -> int:
    """Queue every grid point as a DVC experiment, run them `jobs` at a time, wait for all."""
    points = grid(overrides)
    queued: list[list[str]] = []
    for pt in points:  # every point validates before anything is queued
        cfg = compose_point(pt)
        queued.append(point_overrides(pt, cfg["dataset"]["root"], project))
    uri = prepare(project, points[0])
    env = _point_env(project, uri)
    names = []
    for pt in queued:
        cmd = ["dvc", "exp", "run", "--queue"] + [a for o in pt for a in ("-S", o)]
        proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True)
        found = re.search(r"Queued experiment '([^']+)'", proc.stdout + proc.stderr)
        if proc.returncode != 0 or not found:
            raise SweepError(f"{' '.join(cmd)} failed:\n{proc.stdout}{proc.stderr}")
        names.append(found.group(1))
        print(f"queued {found.group(1)}: {' '.join(pt)}", flush=True)
    subprocess.run(["dvc", "queue", "start", "-j", str(jobs)], cwd=project, env=env, check=True)
    idle_polls = 0
    while True:
        status, workers = _queue_status(project)
        pending = [n for n in names if status.get(n) not in {"Success", "Failed"}]
        if not pending:
            break
        idle_polls = idle_polls + 1 if workers == 0 else 0
        if idle_polls >= 15:  # no worker left for 15 polls while points are still pending
            raise SweepError(
                f"no DVC queue worker is running and {len(pending)} point(s) are not done "
                f"({', '.join(pending)}); see `dvc queue status` and `dvc queue start`"
            )
        time.sleep(poll)
    failed = [n for n in names if status[n] == "Failed"]
    for n in names:
        print(f"{n}: {status[n]}")
    if failed:
        print(f"{len(failed)} of {len(names)} points failed; see `dvc queue logs <name>`")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    project = Path.cwd()
    try:
        if args[:1] == ["queue"]:
            p = argparse.ArgumentParser(prog="python -m ragrig.sweep queue")
            p.add_argument("-j", "--jobs", type=int, default=1)
            p.add_argument("overrides", nargs="*")
            ns = p.parse_args(args[1:])
            return queue(project, ns.overrides, ns.jobs)
        if args[:1] == ["prepare"]:
            # accepts `dvc exp run` arguments as they are: the `-S k=v` overrides are checked
            uri = prepare(project, [a for a in args[1:] if "=" in a and not a.startswith("-")])
            print(f"ready: dvc.lock checked, MLflow store {uri or '(disabled)'}")
            return 0
        prepare(project, [a for a in args if "=" in a and not a.startswith("-")])
    except RagrigError as exc:
        print(f"ragrig sweep: error: {exc}", file=sys.stderr)
        return 1
    # Hydra's own outputs stay out of the project tree's tracked folders.
    if not any(a.startswith("hydra.sweep.dir=") for a in args):
        sys.argv.append("hydra.sweep.dir=.ragrig/multirun/${now:%Y-%m-%d_%H-%M-%S}")
    if not any(a.startswith("hydra.run.dir=") for a in args):
        sys.argv.append("hydra.run.dir=.ragrig/run/${now:%Y-%m-%d_%H-%M-%S}")
    _app()
    return 0


if __name__ == "__main__":
    sys.exit(main())
