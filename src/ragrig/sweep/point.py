"""One sweep point, the bottom of the sweep: the point itself, its outcome, and its run as
`dvc exp run --temp -S ...` (with the shared run-cache's pull and push around it), and what its
finished experiment recorded. The executors (launchers, inprocess) and the engine above them
import from here, never the other way."""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Point:
    index: int
    overrides: list[str]
    label: str
    cfg: dict[str, Any]
    swept: dict[str, Any]  # swept key -> this point's value
    keys: dict[str, str]  # stage -> configuration key


@dataclass
class Outcome:
    ok: bool
    seconds: float
    error: str | None
    log: Path
    experiment: str | None = None
    reused: bool = False


def error_lines(log: Path, n: int = 3) -> str:
    """The failure as the point's log states it: its ERROR lines, else its last lines."""
    try:
        lines = [ln.rstrip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    errors = [ln for ln in lines if re.search(r"\bERROR\b|[Ee]rror:", ln)]
    return " | ".join((errors or lines)[-n:]) or "no output"


def run_point(point: Point, project: Path, env: dict[str, str], log: Path) -> Outcome:
    """One point as `dvc exp run --temp -S ...`, its output in `log`. With a shared run-cache
    (`storage=s3`, ragrig.storage.remote) the point pulls what it can restore first (`--pull`) and, only
    if it succeeds, pushes its experiment's stages after."""
    from ragrig.storage import remote as shared

    remote = shared.prepare_point(point.cfg, project, env)
    # parallel points take the repository's lock in turn (stash, set-up, collecting the
    # result); without --wait-for-lock DVC gives up after 3 s ("Unable to acquire lock")
    cmd = ["dvc", "--wait-for-lock", "exp", "run", "--temp", *shared.pull_args(remote)]
    cmd += [a for o in point.overrides for a in ("-S", o)]
    start = time.perf_counter()
    with open(log, "w", encoding="utf-8") as fh:
        fh.write("$ " + " ".join(cmd) + "\n")
        fh.flush()
        code = subprocess.run(
            cmd, cwd=project, env=env, stdout=fh, stderr=subprocess.STDOUT
        ).returncode
    if code == 0:
        pushed = shared.push_point(project, remote, experiment_name(log), log)
        seconds = time.perf_counter() - start
        return Outcome(pushed is None, seconds, pushed, log)
    seconds = time.perf_counter() - start
    return Outcome(False, seconds, f"exit code {code}: {error_lines(log)}", log)


_RAN = re.compile(r"Ran experiment\(s\): (\S+)")
METRICS_FILE = "reports/metrics.json"


def experiment_name(log: Path) -> str | None:
    """The DVC experiment a point's log names (`Ran experiment(s): <name>`)."""
    try:
        found = _RAN.findall(log.read_text(errors="replace"))
    except OSError:
        return None
    return found[-1] if found else None


def experiment_metrics(project: Path, name: str) -> dict[str, float]:
    """A finished experiment's metrics under their MLflow keys, read from the DVC cache entry
    its dvc.lock names for reports/metrics.json (also when the report stage was restored from
    the run-cache and logged no MLflow run)."""
    import json

    from ragrig.metrics.aggregate import flatten
    from ragrig.storage.remote import RemoteError, experiment_lock

    try:
        stages = experiment_lock(project, name).get("stages") or {}
    except RemoteError:  # no such experiment, or none with a dvc.lock
        return {}
    md5 = next(
        (
            o.get("md5")
            for st in stages.values()
            for o in st.get("outs") or []
            if o.get("path") == METRICS_FILE
        ),
        None,
    )
    if not md5:
        return {}
    path = project / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]
    if not path.is_file():
        return {}
    flat = flatten(json.loads(path.read_text(encoding="utf-8")))
    return {k: float(v) for k, v in flat.items() if isinstance(v, int | float)}
