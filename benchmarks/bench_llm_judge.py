"""Per-call latency, CPU time, tokens and status of an LLM judge over rated MTRAG answers.

Runs the LLM judge that `judge.llm` in --params describes (default: the packaged SmolLM2 in
process, `{backend: llama_cpp}`) over the first --n rated answers of MTRAG's human-rated subset
(the calibration half's order, faithful and unfaithful alternated so both labels are present),
with a fresh cache folder unless --cache-dir is given, then again over the same answers to time
the cache. Prints per-call wall seconds (p50/p95/max), CPU seconds, tokens, status counts and
the mean LLM faithfulness of faithful vs unfaithful answers (human label), with the ROC-AUC of
that score: a handful of answers only tells whether the judge separates the labels at all.

    python benchmarks/bench_llm_judge.py [--n 20] [--threads 1] [--dataset-root DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _common as C

DEFAULT_ROOT = (C.PROJECT_ROOT / ".." / "shared" / "datasets" / "mtrag_human").resolve()
MTRAG_FILE = "reference_subset_with_human_evaluations.json.gz"  # or its uncompressed twin


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--dataset-root",
        type=Path,
        default=DEFAULT_ROOT,
        help=f"folder holding {MTRAG_FILE} (default ../shared/datasets/mtrag_human)",
    )
    p.add_argument(
        "--params",
        type=Path,
        default=C.DEFAULT_PARAMS,
        help="unused: the judge is the packaged model given by --model",
    )
    p.add_argument("--n", type=int, default=20)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--model", default="packaged:SmolLM2-135M-Instruct")
    p.add_argument("--cache-dir", type=Path, default=None)
    p.add_argument("--json", "--out", dest="out", type=Path, default=None)
    args = p.parse_args(argv)

    from ragrig.core.config import validate_section
    from ragrig.judge.llm import make_llm_judge
    from ragrig.metrics.aggregate import quantiles
    from ragrig.tools.calibrate.core import split_tasks
    from ragrig.tools.calibrate.mtrag import load_mtrag_human, resolve_dataset_file

    rated = load_mtrag_human(resolve_dataset_file(args.dataset_root / MTRAG_FILE)).answers
    split = split_tasks({a.task_id for a in rated}, seed=13)
    calib = [a for a in rated if a.task_id in set(split.calibration)]
    faithful = [a for a in calib if a.faithful]
    unfaithful = [a for a in calib if not a.faithful]
    picked = [x for pair in zip(faithful, unfaithful, strict=False) for x in pair][: args.n]

    cache = args.cache_dir or Path(tempfile.mkdtemp(prefix="llm-judge-cache-"))
    cfg = validate_section(
        "judge",
        {
            "method": "overlap",
            "llm": {
                "backend": "llama_cpp",
                "model": args.model,
                "threads": args.threads,
                "cache_dir": str(cache),
            },
        },
    )
    t0 = time.perf_counter()
    judge = make_llm_judge(cfg.llm)
    load_s = time.perf_counter() - t0
    calls = []
    for a in picked:
        w0, c0 = time.perf_counter(), time.process_time()
        out = judge.judge(a.judge_question(), a.answer, list(a.contexts))
        calls.append(
            {
                "wall_s": time.perf_counter() - w0,
                "cpu_s": time.process_time() - c0,
                "status": out.status,
                "prompt_tokens": out.prompt_tokens,
                "completion_tokens": out.completion_tokens,
                "faithful": a.faithful,
                "llm_faithfulness": out.verdict.faithfulness if out.verdict else None,
            }
        )
        print(json.dumps(calls[-1]), file=sys.stderr)
    w0 = time.perf_counter()
    cached = [judge.judge(a.judge_question(), a.answer, list(a.contexts)) for a in picked]
    cached_ms = (time.perf_counter() - w0) / max(len(picked), 1) * 1e3

    ok = [c for c in calls if c["status"] == "ok"]
    pos = [c["llm_faithfulness"] for c in ok if c["faithful"]]
    neg = [c["llm_faithfulness"] for c in ok if not c["faithful"]]
    pairs = [(x, y) for x in pos for y in neg]
    auc = (
        sum(1.0 if x > y else 0.5 if x == y else 0.0 for x, y in pairs) / len(pairs)
        if pairs
        else None
    )
    wall = [c["wall_s"] for c in calls]
    result = {
        "benchmark": "llm_judge",
        "model": args.model,
        "threads": args.threads,
        "answers": len(calls),
        "model_load_s": load_s,
        "wall_s": {
            **quantiles(wall, [0.5, 0.95]),
            "max": max(wall) if wall else None,
            "mean": statistics.fmean(wall) if wall else None,
        },
        "cpu_s_mean": statistics.fmean(c["cpu_s"] for c in calls) if calls else None,
        "prompt_tokens_mean": statistics.fmean(c["prompt_tokens"] for c in calls)
        if calls
        else None,
        "completion_tokens_mean": (
            statistics.fmean(c["completion_tokens"] for c in calls) if calls else None
        ),
        "status": {
            s: sum(c["status"] == s for c in calls) for s in sorted({c["status"] for c in calls})
        },
        "cached_call_ms": cached_ms,
        "all_cached": all(c.cached for c in cached),
        "mean_llm_faithfulness": {
            "human_faithful": statistics.fmean(pos) if pos else None,
            "human_unfaithful": statistics.fmean(neg) if neg else None,
        },
        "roc_auc": auc,
        "load_avg_1_5_15": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
