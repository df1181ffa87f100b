"""The trained claim verifier: training cost, scoring speed, judge throughput, and how its
answer-level aggregations fare against MTRAG's human faithfulness ratings.

* training: read from the train_verifier stage's manifest (`--model`, default
  data/train_verifier: pairs, seconds, pairs/s), or, with `--train`, trained now on
  `--dataset-root`'s training claims with params.yaml's `train_verifier` section (`--max-pairs`
  caps the pairs; the smoke run trains a few pairs of the tiny fixture);
* scoring: pairs/s of the cross-encoder alone on training pairs;
* judge: answers/s of `judge=verifier` (conf/judge/verifier.yaml) over every rated MTRAG answer
  (question: the conversation) as the judge stage runs it (every answer's pairs prefetched in
  one length-sorted run), side by side with each answer alone (all its claims in one batch) and
  with other judge settings (`--variant`, default fp32 and int8: largest P(support) difference,
  claims whose verdict changed), rounds in alternating order (`--repeats`);
* aggregations: the answer-level score as the mean claim P(support) (`mean_p`, what calibration
  uses), the supported share (`share`), the weakest claim (`min_p`), the mean P(support)
  blended with the entity/number overlap (`mean_p_entity`, 0.8/0.2), and with the naive
  content-word overlap of the whole answer (`mean_p_lexical`, 0.5/0.5). Each gets its threshold
  fitted on MTRAG's calibration half only (`ragrig.tools.calibrate`'s split and fit) and is measured on
  the held-out half; the aggregation to prefer is the one best on the *calibration* half.

    python benchmarks/bench_verifier.py [--model DIR | --train] [--mtrag-root DIR]
        [--max-answers N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _common as C

DEFAULT_MTRAG_ROOT = (C.PROJECT_ROOT / ".." / "shared" / "datasets" / "mtrag_human").resolve()
MTRAG_FILE = "reference_subset_with_human_evaluations.json"
TARGETS = {"balanced_accuracy_held_out": 0.85, "roc_auc_held_out": 0.90, "answers_per_s": 10.0}
AGGREGATIONS = ("mean_p", "share", "min_p", "mean_p_entity", "mean_p_lexical")


def aggregate(verdict, how: str, lexical: float | None = None) -> float | None:
    """The answer-level score of a verdict; `lexical` is the naive content-word overlap of the
    whole answer with all passages (ragrig.tools.calibrate.baselines), blended half and half by
    `mean_p_lexical` (fixed weights: nothing is fitted but the threshold)."""
    if verdict.score is None:
        return None
    scores = verdict.claim_scores or ()
    if how == "share":
        return verdict.score
    if how == "min_p":
        return min(scores)
    mean = sum(scores) / len(scores)
    if how == "mean_p_entity" and verdict.entity_overlap is not None:
        return 0.8 * mean + 0.2 * verdict.entity_overlap
    if how == "mean_p_lexical" and lexical is not None:
        return 0.5 * mean + 0.5 * lexical
    return mean


def _max_diff(a: list, b: list) -> float:
    """The largest difference of a claim's P(support) between two runs over the same answers."""
    diffs = [
        abs(x - y)
        for va, vb in zip(a, b, strict=True)
        for x, y in zip(va.claim_scores or (), vb.claim_scores or (), strict=True)
    ]
    return round(max(diffs, default=0.0), 6)


def _changed(a: list, b: list) -> int:
    """Claims supported in one run and not in the other."""
    return sum(len(set(va.supported) ^ set(vb.supported)) for va, vb in zip(a, b, strict=True))


def _overrides(variant: str) -> dict:
    """'quantize=int8;windows_per_claim=1' -> {'quantize': 'int8', 'windows_per_claim': 1}."""
    import yaml

    out = {}
    for part in filter(None, (x.strip() for x in variant.split(";"))):
        key, sep, value = part.partition("=")
        if not sep:
            raise SystemExit(f"bench_verifier: variant part {part!r} is not key=value")
        out[key.strip()] = yaml.safe_load(value)
    return out


def _trained(args, threads: int, tmp: Path) -> tuple[Path, dict]:
    from ragrig.core.config import load_section, validate_section
    from ragrig.train_verifier.train import run_stage

    if not args.train:
        manifest = json.loads((args.model / "manifest.json").read_text(encoding="utf-8"))
        return args.model, {"source": str(args.model), **manifest}
    # the benchmark trains whatever the params say about the switch (off by default)
    cfg = load_section("train_verifier", args.params).model_copy(update={"enabled": True})
    if args.max_pairs is not None:
        cfg = cfg.model_copy(update={"max_pairs": args.max_pairs})
    original = args.dataset_root / "original"
    sentences = next(
        (f for f in ("scifact_hf_export_csv.zip", "sentences.jsonl") if (original / f).exists()),
        None,
    )
    if sentences is None:
        raise SystemExit(f"bench_verifier: {original} holds no abstract sentence source")
    dataset = validate_section(
        "dataset",
        {
            "name": "bench",
            "root": str(args.dataset_root),
            "claims": {
                "train": "original/claims_train.jsonl",
                "sentences": f"original/{sentences}",
            },
        },
    )
    out = tmp / "train_verifier"
    manifest = run_stage(cfg, dataset, out, threads)
    return out, {"source": "trained now", **manifest}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    C.add_common_args(p)
    p.add_argument("--model", type=Path, default=C.PROJECT_ROOT / "data" / "train_verifier")
    p.add_argument("--train", action="store_true", help="train now instead of reading --model")
    p.add_argument("--max-pairs", type=int, default=None, help="with --train: cap the pairs")
    p.add_argument("--mtrag-root", type=Path, default=DEFAULT_MTRAG_ROOT)
    p.add_argument("--max-answers", type=int, default=None, help="first N rated answers only")
    p.add_argument("--score-pairs", type=int, default=256, help="pairs timed for scoring speed")
    p.add_argument(
        "--variant",
        action="append",
        default=None,
        help="judge settings timed beside the configured ones, 'key=value;key=value' over "
        "conf/judge/verifier.yaml (repeatable; default: quantize=none and quantize=int8)",
    )
    p.add_argument("--repeats", type=int, default=1, help="rounds of every variant, alternating")
    args = p.parse_args(argv)
    if args.variant is None:
        args.variant = ["quantize=none", "quantize=int8"]
    C.setup_env()
    threads = C.apply_threads(args.params, torch=True)

    import yaml

    from ragrig.core.config import validate_section
    from ragrig.judge.verifier import VerifierJudge
    from ragrig.judge.verifier_model import Verifier
    from ragrig.tools.calibrate.core import Scored, evaluate, split_tasks
    from ragrig.tools.calibrate.mtrag import load_mtrag_human

    with tempfile.TemporaryDirectory(prefix="ragrig-verifier-") as tmp:
        model_dir, manifest = _trained(args, threads, Path(tmp))
        if not manifest.get("trained", False):
            print(f"bench_verifier: no model ({manifest.get('reason')})", file=sys.stderr)
            return 2
        jcfg = validate_section(
            "judge",
            yaml.safe_load((C.PROJECT_ROOT / "conf/judge/verifier.yaml").read_text("utf-8")),
        ).model_copy(update={"model": str(model_dir), "threads": threads})
        verifier = Verifier(model_dir, jcfg.max_length, jcfg.batch_size, threads)
        pairs_file = model_dir / "pairs.jsonl"
        rows = [
            json.loads(x) for x in pairs_file.read_text("utf-8").splitlines()[: args.score_pairs]
        ]
        pairs = [(r["claim"], r["evidence"]) for r in rows]
        t0 = time.perf_counter()
        verifier.support(pairs)
        score_s = time.perf_counter() - t0
        judge = VerifierJudge.from_config(jcfg)

        mtrag = args.mtrag_root / f"{MTRAG_FILE}.gz"
        rated = load_mtrag_human(mtrag if mtrag.exists() else args.mtrag_root / MTRAG_FILE, 3.0)
        answers = rated.answers[: args.max_answers] if args.max_answers else rated.answers
        split = split_tasks((a.task_id for a in rated.answers), 13, "task")
        items = [(a.judge_question("conversation"), a.answer, list(a.contexts)) for a in answers]
        # side by side on the same answers: each answer alone (all its claims in one batch), the
        # judge stage's path (every answer's pairs prefetched in one length-sorted run), and the
        # same with the int8 verifier
        judge.verifier.support(pairs[:8])  # warm up: not the first pass's cost alone
        t0 = time.perf_counter()
        alone = [judge.judge(*item) for item in items]
        alone_s = time.perf_counter() - t0
        # the variants (the configured judge first) take turns, round by round in alternating
        # order, each prefetching every answer's pairs as the judge stage does
        judges = {"configured": judge}
        overrides = {v: _overrides(v) for v in args.variant}
        for v, update in overrides.items():
            judges[v] = VerifierJudge.from_config(jcfg.model_copy(update=update))
            judges[v].verifier.support(pairs[:8])
        times: dict[str, list[float]] = {name: [] for name in judges}
        npairs: dict[str, int] = {}
        outputs: dict[str, list] = {}
        for r in range(args.repeats):
            for name in judges if r % 2 == 0 else list(judges)[::-1]:
                t0 = time.perf_counter()
                npairs[name] = judges[name].prefetch(items)
                outputs[name] = [judges[name].judge(*item) for item in items]
                times[name].append(time.perf_counter() - t0)
        verdicts = outputs["configured"]
        judge_s = statistics.median(times["configured"])

    from ragrig.weights.precision import resolve_precision

    result = {
        **C.header("verifier", ["torch", "transformers", "sentence-transformers"]),
        "config": {
            "model": manifest["source"],
            "mtrag_root": str(args.mtrag_root),
            "answers": len(answers),
            "judge": jcfg.model_dump(),
            # what `quantize: auto` is on this CPU (ragrig.weights.precision): the variants differ from it
            "quantize_resolved": resolve_precision(jcfg.quantize, fp32="none"),
        },
        "training": {
            k: manifest.get(k)
            for k in (
                "pairs",
                "labels",
                "kinds",
                "claims",
                "claims_dropped_held_out",
                "train_seconds",
                "pairs_per_s",
                "train_loss",
                "weights_sha256",
                "threads",
            )
        },
        "scoring": {
            "pairs": len(pairs),
            "seconds": round(score_s, 3),
            "pairs_per_s": round(len(pairs) / score_s, 1) if score_s else None,
        },
        "judge": {
            "answers": len(answers),
            "seconds": round(judge_s, 2),
            "answers_per_s": round(len(answers) / judge_s, 2) if judge_s else None,
            "claims": sum(len(v.extracted) for v in verdicts),
            "status": {s: sum(v.outcome == s for v in verdicts) for s in ("scored", "no_claims")},
            "per_answer_batches": {
                "seconds": round(alone_s, 2),
                "answers_per_s": round(len(answers) / alone_s, 2) if alone_s else None,
                "max_abs_diff": _max_diff(alone, verdicts),
            },
            "pairs": npairs["configured"],
            "runs_s": [round(t, 2) for t in times["configured"]],
            "variants": {
                name: {
                    "overrides": overrides[name],
                    "pairs": npairs[name],
                    "runs_s": [round(t, 2) for t in times[name]],
                    "answers_per_s": round(len(answers) / statistics.median(times[name]), 2),
                    "x_configured": round(judge_s / statistics.median(times[name]), 2),
                    "max_abs_diff": _max_diff(outputs[name], verdicts),
                    "claims_changed": _changed(outputs[name], verdicts),
                }
                for name in judges
                if name != "configured"
            },
        },
        "aggregations": {},
    }
    from ragrig.tools.calibrate.baselines import NaiveOverlap

    naive = NaiveOverlap()
    lexical = [naive.score(a.answer, list(a.contexts)) for a in answers]
    for how in AGGREGATIONS:
        scored = [
            Scored(
                a.task_id,
                a.model_id,
                split.half(a.task_id),
                a.faithful,
                "no_claims" if v.score is None else "scored",
                aggregate(v, how, lex),
            )
            for a, v, lex in zip(answers, verdicts, lexical, strict=True)
        ]
        try:
            r = evaluate(scored, "faithful", 10)
        except ValueError as exc:
            result["aggregations"][how] = {"undefined": str(exc)}
            continue
        result["aggregations"][how] = {
            "threshold": round(r["threshold"], 4),
            "balanced_accuracy_calibration": round(r["calibration_fit_balanced_accuracy"], 4),
            "balanced_accuracy_held_out": r["held_out"].get("balanced_accuracy"),
            "balanced_accuracy_reverse": r["reverse"]["calibration"].get("balanced_accuracy"),
            "roc_auc_held_out": r["held_out"].get("roc_auc"),
            "cohen_kappa_held_out": r["held_out"].get("cohen_kappa"),
            "ece_held_out": r["held_out"].get("ece"),
            "roc_auc_all": r["all"].get("roc_auc"),
        }
    ok = {k: v for k, v in result["aggregations"].items() if "undefined" not in v}
    best = max(ok, key=lambda k: ok[k]["balanced_accuracy_calibration"]) if ok else None
    result["preferred_aggregation"] = best
    if best is not None and args.mtrag_root.resolve() == DEFAULT_MTRAG_ROOT:
        b = ok[best]
        result["target_met"] = bool(
            (b["balanced_accuracy_held_out"] or 0) >= TARGETS["balanced_accuracy_held_out"]
            and (b["roc_auc_held_out"] or 0) >= TARGETS["roc_auc_held_out"]
            and (result["judge"]["answers_per_s"] or 0) >= TARGETS["answers_per_s"]
        )
    else:
        result["target_met"] = None
    t = result["training"]
    print(
        f"training: {t['pairs']} pairs in {t['train_seconds']} s ({t['pairs_per_s']} pairs/s); "
        f"scoring {result['scoring']['pairs_per_s']} pairs/s; judge "
        f"{result['judge']['answers_per_s']} answers/s over {len(answers)} MTRAG answers "
        f"(each answer alone {result['judge']['per_answer_batches']['answers_per_s']})"
    )
    C.print_table(
        "judge variants (median of the rounds; verdicts against the configured judge's)",
        ["variant", "pairs", "answers/s", "x configured", "max |dp|", "claims changed"],
        [
            [
                k,
                v["pairs"],
                v["answers_per_s"],
                v["x_configured"],
                v["max_abs_diff"],
                v["claims_changed"],
            ]
            for k, v in result["judge"]["variants"].items()
        ],
        digits=3,
    )
    C.print_table(
        "answer-level aggregation (threshold fitted on the calibration half)",
        ["aggregation", "BA cal", "BA held-out", "BA reverse", "AUC held-out", "kappa", "ECE"],
        [
            [
                k,
                v.get("balanced_accuracy_calibration"),
                v.get("balanced_accuracy_held_out"),
                v.get("balanced_accuracy_reverse"),
                v.get("roc_auc_held_out"),
                v.get("cohen_kappa_held_out"),
                v.get("ece_held_out"),
            ]
            for k, v in result["aggregations"].items()
        ],
        digits=3,
    )
    C.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
