"""Cluster launchers of a sweep: which overrides choose one, the presets as Hydra composes them,
the probes that fail before any point runs, and how a failed launch becomes failed points."""

from __future__ import annotations

import io
import json
import socket
import time
from pathlib import Path

import pytest

from ragrig.runtime import ray_probe
from ragrig.runtime.ray_probe import PROBE_TIMEOUT_S
from ragrig.sweep import SweepError, launchers
from ragrig.sweep.engine import Progress
from ragrig.sweep.point import Outcome, Point

from ..conftest import PROJECT


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens


def test_requested_launcher_and_its_overrides():
    ovs = ["dataset=tiny", "hydra/launcher=ray", "hydra.launcher.ray.init.address=auto", "a=1"]
    assert launchers.requested(ovs) == "ray"
    assert launchers.launcher_overrides(ovs) == ovs[1:3]
    assert launchers.requested(["hydra/launcher=joblib", "a=1,2"]) is None
    assert launchers.requested(["hydra/launcher = submitit_slurm"]) == "submitit_slurm"


def test_presets_compose_onto_the_plugins_configs(tmp_path):
    cfg, _ = launchers.compose(PROJECT, ["hydra/launcher=ray"], tmp_path)
    ray = cfg.hydra.launcher
    assert ray._target_ == "hydra_plugins.hydra_ray_launcher.ray_launcher.RayLauncher"
    assert ray.ray.init.address is None and ray.ray.init.object_store_memory is None
    assert dict(ray.ray.remote) == {"num_cpus": 1, "max_retries": 0}
    assert cfg.hydra.sweep.dir == str(tmp_path.resolve())

    cfg, _ = launchers.compose(
        PROJECT, ["hydra/launcher=submitit_slurm", "hydra.launcher.partition=cpu"], tmp_path
    )
    slurm = cfg.hydra.launcher
    assert slurm._target_.endswith("submitit_launcher.SlurmLauncher")
    assert (slurm.partition, slurm.timeout_min, slurm.cpus_per_task, slurm.mem_gb) == (
        "cpu",
        120,
        2,
        8,
    )
    cfg, _ = launchers.compose(PROJECT, ["hydra/launcher=submitit_local"], tmp_path)
    assert cfg.hydra.launcher._target_.endswith("submitit_launcher.LocalLauncher")
    assert cfg.hydra.launcher.submitit_folder == f"{tmp_path.resolve()}/.submitit/%j"


def test_unreachable_ray_address_is_one_line_naming_it():
    port = _closed_port()
    t0 = time.perf_counter()
    with pytest.raises(SweepError) as err:
        launchers.probe_ray(f"127.0.0.1:{port}")
    assert time.perf_counter() - t0 < PROBE_TIMEOUT_S + 1
    assert str(err.value) == (
        f"Ray cluster at 127.0.0.1:{port} (hydra.launcher.ray.init.address) is unreachable: "
        f"Connection refused (127.0.0.1:{port})"
    )
    with pytest.raises(SweepError, match=rf"ray://127.0.0.1:{port} .*unreachable"):
        launchers.probe_ray(f"ray://127.0.0.1:{port}")
    with pytest.raises(SweepError, match="expected host:port"):
        launchers.probe_ray("127.0.0.1:notaport")
    launchers.probe_ray(None)  # a local cluster: nothing to reach


def test_auto_without_a_running_cluster_says_so(monkeypatch):
    monkeypatch.setattr(ray_probe, "current_cluster", lambda: None)
    with pytest.raises(SweepError, match="no running Ray cluster found for .*address=auto"):
        launchers.probe_ray("auto")
    port = _closed_port()
    monkeypatch.setattr(ray_probe, "current_cluster", lambda: f"127.0.0.1:{port}")
    with pytest.raises(SweepError, match=f"127.0.0.1:{port}"):
        launchers.probe_ray("auto")


def test_missing_sbatch(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SweepError, match="submitit_slurm needs SLURM's `sbatch` on PATH"):
        launchers.probe_slurm()


def _point(i: int, value: int) -> Point:
    ovs = [f"retrieve.ef_search={value}"]
    return Point(i, ovs, ovs[0], {}, {"retrieve.ef_search": value}, {"retrieve": f"k{value}"})


class _DiesOnSecond:
    """A launcher whose first point finishes and whose second point's worker dies."""

    def __init__(self, logs: Path):
        self.logs, self.calls = logs, []

    def launch(self, job_overrides, initial_job_idx):
        self.calls.append(([list(o) for o in job_overrides], initial_job_idx))
        done = {"ok": True, "seconds": 1.5, "error": None, "log": str(self.logs / "000.log")}
        (self.logs / "000.outcome.json").write_text(json.dumps(done))
        raise RuntimeError("The worker died unexpectedly\nwhile executing this task.")


@pytest.mark.full  # make test-all: a sweep worker killed
def test_a_dead_worker_is_a_failed_point_and_the_finished_one_counts(tmp_path, monkeypatch):
    logs = tmp_path / "logs"
    logs.mkdir()
    fake = _DiesOnSecond(logs)
    cluster = launchers.ClusterLauncher("submitit_local", PROJECT, tmp_path, None, None)
    monkeypatch.setattr(cluster, "_launcher", lambda task: fake)
    points = [_point(0, 16), _point(1, 64)]
    out = io.StringIO()
    outcomes = cluster.run(points, {0: {}, 1: {}}, logs, Progress(2, out))
    # distinct stage keys: one batch of both points
    assert fake.calls == [([["retrieve.ef_search=16"], ["retrieve.ef_search=64"]], 0)]
    assert outcomes[0] == Outcome(True, 1.5, None, logs / "000.log")
    assert not outcomes[1].ok
    assert outcomes[1].error == (
        "submitit local: RuntimeError: The worker died unexpectedly while executing this task."
    )
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[1/2] retrieve.ef_search=16  ok  1.5 s")
    assert lines[1].startswith("[2/2] retrieve.ef_search=64  FAILED")


def test_after_a_failed_launch_running_points_are_waited_for(tmp_path, monkeypatch):
    monkeypatch.setattr(launchers, "STALE_S", 1.0)
    logs = tmp_path
    (logs / "001.alive").write_text("{}")  # fresh heartbeat: still running
    points = [_point(0, 16), _point(1, 64)]
    cluster = launchers.ClusterLauncher("ray", PROJECT, tmp_path, None, None)
    t0 = time.perf_counter()
    cluster._wait(points, logs, poll=0.05)  # 000 never started, 001's heartbeat goes stale
    waited = time.perf_counter() - t0
    assert 1.0 <= waited < 4.0


def test_table_when_every_point_failed_lists_them():
    from ragrig.sweep.results import row, table

    rows = [
        row(f"retrieve.ef_search={v}", {"retrieve.ef_search": v}, {}, "failed", "lost", 1.0)
        for v in (16, 64)
    ]
    assert table(rows).splitlines() == [
        "retrieve.ef_search  nDCG@10  Recall@100  faithfulness  p95 ms  $/query  s",
        "failed points (2):",
        "  retrieve.ef_search=16: lost",
        "  retrieve.ef_search=64: lost",
    ]
