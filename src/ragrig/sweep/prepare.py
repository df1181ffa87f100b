"""What a sweep checks and sets up once, before any point starts."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ragrig.core.text import counted
from ragrig.sweep.grid import SweepError, compose_point, grid

# Where DVC puts the temporary copy of a `dvc exp run --temp` point and of a queued experiment
# (dvc.repo.experiments: `<tmp_dir>/exps/standalone/tmpXXXX`, `<tmp_dir>/exps/tmpXXXX`).
EXP_PARENTS = (Path(".dvc/tmp/exps/standalone"), Path(".dvc/tmp/exps"))


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


def link_dataset_root(project: Path, root: str) -> list[Path]:
    """Make a relative dataset root outside the project resolve the same from DVC's temporary
    experiment copies as from the project, so a point keeps the configured `dataset.root`
    (its params, and the path of parse's data dependency, equal a plain run's).

    A copy lives at `<project>/<parent>/tmpXXXX`; `<copy>/../shared/x` is `<parent>/shared/x`.
    That path becomes a symlink to the real folder (under `.dvc/tmp`, which git ignores).
    Returns the links made or checked. An absolute root, or one inside the project (copied
    with the checkout), needs none.
    """
    path = Path(root)
    if path.is_absolute():
        return []
    target = (project / path).resolve()
    if target.is_relative_to(project.resolve()):
        return []
    links = []
    for parent in EXP_PARENTS:
        link = Path(os.path.normpath(project / parent / "tmpX" / path))
        if not link.is_relative_to(project / ".dvc" / "tmp"):
            raise SweepError(
                f"dataset.root {root!r} climbs above the project's .dvc/tmp from DVC's "
                "experiment copies; give it as an absolute path (-S dataset.root=/abs/path)"
            )
        if link.is_symlink() and Path(os.readlink(link)) == target:
            links.append(link)
            continue
        if link.is_symlink():
            link.unlink()
        elif link.exists():
            raise SweepError(f"{link} exists and is not the link to {target}; remove it")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target, target_is_directory=True)
        links.append(link)
    return links


def check_lock_outputs(project: Path) -> None:
    """Refuse a committed dvc.lock whose directory outputs this clone's DVC cache lacks."""
    missing = missing_lock_outputs(project)
    if missing:
        raise SweepError(
            f"the committed dvc.lock names outputs this clone's DVC cache does not hold "
            f"({counted(missing, 'output')}); DVC would fail every experiment that restores a stage "
            "from the run-cache. Stop tracking it (`git rm --cached dvc.lock` and commit) or "
            "run `make repro` once to fill the cache"
        )


def prepare(project: Path, overrides: list[str] | None = None) -> str | None:
    """Checks and set-up done once before any sweep point starts: the committed dvc.lock, every
    point's config, the dataset root links, the MLflow store and experiment (created once, so
    parallel points never race on a new store's schema). Returns the tracking URI."""
    from ragrig.tracking.run import configure, ensure_experiment

    points = grid(overrides or [])  # every override parsed (and refused) first: milliseconds
    check_lock_outputs(project)
    cfgs = [compose_point(p) for p in points]
    for root in dict.fromkeys(c["dataset"]["root"] for c in cfgs):
        link_dataset_root(project, str(root))
    mlflow_cfg = cfgs[0]["report"]["mlflow"]
    if not mlflow_cfg.get("enabled", True):
        return None
    uri = configure(mlflow_cfg, project)  # unreachable or refused: one line, in seconds
    ensure_experiment(
        uri, mlflow_cfg.get("experiment", "ragrig"), artifacts=mlflow_cfg.get("artifact_location")
    )
    return uri
