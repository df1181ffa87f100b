"""The DVC pipeline end to end, in a throwaway copy of the project.

The git-tracked files of the project are copied into a fresh folder (under --workdir), committed
to a new git repository there, DVC is set up (`python -m ragrig init-dvc`) and params.yaml is
recomposed with the dataset root made absolute. Then:

(a) a cold `dvc repro` of the default experiment: total wall time and per-stage wall times, read
    from the stage log the wrappers append to ($RAGRIG_STAGE_LOG, pointed at a file of ours);
(b) a no-op `dvc repro` (repeated; median wall time, target <= 10 s), asserting that no stage ran
    (the stage log gets no new line);
(c) `dvc exp run -S retrieve.ef_search=64` (Hydra composition, enabled by init-dvc): exactly which
    stages ran, per the stage log; must start with retrieve, with nothing upstream of it (the
    stages after it rerun only when their inputs changed).

With Hydra enabled, `dvc exp run` recomposes params.yaml from conf/ with only the -S overrides it
is given, so the overrides used to write params.yaml (the absolute dataset root, and with --quick
generate.max_queries=5) are passed again with -S. Without them the dataset root reverts to the
relative ../shared/datasets/scifact (recorded as `exp_run_root_without_override`) and the run
fails in parse, as that path does not exist beside the copy.

The copy's own src/ is put first on PYTHONPATH, so its stages run the copied code (the venv's
editable install points at the original project).

    python benchmarks/bench_pipeline.py [--quick] [--keep] [--override KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as C

# The stages of dvc.yaml; the training ones train a model once (off by default: a manifest-only
# output) and DVC may run them anywhere before judge, so the cold run is checked as a set.
TRAINING_STAGES = [s for s in C.pipeline_stages() if s.startswith("train_")]
STAGES = [s for s in C.pipeline_stages() if s not in TRAINING_STAGES]
DOWNSTREAM_OF_RETRIEVE = STAGES[STAGES.index("retrieve") :]
NOOP_TARGET_S = 10.0


def copy_tracked(project: Path, dest: Path) -> dict:
    files = (
        subprocess.run(
            ["git", "-C", str(project), "ls-files", "-z"], check=True, capture_output=True
        )
        .stdout.decode()
        .split("\0")
    )
    copied, missing = 0, []
    for rel in filter(None, files):
        src = project / rel
        if not src.exists() and not src.is_symlink():
            missing.append(rel)  # deleted in the working tree
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            target.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, target)
        copied += 1
    return {"copied": copied, "missing_in_worktree": missing}


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=ragrig-bench", "-c", "user.email=bench@localhost", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def read_log(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def headline_metrics(path: Path) -> dict:
    """A few figures of reports/metrics.json, to tie the timings to a sane run."""
    if not path.exists():
        return {}
    m = json.loads(path.read_text(encoding="utf-8"))
    return {
        "retrieval_ndcg@10": (m.get("retrieval") or {}).get("ndcg@10"),
        "lanes_ndcg@10": {k: v.get("ndcg@10") for k, v in (m.get("lanes") or {}).items()},
        "ann": m.get("ann"),
        "generated": (m.get("counts") or {}).get("generated"),
        "faithfulness": (m.get("judge") or {}).get("faithfulness"),
    }


def timed(cmd: list[str], cwd: Path, env: dict, log: Path) -> float:
    """Run `cmd`, output to `log`; return wall seconds; on failure show the log's tail and raise."""
    t0 = time.perf_counter()
    with open(log, "w", encoding="utf-8") as fh:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-40:]
        print("\n".join(tail), file=sys.stderr)
        raise RuntimeError(f"{' '.join(cmd)} failed with exit code {proc.returncode} (log: {log})")
    return seconds


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    C.add_common_args(p, params=False)
    p.add_argument(
        "--project", type=Path, default=C.PROJECT_ROOT, help="project whose git files are copied"
    )
    p.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()), help="parent of the copy"
    )
    p.add_argument("--quick", action="store_true", help="generate.max_queries=5 (a faster check)")
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Hydra override for params.yaml and the experiment, repeatable "
        "(the tests run `--override dataset=tiny --override generate=extractive`)",
    )
    p.add_argument("--ef-search", type=int, default=64, help="retrieve.ef_search of the experiment")
    p.add_argument(
        "--noop-repeats", type=int, default=3, help="no-op `dvc repro` runs (median reported)"
    )
    p.add_argument("--keep", action="store_true", help="keep the throwaway copy")
    args = p.parse_args(argv)

    C.setup_env()
    dataset_root = args.dataset_root.resolve()
    if not dataset_root.is_dir():
        raise SystemExit(f"dataset root {dataset_root} is not a folder")
    base = Path(tempfile.mkdtemp(prefix="ragrig-bench-pipeline-", dir=args.workdir))
    repo = base / "repo"
    logs = base / "logs"
    repo.mkdir()
    logs.mkdir()
    stage_log = base / "stage_log.jsonl"
    print(f"throwaway copy: {repo}", flush=True)

    env = dict(os.environ)
    env.update(C.OFFLINE_ENV)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(repo / "src") + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    env["RAGRIG_STAGE_LOG"] = str(stage_log)
    env.pop("RAGRIG_MLFLOW_URI", None)  # the copy's own mlflow.db
    py = sys.executable

    try:
        copy_info = copy_tracked(args.project.resolve(), repo)
        git(repo, "init", "-q")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "benchmark copy")
        timed([py, "-m", "ragrig", "init-dvc"], repo, env, logs / "init_dvc.log")
        overrides = [*args.override, f"dataset.root={dataset_root}"]
        if args.quick:
            overrides.append("generate.max_queries=5")
        timed([py, "-m", "ragrig", "params", "write", *overrides], repo, env, logs / "params.log")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "params: absolute dataset root", "--allow-empty")

        # (a) cold repro
        n0 = len(read_log(stage_log))
        cold_s = timed(["dvc", "repro"], repo, env, logs / "repro_cold.log")
        cold = read_log(stage_log)[n0:]
        per_stage = [
            {"stage": e["stage"], "seconds": e["seconds"], "status": e["status"]} for e in cold
        ]
        cold_ok = sorted(e["stage"] for e in cold) == sorted(STAGES + TRAINING_STAGES) and all(
            e["status"] == "ok" for e in cold
        )
        print(f"cold dvc repro: {cold_s:.1f} s", flush=True)
        metrics_cold = headline_metrics(repo / "reports" / "metrics.json")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "cold run lock", "--allow-empty")

        # (b) no-op repro
        noop_s, noop_new = [], []
        for i in range(args.noop_repeats):
            n0 = len(read_log(stage_log))
            noop_s.append(timed(["dvc", "repro"], repo, env, logs / f"repro_noop_{i}.log"))
            noop_new.append(len(read_log(stage_log)) - n0)
            print(
                f"no-op dvc repro {i + 1}: {noop_s[-1]:.2f} s, {noop_new[-1]} stage(s) ran",
                flush=True,
            )
        noop_med = C.median(noop_s)

        # (c) downstream experiment
        from ragrig.compose.params import compose

        reverted_root = compose(repo / "conf", [f"retrieve.ef_search={args.ef_search}"])["dataset"][
            "root"
        ]
        exp_cmd = ["dvc", "exp", "run"]
        for o in [*overrides, f"retrieve.ef_search={args.ef_search}"]:
            exp_cmd += ["-S", o]
        n0 = len(read_log(stage_log))
        exp_s = timed(exp_cmd, repo, env, logs / "exp_run.log")
        exp_events = read_log(stage_log)[n0:]
        exp_stages = [e["stage"] for e in exp_events]
        upstream_ran = sorted(set(exp_stages) - set(DOWNSTREAM_OF_RETRIEVE))
        # retrieve must rerun; what follows reruns only if its input changed (an unchanged
        # ranking stops the cascade, as on the tiny fixture); nothing upstream may run
        exp_ok = (
            exp_stages[:1] == ["retrieve"]
            and not upstream_ran
            and all(e["status"] == "ok" for e in exp_events)
        )
        print(f"dvc exp run: {exp_s:.1f} s, stages {exp_stages}", flush=True)

        metrics_exp = headline_metrics(repo / "reports" / "metrics.json")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)

    stage_sum = sum(e["seconds"] for e in per_stage)
    result = {
        **C.header(
            "pipeline", ["dvc", "hydra-core", "torch", "sentence-transformers", "xllamacpp"]
        ),
        "config": {
            "quick": args.quick,
            "overrides": overrides,
            "exp_command": " ".join(exp_cmd),
            "files_copied": copy_info["copied"],
            "files_missing_in_worktree": copy_info["missing_in_worktree"],
            "copy_kept_at": str(repo) if args.keep else None,
        },
        "cold_repro": {
            "wall_s": round(cold_s, 2),
            "stage_seconds_sum": round(stage_sum, 2),
            "dvc_and_process_overhead_s": round(cold_s - stage_sum, 2),
            "stages": per_stage,
            "all_stages_ran_ok": cold_ok,
        },
        "noop_repro": {
            "wall_s": [round(x, 3) for x in noop_s],
            "median_wall_s": round(noop_med, 3),
            "stages_ran": noop_new,
            "target": f"<= {NOOP_TARGET_S} s and no stage ran",
            "target_met": noop_med <= NOOP_TARGET_S and not any(noop_new),
        },
        "exp_run": {
            "wall_s": round(exp_s, 2),
            "stages_ran": [
                {"stage": e["stage"], "seconds": e["seconds"], "status": e["status"]}
                for e in exp_events
            ],
            "upstream_of_retrieve_ran": upstream_ran,
            "target": "retrieve, then only stages among " + ", ".join(DOWNSTREAM_OF_RETRIEVE),
            "target_met": exp_ok,
            "exp_run_root_without_override": reverted_root,
        },
        "target_met": cold_ok and noop_med <= NOOP_TARGET_S and not any(noop_new) and exp_ok,
        "metrics": {"cold_run": metrics_cold, "exp_run": metrics_exp},
    }

    C.print_table(
        f"Cold `dvc repro` ({'quick: generate.max_queries=5' if args.quick else 'default experiment'})",
        ["stage", "seconds", "status"],
        [[e["stage"], e["seconds"], e["status"]] for e in per_stage]
        + [
            ["(sum of stages)", stage_sum, ""],
            ["(dvc repro wall)", cold_s, ""],
            ["(overhead)", cold_s - stage_sum, ""],
        ],
        digits=2,
    )
    C.print_table(
        "Incremental runs",
        ["run", "wall s", "stages ran", "target", "met"],
        [
            [
                "no-op dvc repro (median)",
                noop_med,
                ", ".join(map(str, noop_new)) + " new log lines",
                f"<= {NOOP_TARGET_S} s, none",
                result["noop_repro"]["target_met"],
            ],
            [
                f"dvc exp run -S retrieve.ef_search={args.ef_search}",
                exp_s,
                ", ".join(exp_stages),
                "retrieve..report only",
                exp_ok,
            ],
        ],
        digits=2,
    )
    if reverted_root != str(dataset_root):
        print(
            f"note: composing conf/ with only -S retrieve.ef_search={args.ef_search} gives dataset.root="
            f"{reverted_root!r}; the params-write overrides were passed again with -S"
        )
    C.write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
