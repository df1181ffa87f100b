"""Cold against warm stage processes (ragrig.runtime.warm), side by side in one run.

A throwaway copy of the project (git-tracked files, DVC set up, params.yaml composed from
--override, by default the tiny fixture with the extractive generator) runs `dvc repro` from
nothing --repeats times each way, alternating: cold (every stage in its own interpreter) and
warm (RAGRIG_WARM_SOCKET set: every stage in a fork of one server that loaded the libraries
once). Before each run the outputs, DVC cache, dvc.lock and MLflow store are removed, so both
compute every stage. Reported: wall seconds per run (median), per stage (median of the stage
log's seconds), the server's start-up (once, until it listens), which stages ran warm, and
whether the two ways wrote the same bytes for every output file that holds no measured time.

    python benchmarks/bench_warm.py [--repeats 3] [--target STAGE] [--override KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as C
from bench_pipeline import copy_tracked, git, read_log, timed

DEFAULT_OVERRIDES = ["dataset=tiny", "generate=extractive"]
# Files holding measured times (latencies, CPU seconds): different on every run, not compared.
MEASURED = {"latency.parquet", "generations.parquet", "judgments.parquet", "manifest.json"}
RESET = ["dvc.lock", "mlflow.db", "mlartifacts", ".ragrig"]


def _reset(ws: Path) -> None:
    """Every stage output gone (what git does not track under data/ and reports/), with the DVC
    cache, dvc.lock and the MLflow store."""
    git(ws, "clean", "-fdxq", "--", "data", "reports")
    for name in RESET:
        path = ws / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    shutil.rmtree(ws / ".dvc" / "cache", ignore_errors=True)


def _digests(ws: Path) -> dict[str, str]:
    return {
        p.relative_to(ws).as_posix(): hashlib.md5(p.read_bytes()).hexdigest()
        for p in sorted((ws / "data").rglob("*"))
        if p.is_file() and p.name not in MEASURED
    }


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--repeats", type=int, default=3, help="runs each way (alternating)")
    p.add_argument("--target", default=None, help="`dvc repro TARGET` (default: every stage)")
    p.add_argument(
        "--override",
        action="append",
        default=None,
        help=f"composition overrides (default: {' '.join(DEFAULT_OVERRIDES)})",
    )
    p.add_argument("--dataset-root", type=Path, default=None, help="dataset.root, made absolute")
    p.add_argument("--workdir", type=Path, default=None, help="where the copy goes (a temp dir)")
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = p.parse_args(argv)
    C.setup_env()
    overrides = list(args.override or DEFAULT_OVERRIDES)
    if args.dataset_root is not None:
        overrides.append(f"dataset.root={args.dataset_root.resolve()}")
    base = Path(tempfile.mkdtemp(prefix="bench-warm-", dir=args.workdir))
    ws = base / "ragrig"
    ws.mkdir()
    copy_tracked(C.PROJECT_ROOT, ws)
    git(ws, "init", "-q", "-b", "main")
    py = sys.executable
    env = {k: v for k, v in os.environ.items() if k != "RAGRIG_WARM_SOCKET"}
    env["PYTHONPATH"] = str(ws / "src")
    subprocess.run([py, "-m", "ragrig", "init-dvc"], cwd=ws, env=env, check=True)
    subprocess.run([py, "-m", "ragrig", "params", "write", *overrides], cwd=ws, env=env, check=True)
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "bench")

    sock = base / "warm.sock"
    server_log = open(base / "server.log", "w")  # noqa: SIM115 - open while the server runs
    t0 = time.perf_counter()
    server = subprocess.Popen(
        [py, "-m", "ragrig", "warm", str(sock)],
        cwd=ws,
        env=env,
        stdout=server_log,
        stderr=server_log,
        start_new_session=True,
    )
    try:
        while not sock.exists():
            if server.poll() is not None:
                raise RuntimeError(f"the warm server exited (log: {base / 'server.log'})")
            time.sleep(0.05)
        startup_s = time.perf_counter() - t0
        runs: dict[str, list[dict]] = {"cold": [], "warm": []}
        digests: dict[str, dict[str, str]] = {}
        cmd = ["dvc", "repro", *([args.target] if args.target else [])]
        for r in range(args.repeats):
            for way in ("cold", "warm") if r % 2 == 0 else ("warm", "cold"):
                _reset(ws)
                stage_log = base / f"{way}{r}.jsonl"
                run_env = {**env, "RAGRIG_STAGE_LOG": str(stage_log)}
                if way == "warm":
                    run_env["RAGRIG_WARM_SOCKET"] = str(sock)
                wall = timed(cmd, ws, run_env, base / f"{way}{r}.log")
                events = read_log(stage_log)
                runs[way].append(
                    {
                        "wall_s": round(wall, 2),
                        "stages": {e["stage"]: e["seconds"] for e in events},
                        "warm_stages": sum(bool(e.get("warm")) for e in events),
                        "n_stages": len(events),
                    }
                )
                digests.setdefault(way, _digests(ws))
    finally:
        server.terminate()
        server.wait(30)
        server_log.close()

    def summary(way: str) -> dict:
        rows = runs[way]
        names = list(rows[0]["stages"])
        return {
            "wall_s": C.median(r["wall_s"] for r in rows),
            "walls": [r["wall_s"] for r in rows],
            "stage_s": {n: C.median(r["stages"].get(n, 0.0) for r in rows) for n in names},
            "warm_stages": [r["warm_stages"] for r in rows],
            "n_stages": [r["n_stages"] for r in rows],
        }

    cold, warm = summary("cold"), summary("warm")
    same = digests["cold"] == digests["warm"]
    result = {
        **C.header("warm"),
        "overrides": overrides,
        "target": args.target,
        "repeats": args.repeats,
        "server_startup_s": round(startup_s, 2),
        "cold": cold,
        "warm": warm,
        "warm_over_cold": round(warm["wall_s"] / cold["wall_s"], 3),
        "files_compared": len(digests["cold"]),
        "same_outputs": same,
    }
    C.print_table(
        f"dvc repro from nothing, median of {args.repeats} each way (stage log seconds)",
        ["stage", "cold s", "warm s"],
        [[n, cold["stage_s"][n], warm["stage_s"].get(n, 0.0)] for n in cold["stage_s"]]
        + [["dvc repro (wall)", cold["wall_s"], warm["wall_s"]]],
        digits=2,
    )
    print(
        f"warm/cold {result['warm_over_cold']:.3f}; server start-up {startup_s:.1f} s; "
        f"stages run warm {warm['warm_stages']} of {warm['n_stages']}; "
        f"same bytes in {len(digests['cold'])} output files: {same}"
    )
    C.write_json(args.json, result)
    shutil.rmtree(base, ignore_errors=True)
    if not same or warm["warm_stages"] != warm["n_stages"]:
        raise SystemExit("warm stages wrote other bytes, or a stage did not run warm")
    return result


if __name__ == "__main__":
    main()
