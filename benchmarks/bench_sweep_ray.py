"""A sweep on Ray (Hydra's Ray launcher, a local cluster of 2 CPUs) against the same sweep run
sequentially, each in a fresh throwaway copy of the project with an empty DVC cache.

    python benchmarks/bench_sweep_ray.py --dataset tiny   # 8 points: 2 chunk sizes x 2 M x 2 efSearch

Per point: the metrics (all but timings and what derives from them) must be identical. Per
stage: how many times it ran in each sweep, read from the stage run log every stage appends to,
against the minimum (one run per distinct stage configuration, ragrig.sweep.plan): each
distinct upstream configuration computed once across the Ray workers. And the wall-time ratio
Ray / sequential (Ray's includes starting its local cluster).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import _common as C
from bench_sweep import add_sweep_args, fresh_copy, run_sweep, sweep_setup

TINY_GRID = ["chunk.max_tokens=8,16", "index.dense.m=16,32", "retrieve.ef_search=16,64"]
SCIFACT_GRID = ["chunk.max_tokens=128,256", "index.dense.m=16,32", "retrieve.ef_search=64,128"]
TIMED = ("latency_ms/", "cost_usd_per_query/")


def quality(metrics: dict[str, float]) -> dict[str, float]:
    """The metrics that do not depend on timing."""
    return {
        k: v
        for k, v in metrics.items()
        if not k.startswith(TIMED) and not k.endswith(("_ms", "cpu_s"))
    }


def sweep_rows(base: Path, name: str) -> list[dict]:
    import json

    return json.loads((base / f"{name}-sweep" / "rows.json").read_text())


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_sweep_args(p)
    p.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray cluster")
    args = p.parse_args(argv)
    setup = sweep_setup(
        args, {"scifact": SCIFACT_GRID, "tiny": TINY_GRID}, "ragrig-bench-sweep-ray-"
    )
    overrides, grid_args, points, minimum = (
        setup.overrides,
        setup.grid,
        setup.points,
        setup.minimum,
    )
    batches = setup.schedule.batches(len(points))
    first = points[0].overrides
    base, env = setup.base, setup.env
    print(f"throwaway copies under {base}; {len(points)} points; minimum {minimum}", flush=True)
    env.pop("RAGRIG_MLFLOW_URI", None)
    env.pop("RAY_ADDRESS", None)  # a local cluster of its own, never someone else's

    def env_for(repo: Path) -> dict:
        return {
            **env,
            "PYTHONPATH": str(repo / "src"),
            "RAGRIG_STAGE_LOG": str(repo.parent / f"{repo.name}-stages.jsonl"),
        }

    result = C.header("sweep_ray", ["dvc", "mlflow", "ray", "hydra-ray-launcher"])
    result["config"] = {
        "dataset": args.dataset,
        "overrides": overrides,
        "grid": grid_args,
        "ray": f"local cluster, {args.num_cpus} CPUs, 1 CPU per point",
    }
    result["points"] = len(points)
    result["minimum_stage_runs"] = minimum
    result["batches"] = [len(b) for b in batches]

    all_grid = [*overrides, *grid_args]
    seq_repo = fresh_copy(base, "seq", env_for(base / "seq"), first)
    seq = run_sweep(seq_repo, env_for(seq_repo), all_grid, 1, "seq", base)
    print(f"sequential: {seq}", flush=True)
    ray_repo = fresh_copy(base, "ray", env_for(base / "ray"), first)
    ray_args = [
        "hydra/launcher=ray",
        f"hydra.launcher.ray.init.num_cpus={args.num_cpus}",
    ]
    ray = run_sweep(ray_repo, env_for(ray_repo), [*ray_args, *all_grid], 1, "ray", base)
    print(f"ray: {ray}", flush=True)

    seq_rows, ray_rows = sweep_rows(base, "seq"), sweep_rows(base, "ray")
    differing = [
        a["point"]
        for a, b in zip(seq_rows, ray_rows, strict=True)
        if a["point"] != b["point"] or quality(a["metrics"]) != quality(b["metrics"])
    ]
    compared = sum(len(quality(r["metrics"])) for r in ray_rows)
    for name, r in (("sequential", seq), ("ray", ray)):
        r["stage_runs_equal_minimum"] = all(r["stage_runs"][s] == m for s, m in minimum.items())
        result[name] = r
    result["metrics_compared"] = compared
    result["points_with_different_metrics"] = differing
    result["wall_ratio_ray_to_sequential"] = round(ray["wall_s"] / seq["wall_s"], 3)
    result["ndcg_at_10"] = {r["point"]: r["metrics"].get("retrieval/ndcg_at_10") for r in ray_rows}
    result["machine_load_after"] = [round(x, 2) for x in os.getloadavg()]
    result["target_met"] = bool(
        not differing
        and compared > 0
        and seq["failed"] == ray["failed"] == 0
        and seq["stage_runs_equal_minimum"]
        and ray["stage_runs_equal_minimum"]
    )
    print(
        f"identical metrics: {not differing} ({compared} compared); wall ray/seq "
        f"{result['wall_ratio_ray_to_sequential']}; target met: {result['target_met']}",
        flush=True,
    )
    C.write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
