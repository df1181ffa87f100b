"""Sweep points on a cluster through Hydra's published launcher plugins.

    python -m ragrig sweep hydra/launcher=ray retrieve.ef_search=16,64        # a local Ray cluster
    python -m ragrig sweep hydra/launcher=ray hydra.launcher.ray.init.address=auto ...
    python -m ragrig sweep hydra/launcher=submitit_slurm hydra.launcher.partition=cpu ...

The launcher is Hydra's own (`hydra-ray-launcher`: each point a Ray task; `hydra-submitit-launcher`:
each point a SLURM job, or a local process with `submitit_local`), configured from
`conf/hydra/launcher/<name>.yaml` and `hydra.launcher.*` overrides, and called once per batch of
`Schedule.batches`: points of one batch need no common uncomputed stage, so a cluster computes
each stage configuration once, as one machine does. Each point's task runs `run_point`
(`dvc exp run --temp` in the project), so the workers need the project on a shared filesystem.

The task records its result in `<logs>/<index>.outcome.json` and beats `<index>.alive` while it
runs, so a point whose worker dies is reported as failed with the launcher's error while the
other points of its batch are waited for.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragrig.sweep.grid import SweepError

LAUNCHERS = ("ray", "submitit_local", "submitit_slurm")
LOCAL_OBJECT_STORE_BYTES = 100_000_000  # points return small records, not data
HEARTBEAT_S = 1.0
STALE_S = 10.0  # a point whose heartbeat is this old has lost its worker
# conf/hydra/launcher/<name>.yaml carries the plugin's config of the same name: Hydra validates
# it against that schema, and warns that it does
SCHEMA_WARNING = r"(?s).*validated against ConfigStore schema"


def requested(overrides: list[str]) -> str | None:
    """The cluster launcher `hydra/launcher=<name>` among the overrides names, if any."""
    for o in overrides:
        key, _, value = o.replace(" ", "").partition("=")
        if key == "hydra/launcher" and value in LAUNCHERS:
            return value
    return None


def launcher_overrides(overrides: list[str]) -> list[str]:
    """The overrides that configure the launcher (`hydra/launcher=`, `hydra.launcher.*`)."""
    return [
        o
        for o in overrides
        if o.replace(" ", "").startswith(("hydra/launcher=", "hydra.launcher."))
    ]


def compose(project: Path, overrides: list[str], sweep_dir: Path) -> tuple[Any, Any]:
    """Hydra's multirun configuration with the launcher chosen, and its config loader."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    conf = str((project / "conf").resolve())
    hydra_overrides = [
        *launcher_overrides(overrides),
        f"hydra.sweep.dir={sweep_dir.resolve()}",
        "hydra.output_subdir=null",  # the point's record is its DVC experiment and its log
        "hydra/job_logging=none",
        "hydra/hydra_logging=none",
    ]
    GlobalHydra.instance().clear()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=SCHEMA_WARNING)
        with initialize_config_dir(conf, version_base="1.3", job_name="ragrig_sweep"):
            loader = GlobalHydra.instance().config_loader()
            cfg = loader.load_configuration("config", hydra_overrides, RunMode.MULTIRUN)
    return cfg, loader


# -- probes: an unusable cluster fails before any point runs ---------------------------------


def probe_ray(address: Any) -> None:
    """Fail in seconds, naming the address, when the configured Ray cluster cannot be reached."""
    from ragrig.core.errors import ServiceError
    from ragrig.runtime.ray_probe import probe

    try:
        probe(address, "hydra.launcher.ray.init.address")
    except ServiceError as exc:
        raise SweepError(str(exc)) from None


def probe_slurm() -> None:
    if shutil.which("sbatch") is None:
        raise SweepError(
            "hydra/launcher=submitit_slurm needs SLURM's `sbatch` on PATH, and there is none "
            "on this machine (use hydra/launcher=submitit_local to run the points here)"
        )


# -- the task each point runs on a worker --------------------------------------------------


def _outcome_path(logs: Path, index: int) -> Path:
    return logs / f"{index:03d}.outcome.json"


def _alive_path(logs: Path, index: int) -> Path:
    return logs / f"{index:03d}.alive"


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


@dataclass
class PointTask:
    """Hydra's task function: the point its overrides name, run through `run_point`."""

    project: Path
    logs: Path
    points: dict[tuple[str, ...], Any]  # the point's overrides -> Point
    envs: dict[int, dict[str, str]]  # point index -> its environment

    def __call__(self, cfg: Any) -> Any:
        from hydra.core.hydra_config import HydraConfig

        from ragrig.sweep.point import run_point

        overrides = tuple(HydraConfig.get().overrides.task)
        point = self.points.get(overrides)
        if point is None:
            raise SweepError(f"the launcher ran overrides no point has: {list(overrides)}")
        alive = _alive_path(self.logs, point.index)
        _write_atomic(alive, json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(HEARTBEAT_S):
                try:
                    os.utime(alive)
                except OSError:
                    return

        threading.Thread(target=beat, daemon=True).start()
        try:
            log = self.logs / f"{point.index:03d}.log"
            outcome = run_point(point, self.project, self.envs[point.index], log)
            record = {**asdict(outcome), "log": str(outcome.log)}
            _write_atomic(_outcome_path(self.logs, point.index), json.dumps(record))
            return outcome
        finally:
            stop.set()


def _read_outcome(logs: Path, index: int) -> Any | None:
    from ragrig.sweep.point import Outcome

    path = _outcome_path(logs, index)
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return Outcome(**{**data, "log": Path(data["log"])})


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:400]}"


@dataclass
class ClusterLauncher:
    """Hydra's launcher plugin for a sweep, set up once, called once per batch."""

    name: str
    project: Path
    sweep_dir: Path
    cfg: Any
    loader: Any

    @classmethod
    def prepare(cls, project: Path, overrides: list[str], sweep_dir: Path) -> ClusterLauncher:
        """Compose the launcher's config and probe the cluster it names (before any point)."""
        name = requested(overrides)
        if name is None:
            raise SweepError(f"no cluster launcher among the overrides (one of {LAUNCHERS})")
        try:
            cfg, loader = compose(project, overrides, sweep_dir / "jobs")
        except Exception as exc:
            raise SweepError(f"hydra/launcher={name}: {_one_line(exc)}") from None
        cluster = cls(name, project, sweep_dir, cfg, loader)
        if name == "ray":
            probe_ray(cfg.hydra.launcher.ray.init.get("address"))
            cluster.connect()
        elif name == "submitit_slurm":
            probe_slurm()
        return cluster

    def connect(self) -> None:
        """Start or join the Ray cluster as the plugin would (`start_ray` with its config), so
        that a refused connection (e.g. token authentication) fails before any point runs."""
        from hydra_plugins.hydra_ray_launcher._launcher_util import start_ray
        from omegaconf import open_dict

        init = self.cfg.hydra.launcher.ray.init
        with open_dict(init):
            # the key stays (None) when connecting: else the plugin sets its own default,
            # which Ray refuses for an existing cluster (hydra#2893)
            init.setdefault("object_store_memory", None)
            local = init.get("address") in (None, "", "local")
            if local and init.object_store_memory is None:
                init.object_store_memory = LOCAL_OBJECT_STORE_BYTES
            # workers import ragrig as this process does (a cluster already running too)
            if os.environ.get("PYTHONPATH") and "runtime_env" not in init:
                init.runtime_env = {"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}}
        try:
            start_ray(init)
        except Exception as exc:
            raise SweepError(self._refused(exc)) from None

    def _refused(self, exc: BaseException) -> str:
        address = self.cfg.hydra.launcher.ray.init.get("address") or "a local cluster"
        chain, cause = [], exc
        while cause is not None:
            chain.append(cause)
            cause = cause.__cause__ or cause.__context__
        # Ray reports a refused token inside the text of the errors it raises from it
        if any(
            type(e).__name__ == "AuthenticationError"
            or "InvalidAuthToken" in str(e)
            or "AuthenticationError" in str(e)
            for e in chain
        ):
            return (
                f"Ray cluster at {address} (hydra.launcher.ray.init.address) refused the "
                "connection: token authentication failed (set RAY_AUTH_MODE=token and give the "
                "cluster's token in RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)"
            )
        return (
            f"Ray cluster at {address} (hydra.launcher.ray.init.address) could not be "
            f"joined: {_one_line(exc)}"
        )

    def describe(self) -> str:
        if self.name == "ray":
            address = self.cfg.hydra.launcher.ray.init.get("address") or "a local cluster"
            return f"Ray ({address})"
        return f"submitit {self.name.split('_', 1)[1]}"

    def _launcher(self, task: PointTask) -> Any:
        from hydra._internal.callbacks import Callbacks
        from hydra.core.hydra_config import HydraConfig
        from hydra.core.plugins import Plugins
        from hydra.core.utils import setup_globals
        from hydra.types import HydraContext

        setup_globals()
        HydraConfig.instance().set_config(self.cfg)
        return Plugins.instance().instantiate_launcher(
            hydra_context=HydraContext(config_loader=self.loader, callbacks=Callbacks(self.cfg)),
            task_function=task,
            config=self.cfg,
        )

    def run(
        self, points: list[Any], envs: dict[int, dict[str, str]], logs: Path, progress: Any
    ) -> dict[int, Any]:
        """Every point through the launcher, batch by batch; a point whose worker died or
        whose job failed is a failed point with that error."""
        from ragrig.sweep.plan import Schedule
        from ragrig.sweep.point import Outcome

        if not points:
            self.close()
            return {}
        task = PointTask(
            self.project.resolve(),
            logs.resolve(),
            {tuple(p.overrides): p for p in points},
            envs,
        )
        launcher = self._launcher(task)
        outcomes: dict[int, Any] = {}
        try:
            for batch in Schedule([p.keys for p in points]).batches(len(points)):
                chosen = [points[i] for i in batch]
                t0 = time.perf_counter()
                error: str | None = None
                returns: list[Any] = []
                try:
                    with warnings.catch_warnings():
                        warnings.filterwarnings("ignore", message=SCHEMA_WARNING)
                        returns = list(
                            launcher.launch([list(p.overrides) for p in chosen], chosen[0].index)
                        )
                except Exception as exc:  # a job or worker failed: the others may still run
                    error = _one_line(exc)
                    self._wait(chosen, logs)
                by_index = {}
                for p, ret in zip(chosen, returns, strict=False):
                    value = getattr(ret, "_return_value", None)
                    by_index[p.index] = value
                for p in chosen:
                    outcome = _read_outcome(logs, p.index)
                    if outcome is None:
                        value = by_index.get(p.index)
                        why = _one_line(value) if isinstance(value, BaseException) else error
                        outcome = Outcome(
                            False,
                            time.perf_counter() - t0,
                            f"{self.describe()}: {why or 'the point returned no outcome'}",
                            logs / f"{p.index:03d}.log",
                        )
                    outcomes[p.index] = outcome
                    progress.line(p, outcome)
        finally:
            self.close()
        return outcomes

    def _wait(self, chosen: list[Any], logs: Path, poll: float = 0.5) -> None:
        """After a failed launch, wait for the batch's points still running (their heartbeat is
        fresh) or not yet started while others run; a point whose heartbeat went stale lost its
        worker."""
        last_activity = time.time()
        while True:
            now = time.time()
            running = waiting = 0
            for p in chosen:
                if _outcome_path(logs, p.index).is_file():
                    continue
                alive = _alive_path(logs, p.index)
                if alive.is_file():
                    age = now - alive.stat().st_mtime
                    if age < STALE_S:
                        running += 1
                        last_activity = now
                else:
                    waiting += 1
            if running == 0 and (waiting == 0 or now - last_activity > STALE_S):
                return
            time.sleep(poll)

    def close(self) -> None:
        if self.name == "ray":
            import ray

            if ray.is_initialized():
                ray.shutdown()
