"""`ragrig traces` at scale: a synthetic log of `--interactions` interactions over `--hours` hours
(ragrig.traces.synthetic, built from the dataset's corpus) evaluated by the command itself in a
child process (no MLflow), once per sample rate: wall time from the command's start (imports
and model loads included), log lines and judged interactions per second, and the child's peak
resident memory (getrusage of the children; each rate in its own child).

Targets: >= 200 judged interactions/s on 2 cores and peak memory under 1 GB, at a 5-10% sample, with
the three axes as offline (relevance's semantic part embeds every judged line's question and
contexts; self-consistency reads the 10% of lines that log samples) and the feedback signals.

    python benchmarks/bench_traces.py [--interactions 100000] [--rates 0.05 0.10] [--glibc-heap-too]
        [--runtimes onnx torch] [--embed-batches 8 null]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import _common as C

TARGET_PER_S = 200.0
TARGET_PEAK_MIB = 1024.0


def _child_peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


def run_rate(
    log: C.Path, rate: float, params: C.Path, work: C.Path, bounded: bool = True,
    runtime: str = "onnx", embed_batch: int | None = 8,
) -> dict:  # fmt: skip
    """The command on `log` at `rate`, in a fresh child (so its peak memory is its own);
    `bounded`: conf/traces.yaml's bound_heap (false: glibc's own mmap threshold); `runtime`: its
    runtime (onnx with the 8 MiB heap threshold, torch with 1 MiB: each its measured best);
    `embed_batch`: its embed_batch_size (None: the embed section's batch_size)."""
    tag = f"{rate:g}-{runtime}-{'bounded' if bounded else 'glibc'}-b{embed_batch}"
    out = work / f"out-{tag}"
    config = work / f"traces-{tag}.yaml"
    config.write_text(
        f"bound_heap: {'true' if bounded else 'false'}\nruntime: {runtime}\n"
        f"heap_threshold_mib: {8 if runtime == 'onnx' else 1}\n"
        f"embed_batch_size: {'null' if embed_batch is None else embed_batch}\n"
    )
    code = (
        "import resource, subprocess, sys, time, json\n"
        "t0 = time.perf_counter()\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "wall = time.perf_counter() - t0\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0\n"
        "print(json.dumps({'rc': p.returncode, 'wall_s': wall, 'peak_mib': peak,"
        " 'stdout': p.stdout[-3000:], 'stderr': p.stderr[-3000:]}))\n"
    )
    cmd = [sys.executable, "-m", "ragrig", "traces", str(log), "--params", str(params),
           "--out", str(out), "--sample-rate", str(rate), "--no-mlflow", "--quiet",
           "--config", str(config)]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-c", code, *cmd], capture_output=True, text=True, cwd=work, check=True
    )
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    if got["rc"] not in (0, 1):  # 1: an alert, the synthetic incident
        raise RuntimeError(f"ragrig traces failed ({got['rc']}): {got['stderr']}")
    summary = json.loads((out / "traces.json").read_text())
    return {
        "sample_rate": rate,
        "heap": "bounded" if bounded else "glibc",
        "runtime": runtime,
        "embed_batch": embed_batch,
        "exit": got["rc"],
        "wall_s": round(got["wall_s"], 2),
        "evaluate_s": summary["seconds"],
        "lines": summary["lines"],
        "judged": summary["judged"],
        "per_s": round(summary["lines"] / got["wall_s"], 1),
        "judged_per_s": round(summary["judged"] / got["wall_s"], 2),
        "peak_mib": round(got["peak_mib"], 1),
        "alerts": len(summary["alerts"]),
        "methods": summary["methods"],
        # the synthetic log's signals follow faithfulness (ragrig.traces.synthetic)
        "tracking": sorted(f"{s['signal']}~{s['axis']}" for s in summary["signals"] if s["tracks"]),
    }


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--interactions", type=int, default=100_000)
    p.add_argument("--hours", type=int, default=24)
    p.add_argument("--rates", type=float, nargs="+", default=[0.05, 0.10])
    p.add_argument("--workdir", type=C.Path, default=None)
    p.add_argument(
        "--glibc-heap-too",
        action="store_true",
        help="also run each rate with bound_heap false (glibc's own mmap threshold), side by side",
    )
    p.add_argument(
        "--runtimes",
        nargs="+",
        choices=["onnx", "torch"],
        default=["onnx"],
        help="conf/traces.yaml runtimes to run side by side (default: onnx, the default)",
    )
    p.add_argument(
        "--embed-batches",
        nargs="+",
        default=["8"],
        help="conf/traces.yaml embed_batch_size values to run side by side ('null': the embed "
        "section's batch_size; default 8, the default)",
    )
    C.add_common_args(p)
    args = p.parse_args(argv)
    batches = [None if b == "null" else int(b) for b in args.embed_batches]
    C.setup_env()
    from ragrig.traces.synthetic import write_synthetic

    root = args.dataset_root or C.DEFAULT_DATASET_ROOT
    corpus = next(c for c in (root / "corpus.jsonl", root / "corpus.jsonl.gz") if c.exists())
    params = args.params or C.DEFAULT_PARAMS
    work = args.workdir or C.Path(tempfile.mkdtemp(prefix="bench-traces-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    log = write_synthetic(work / "interactions.jsonl", corpus, args.interactions, args.hours)
    build_s = time.perf_counter() - t0
    size_mib = os.path.getsize(log) / 2**20
    heaps = (True, False) if args.glibc_heap_too else (True,)
    runs = [
        run_rate(log, r, params, work, bounded, rt, b)
        for r in args.rates
        for rt in args.runtimes
        for bounded in heaps
        for b in batches
    ]
    rows = [
        [f"{r['sample_rate']:g}", r["runtime"], r["heap"], str(r["embed_batch"] or "embed's"),
         f"{r['judged']:,}", f"{r['wall_s']:.1f}",
         f"{r['per_s']:,.0f}", f"{r['judged_per_s']:.1f}", f"{r['peak_mib']:.0f}",
         str(r["alerts"])]
        for r in runs
    ]  # fmt: skip
    C.print_table(
        f"ragrig traces on {args.interactions:,} interactions ({size_mib:.0f} MiB, {args.hours} h)",
        [
            "sample",
            "runtime",
            "heap",
            "embed batch",
            "judged",
            "wall s",
            "lines/s",
            "judged/s",
            "peak MiB",
            "alerts",
        ],
        rows,
    )
    for r in runs:
        print(f"sample {r['sample_rate']:g}: relevance {r['methods']['relevance']}; "
              f"correctness {r['methods']['correctness']}; signals tracking an axis: "
              f"{', '.join(r['tracking']) or 'none'}")  # fmt: skip
    # read on the defaults' runs; the rest compare (no default run: not met)
    defaults = [
        r
        for r in runs
        if r["heap"] == "bounded" and r["runtime"] == "onnx" and r["embed_batch"] == 8
    ]
    met = bool(defaults) and all(
        r["judged_per_s"] >= TARGET_PER_S and r["peak_mib"] < TARGET_PEAK_MIB for r in defaults
    )
    print(
        f"targets >= {TARGET_PER_S:.0f} judged interactions/s and peak < {TARGET_PEAK_MIB:.0f} MiB: "
        f"{'met' if met else 'NOT met'}"
    )
    result = {
        **C.header("traces"),
        "config": {
            "interactions": args.interactions,
            "hours": args.hours,
            "rates": args.rates,
            "glibc_heap_too": args.glibc_heap_too,
            "runtimes": args.runtimes,
            "embed_batches": batches,
        },  # fmt: skip
        "file_mib": round(size_mib, 1),
        "build_s": round(build_s, 2),
        "runs": runs,
        "targets": {"per_s": TARGET_PER_S, "peak_mib": TARGET_PEAK_MIB},
        "target_met": met,
    }
    C.write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
