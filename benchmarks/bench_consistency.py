"""Self-consistency as a correctness surrogate, and what it costs a cold run, side by side.

    python benchmarks/bench_consistency.py --samples 2 4                  # SciFact, ~25 min
    python benchmarks/bench_consistency.py --samples 2 --budgets none answer   # the sample budget
    python benchmarks/bench_consistency.py --smoke                        # the fixture, ~2 min

In a fresh clone of this checkout's HEAD (the venv linked, `../shared` linked as a clone sees
it), `make repro` runs the default experiment cold; then, for each N of --samples, `make repro
ARGS=generate.consistency_samples=N` reruns only what reads the samples (estimate, generate,
judge, report: DVC's cache keeps the rest). The stage logs give the cost: the cold run with N
samples is the cold run plus what the rerun stages took beyond their first run (the stages
upstream of the estimate cannot change), and its ratio to the cold run is the target (<= 1.3).
With --budgets, each N is measured at each sample token budget (`generate.consistency_max_tokens`:
none = the generator's max_tokens, `answer` = the greedy answer's own length, or a number), in
the same clone one after the other.

The surrogate is read against a labelled sample: every answered claim whose gold label asks for
a verdict (SciFact's annotators' SUPPORT / CONTRADICT / NOT_ENOUGH_INFO) is correct when the
answer's verdict is the one the label asks for (`ragrig.metrics.correctness`). Reported: the
ROC-AUC of self-consistency by meaning (the judge's `self_consistency`, mutual entailment under
the verifier) and of the lexical one (the modal verdict's share, `ragrig.metrics.answers`) at
separating correct from wrong answers, each with a bootstrap 95% interval (answers resampled,
seeded), and the counts. An AUC needs both classes: without them it is None, and said so.

--smoke runs the whole path on the 20-document fixture, 4 claims answered by the default
generator in at most 16 tokens (the figures mean nothing there).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common as C
from bench_suite import clone, cold_run_parts, cpu_summary, stage_seconds

# the default generator on 4 of the fixture's claims, short answers: every code path, quickly
SMOKE_ARGS = "dataset=tiny generate.max_queries=4 generate.max_tokens=16"


def _make(ws: Path, args: str | None, env: dict[str, str], log: Path) -> tuple[int, float]:
    cmd = ["make", "repro", "STAMP="]  # STAMP empty: the linked venv is never re-installed
    if args:
        cmd.append(f"ARGS={args}")
    t0 = time.perf_counter()
    with open(log, "w", encoding="utf-8") as out:
        rc = subprocess.run(
            cmd, cwd=ws, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
        ).returncode
    return rc, time.perf_counter() - t0


def auc_with_interval(
    labels: list[int], scores: list[float], resamples: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """ROC-AUC of `scores` for label 1 (ties count half), with a percentile bootstrap 95%
    interval over resampled answers; None (and why) without both classes."""
    pos = sum(labels)
    if pos == 0 or pos == len(labels):
        return {"auc": None, "why": "one class only", "n": len(labels), "positives": pos}

    def auc(idx: list[int]) -> float | None:
        p = [scores[i] for i in idx if labels[i]]
        n = [scores[i] for i in idx if not labels[i]]
        if not p or not n:
            return None
        wins = sum((a > b) + 0.5 * (a == b) for a in p for b in n)
        return wins / (len(p) * len(n))

    everyone = list(range(len(labels)))
    rng = random.Random(seed)
    draws = []
    for _ in range(resamples):
        a = auc([rng.choice(everyone) for _ in everyone])
        if a is not None:
            draws.append(a)
    draws.sort()
    lo = draws[int(0.025 * (len(draws) - 1))]
    hi = draws[int(0.975 * (len(draws) - 1))]
    return {
        "auc": round(auc(everyone), 4),
        "ci95": [round(lo, 4), round(hi, 4)],
        "n": len(labels),
        "positives": pos,
    }


def surrogate(ws: Path) -> dict[str, Any]:
    """Per labelled answer: correct or not, and both self-consistencies; their AUCs."""
    import pandas as pd

    from ragrig.metrics.answers import self_consistency
    from ragrig.metrics.correctness import expected_verdict, parse_verdict

    queries = pd.read_parquet(ws / "data/parse/queries.parquet")
    labels = dict(
        zip(queries["qid"], queries.get("claim_label", [None] * len(queries)), strict=True)
    )
    gens = pd.read_parquet(ws / "data/generate/generations.parquet").set_index("qid")
    judged = pd.read_parquet(ws / "data/judge/judgments.parquet").set_index("qid")
    rows, unlabelled, unscored = [], 0, 0
    for qid, g in gens.iterrows():
        want = expected_verdict(labels.get(qid))
        if want is None:
            unlabelled += 1
            continue
        meaning = judged.at[qid, "self_consistency"] if qid in judged.index else None
        samples = json.loads(g["samples"]) if isinstance(g["samples"], str) else []
        lexical = self_consistency(str(g["answer"]), samples)
        if meaning is None or pd.isna(meaning) or lexical is None:
            unscored += 1  # a failed answer or no valid sample: counted, never scored 0
            continue
        correct = int(parse_verdict(str(g["answer"])) == want)
        rows.append(
            (correct, float(meaning), float(lexical), int(judged.at[qid, "consistency_clusters"]))
        )
    y = [r[0] for r in rows]
    return {
        "answered": int((gens["status"] == "ok").sum()),
        "answers_scored": len(rows),
        "correct": sum(y),
        "unlabelled": unlabelled,
        "unscored": unscored,
        "by_meaning": auc_with_interval(y, [r[1] for r in rows]),
        "lexical": auc_with_interval(y, [r[2] for r in rows]),
        "mean_agreement": {
            "correct": _mean([r[1] for r in rows if r[0]]),
            "wrong": _mean([r[1] for r in rows if not r[0]]),
        },
        "mean_clusters": _mean([r[3] for r in rows]),
        "identical_samples": int(judged["consistency_identical"].sum()),
    }


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--samples", type=int, nargs="+", default=[2, 4], help="generate.consistency_samples"
    )
    p.add_argument(
        "--budgets",
        nargs="+",
        default=["none"],
        help="generate.consistency_max_tokens per point: none, answer or a number",
    )
    p.add_argument("--venv", type=Path, default=None, help="venv to link (default: this one)")
    p.add_argument("--workdir", type=Path, default=None, help="the clone and logs (default: tmp)")
    p.add_argument("--smoke", action="store_true", help="the fixture, 4 claims, short answers")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--dataset-root", type=Path, help=argparse.SUPPRESS)  # run_all's; unused
    args = p.parse_args(argv)
    if min(args.samples) < 1:
        p.error(f"--samples must be >= 1, got {args.samples}")
    bad = [b for b in args.budgets if b not in ("none", "answer") and not b.isdigit()]
    if bad or any(b == "0" for b in args.budgets):
        p.error(f"--budgets takes none, answer or a positive number, got {bad or ['0']}")
    C.setup_env()
    venv = args.venv or (C.PROJECT_ROOT / ".venv")
    if not (venv / "bin/python").exists():
        venv = Path(sys.executable).parent.parent
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-consistency-"))
    workdir.mkdir(parents=True, exist_ok=True)
    ws = clone(C.PROJECT_ROOT, workdir)
    (ws / ".venv").symlink_to(venv.resolve())
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIRTUAL_ENV")}
    base = SMOKE_ARGS if args.smoke else None
    stage_log = ws / ".ragrig" / "stage_log.jsonl"

    print("cold run (no samples) ...", flush=True)
    rc, cold_s = _make(ws, base, env, workdir / "cold.log")
    if rc != 0:
        sys.exit(f"bench_consistency: the cold run failed ({rc}): see {workdir / 'cold.log'}")
    cold_s = round(cold_s, 1)
    cold = cold_run_parts(ws)
    print(f"cold run {cold_s:.1f} s", flush=True)
    points = []
    for budget, n in [(b, n) for b in args.budgets for n in args.samples]:
        first = len(stage_log.read_text(encoding="utf-8").splitlines())
        print(f"rerun with {n} samples per answer, sample budget {budget} ...", flush=True)
        cap = "null" if budget == "none" else budget
        sampled = " ".join(
            x
            for x in (base, f"generate.consistency_samples={n}",
                      f"generate.consistency_max_tokens={cap}")
            if x
        )  # fmt: skip
        rc, rerun_s = _make(ws, sampled, env, workdir / f"samples-{n}-{budget}.log")
        if rc != 0:
            sys.exit(f"bench_consistency: the run with {n} samples failed ({rc}): see the log")
        rerun, _ = stage_seconds(stage_log, first)
        # every stage the sample count reran, against its own time in the cold run
        # rounded as reported, so that the ratio reads off the figures printed beside it
        extra = round(sum(t - cold["stages_s"].get(s, 0.0) for s, t in rerun.items()), 1)
        answered = surrogate(ws)
        per_answer = (
            (rerun.get("generate", 0.0) - cold["stages_s"].get("generate", 0.0))
            / answered["answered"]
            if answered["answered"]
            else None
        )
        point = {
            "samples": n,
            "budget": budget,
            "rerun_wall_s": round(rerun_s, 1),
            "stages_s": {k: round(v, 1) for k, v in rerun.items()},
            "reran": sorted(rerun),
            "extra_s": round(extra, 1),
            "cold_wall_s_estimated": round(cold_s + extra, 1),
            "ratio_to_cold": round((cold_s + extra) / cold_s, 3),
            "extra_generate_s_per_answer": None if per_answer is None else round(per_answer, 3),
            "surrogate": answered,
        }
        point["target_met"] = point["ratio_to_cold"] <= 1.3
        points.append(point)
        print(
            f"{n} samples, budget {budget}: +{point['extra_s']} s ({point['ratio_to_cold']}x the "
            "cold run, target "
            f"<= 1.3); stages rerun: {', '.join(point['reran'])}"
        )
        for name in ("by_meaning", "lexical"):
            a = answered[name]
            print(
                f"  self-consistency {name}: AUC {a['auc']} {a.get('ci95', a.get('why'))} over "
                f"{a['n']} answers ({a['positives']} correct)",
                flush=True,
            )
    result = {
        **C.header("consistency", ["torch", "transformers", "sentence-transformers"]),
        "machine": cpu_summary(),
        "config": {
            "samples": args.samples,
            "budgets": args.budgets,
            "make_args": base,
            "smoke": args.smoke,
        },  # fmt: skip
        "cold": {"wall_s": round(cold_s, 1), "stages_s": cold["stages_s"]},
        "points": points,
        "target_ratio": 1.3,
        "workdir": str(workdir),
    }
    C.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
