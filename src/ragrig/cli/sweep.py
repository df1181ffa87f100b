"""`python -m ragrig sweep`: the command line of a sweep."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ragrig.core.errors import RagrigError
from ragrig.sweep.grid import SweepError
from ragrig.sweep.plan import ALONE_STAGES, StageGraph


def _jobs_from_hydra(overrides: list[str]) -> int | None:
    """`hydra/launcher=joblib` runs points in parallel: `hydra.launcher.n_jobs` of them
    (joblib's default -1: one per core)."""
    if not any(o.replace(" ", "") == "hydra/launcher=joblib" for o in overrides):
        return None
    given = next((o for o in overrides if o.startswith("hydra.launcher.n_jobs=")), None)
    try:
        n = int(given.split("=", 1)[1]) if given else -1
    except ValueError:
        raise SweepError(f"override {given!r}: n_jobs is a whole number") from None
    return n if n > 0 else max(1, (os.cpu_count() or 1) + 1 + n)


def _stages(text: str, project: Path) -> frozenset[str]:
    """`--alone`: stage names of dvc.yaml, comma-separated, or `none`."""
    names = {t.strip() for t in text.split(",") if t.strip() and t.strip() != "none"}
    known = set(StageGraph.from_dvc_yaml(project / "dvc.yaml").params)
    if unknown := sorted(names - known):
        raise SweepError(f"--alone: unknown stage(s) {unknown}; dvc.yaml has {sorted(known)}")
    return frozenset(names)


def main(argv: list[str] | None = None) -> int:
    from ragrig.sweep.engine import sweep
    from ragrig.sweep.prepare import prepare
    from ragrig.tracking.stores import redact

    args = list(sys.argv[1:] if argv is None else argv)
    project = Path.cwd()
    try:
        if args[:1] == ["prepare"]:
            # accepts `dvc exp run` arguments as they are: the `-S k=v` overrides are checked
            uri = prepare(project, [a for a in args[1:] if "=" in a and not a.startswith("-")])
            shown = redact(uri) if uri else "(disabled)"
            print(f"ready: dvc.lock checked, MLflow store {shown}")
            return 0
        queue = args[:1] == ["queue"]
        p = argparse.ArgumentParser(
            prog="ragrig sweep" + (" queue" if queue else ""),
            description="Run every point of a Hydra override grid as a DVC experiment.",
        )
        p.add_argument("-j", "--jobs", type=int, default=None, help="points at a time")
        p.add_argument("-m", "--multirun", action="store_true", help="accepted, as Hydra's")
        p.add_argument("--sweep-dir", type=Path, default=None, help="logs and rows.json")
        p.add_argument(
            "--no-reuse",
            action="store_true",
            help="run a point even when an experiment of this commit has exactly its params",
        )
        if not queue:
            p.add_argument(
                "--executor",
                choices=["temp", "worktree"],
                default="temp",
                help="temp: each point a `dvc exp run --temp`; worktree: long-lived DVC "
                "workers, one git worktree per slot, each point `reproduce` + `exp save` "
                "in-process (ragrig.sweep.inprocess)",
            )
        p.add_argument(
            "--alone",
            default=",".join(sorted(ALONE_STAGES)),
            metavar="STAGES",
            help="comma-separated stages that use every core: a point that computes one of "
            "them runs by itself (default: %(default)s; 'none' for no such stage; add "
            "'generate' when sweeping a local LLM)",
        )
        p.add_argument("overrides", nargs="*")
        ns = p.parse_args(args[1:] if queue else args)
        sweep_dir = ns.sweep_dir
        for o in ns.overrides:
            if o.startswith("hydra.sweep.dir="):
                sweep_dir = Path(o.split("=", 1)[1])
        jobs = ns.jobs or _jobs_from_hydra(ns.overrides) or 1
        return sweep(
            project,
            ns.overrides,
            jobs=jobs,
            executor="queue" if queue else ns.executor,
            sweep_dir=sweep_dir,
            reuse=not ns.no_reuse,
            alone=_stages(ns.alone, project),
        )
    except RagrigError as exc:
        print(f"ragrig sweep: error: {exc}", file=sys.stderr)
        return 1
