"""The shared run-cache on S3 (ragrig.storage.remote): after a sweep finishes and pushes, how long a fresh
clone pointed at the same remote takes to reproduce one point with `dvc exp run`, and proof that
it computed nothing (target: under 30 s, embed and index not run).

    python benchmarks/bench_remote_cache.py --dataset tiny      # the 20-doc fixture
    python benchmarks/bench_remote_cache.py --dataset scifact   # SciFact (embed ~4 min cold)

Everything runs against an S3 emulator (moto's server, tests/s3_emulator.py) on 127.0.0.1 with
credentials in the environment, in throwaway copies of the project:

(a) copy A sweeps the grid with `storage=s3` (each point `dvc exp run --temp --pull`, then its
    stages pushed): wall time, the remote's run-cache entries, objects and bytes;
(b) `--repeats` fresh copies B (empty DVC cache, no MLflow store) each run
    `python -m ragrig remote setup ...` then `dvc exp run --pull -S <first point>`: wall time
    of the `dvc exp run`, the stages that ran (stage log; target none), the stages DVC reports
    restored ("Stage 'x' is cached - skipping run"), and whether its report is byte-identical to
    one of A's points (the md5 of reports/run in the dvc.lock files);
(c) with --also-repro, one more fresh copy writes the point's params.yaml and runs
    `dvc repro --pull` (the same restores without an experiment's stash and commit).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import _common as C
from bench_pipeline import read_log, timed
from bench_sweep import fresh_copy

TARGET_S = 30.0
BASE = {
    "scifact": ["generate=extractive"],
    "tiny": ["dataset=tiny", "generate=extractive"],
}
GRID = ["retrieve.ef_search=16,64"]
BUCKET = "ragrig-bench"
RESTORED = re.compile(r"Stage '([^']+)' is cached - skipping run")


def _report_md5(lock: dict) -> str | None:
    outs = (lock.get("stages") or {}).get("report", {}).get("outs") or []
    return next((o["md5"] for o in outs if o["path"] == "reports/run"), None)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    C.add_common_args(p, params=False)
    p.add_argument("--dataset", choices=["scifact", "tiny"], default=None)
    p.add_argument("--grid", nargs="+", default=None, help="swept overrides of the sweep")
    p.add_argument("--jobs", type=int, default=1, help="points at a time in the sweep")
    p.add_argument("--repeats", type=int, default=2, help="fresh clones reproducing the point")
    p.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()))
    p.add_argument(
        "--also-repro",
        action="store_true",
        help="also one fresh clone with `params write` + `dvc repro --pull` (no experiment)",
    )
    args = p.parse_args(argv)
    C.setup_env()
    if args.dataset is None:  # run_all passes --dataset-root: the fixture means `tiny`
        tiny = (C.PROJECT_ROOT / "tests" / "fixtures" / "tiny_beir").resolve()
        args.dataset = "tiny" if args.dataset_root.resolve() == tiny else "scifact"
    overrides = list(BASE[args.dataset])
    if args.dataset == "scifact":
        overrides.append(f"dataset.root={args.dataset_root.resolve()}")
    grid_args = args.grid or GRID
    sys.path.insert(0, str(C.PROJECT_ROOT))  # tests.s3_emulator
    from tests.s3_emulator import running_s3

    from ragrig.storage.remote import experiment_lock
    from ragrig.sweep.engine import plan

    points, _ = plan(C.PROJECT_ROOT, [*overrides, *grid_args])
    first = points[0].overrides
    base = Path(tempfile.mkdtemp(prefix="ragrig-bench-remote-", dir=args.workdir))
    print(f"throwaway copies under {base}; {len(points)} points; point reproduced: {first}")

    result = C.header("remote_cache", ["dvc", "dvc-s3", "moto"])
    result["config"] = {"dataset": args.dataset, "overrides": overrides, "grid": grid_args}
    result["points"] = len(points)
    env = dict(os.environ)
    env.update(C.OFFLINE_ENV)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("RAGRIG_MLFLOW_URI", None)

    with running_s3() as s3:
        s3.bucket(BUCKET)
        storage = [
            "storage=s3",
            f"storage.remote.url=s3://{BUCKET}/cache",
            f"storage.remote.endpoint_url={s3.endpoint}",
        ]

        def env_for(repo: Path) -> dict:
            return {
                **env,
                **s3.env,
                "PYTHONPATH": str(repo / "src"),
                "RAGRIG_STAGE_LOG": str(repo.parent / f"{repo.name}-stages.jsonl"),
            }

        # (a) the sweep that pushes
        a = fresh_copy(base, "a", env_for(base / "a"), overrides)
        cmd = [sys.executable, "-m", "ragrig", "sweep", "-j", str(args.jobs)]
        cmd += ["--sweep-dir", str(base / "a-sweep"), *overrides, *storage, *grid_args]
        sweep_s = timed(cmd, a, env_for(a), base / "a-sweep.log")
        keys = s3.keys(BUCKET, "cache/")
        client = s3.client()
        stored = sum(
            o["Size"]
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
            for o in page.get("Contents", [])
        )
        a_stages = collections.Counter(
            e["stage"]
            for e in read_log(Path(env_for(a)["RAGRIG_STAGE_LOG"]))
            if e["status"] == "ok"
        )
        result["sweep"] = {
            "wall_s": round(sweep_s, 1),
            "stage_runs": dict(a_stages),
            "remote_run_cache_entries": sum(k.startswith("cache/runs/") for k in keys),
            "remote_objects": sum("/files/md5/" in k for k in keys),
            "remote_bytes": stored,
        }
        print(f"(a) sweep: {result['sweep']}", flush=True)
        refs = subprocess.run(
            ["git", "for-each-ref", "--format=%(refname)", "refs/exps/"],
            cwd=a,
            capture_output=True,
            text=True,
        ).stdout.split()
        # the reports A's points produced (a clone that restores its point gets one of them)
        want = {_report_md5(experiment_lock(a, r.rsplit("/", 1)[-1])) for r in refs}

        # (b) fresh clones reproducing the first point from the remote
        clones = []
        for i in range(args.repeats):
            b = fresh_copy(base, f"b{i}", env_for(base / f"b{i}"), overrides)
            setup_s = timed(
                [sys.executable, "-m", "ragrig", "remote", "setup", *storage],
                b,
                env_for(b),
                base / f"b{i}-setup.log",
            )
            exp = ["dvc", "exp", "run", "--pull", *[x for o in first for x in ("-S", o)]]
            load = round(os.getloadavg()[0], 2)
            exp_s = timed(exp, b, env_for(b), base / f"b{i}-exp.log")
            text = (base / f"b{i}-exp.log").read_text(encoding="utf-8", errors="replace")
            ran = collections.Counter(
                e["stage"]
                for e in read_log(Path(env_for(b)["RAGRIG_STAGE_LOG"]))
                if e["status"] == "ok"
            )
            from dvc.utils.serialize import parse_yaml

            lock = parse_yaml((b / "dvc.lock").read_text(), "dvc.lock")
            clones.append(
                {
                    "setup_s": round(setup_s, 2),
                    "exp_run_s": round(exp_s, 2),
                    "load_1min": load,
                    "stages_run": dict(ran),
                    "stages_restored": sorted(set(RESTORED.findall(text))),
                    "same_report_as_sweep": _report_md5(lock) in want,
                }
            )
            print(f"(b) fresh clone {i}: {clones[-1]}", flush=True)

        # (c) the same without DVC's experiment machinery: params.yaml written, `dvc repro --pull`
        if args.also_repro:
            c = fresh_copy(base, "c", env_for(base / "c"), overrides)
            timed(
                [sys.executable, "-m", "ragrig", "remote", "setup", *storage],
                c,
                env_for(c),
                base / "c-setup.log",
            )
            write = [sys.executable, "-m", "ragrig", "params", "write", *first]
            write_s = timed(write, c, env_for(c), base / "c-params.log")
            load = round(os.getloadavg()[0], 2)
            repro_s = timed(["dvc", "repro", "--pull"], c, env_for(c), base / "c-repro.log")
            text = (base / "c-repro.log").read_text(encoding="utf-8", errors="replace")
            ran = collections.Counter(
                e["stage"]
                for e in read_log(Path(env_for(c)["RAGRIG_STAGE_LOG"]))
                if e["status"] == "ok"
            )
            result["fresh_clone_repro"] = {
                "params_write_s": round(write_s, 2),
                "repro_pull_s": round(repro_s, 2),
                "load_1min": load,
                "stages_run": dict(ran),
                "stages_restored": sorted(set(RESTORED.findall(text))),
            }
            print(f"(c) fresh clone, dvc repro --pull: {result['fresh_clone_repro']}", flush=True)

    times = [c["exp_run_s"] for c in clones]
    result["fresh_clone"] = {
        "runs": clones,
        "exp_run_s_median": round(C.median(times), 2),
        "target_s": TARGET_S,
        "embed_or_index_run": any(
            c["stages_run"].get(s) for c in clones for s in ("embed", "index")
        ),
    }
    result["target_met"] = bool(
        result["fresh_clone"]["exp_run_s_median"] < TARGET_S
        and not result["fresh_clone"]["embed_or_index_run"]
        and all(c["same_report_as_sweep"] for c in clones)
    )
    result["machine_load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(
        f"fresh clone `dvc exp run --pull`: median {result['fresh_clone']['exp_run_s_median']} s "
        f"(target < {TARGET_S:g} s); stages run {[c['stages_run'] for c in clones]}"
    )
    C.write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
