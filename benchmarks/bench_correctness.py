"""Correctness against a reference: claim-level F1 (ragrig.judge.correctness) against token-F1,
measured on MTRAG's people's completeness ratings, and the negation probes.

MTRAG (reference_subset_with_human_evaluations.json): every model answer (the `reference`
responder, which is the reference itself, left out) is scored against its task's human-written
reference answer by token-F1, by claim-level precision / recall / F1 read by the shipped
verifier and by the claim score (the F1 of the mean P(support) of each side; a refusal pair read
by agreement); the correctness axis as the report computes it (ragrig.report.scorecard
.reference_axis: `report.scorecard.claim_level_measure` from `claim_level_min_tokens` words,
else token-F1), and with the measure claim_f1, beside them. Each is compared
with the mean of the annotators' completeness ratings ("1"-"4"): Spearman's rho over all
answers, and balanced accuracy at a threshold fitted on the calibration half of the tasks
(split as `ragrig calibrate` splits them, seed 0) and measured on the held-out half, against
"complete" = mean rating >= 3.

Negation probes: a SciFact claim (claims_dev) as the reference, the claim itself and its negation
(ragrig.judge.perturb.negate) as answers: the share whose claim-level F1 drops; the verdict path
(the answer opens with the flipped verdict) beside it; and each MTRAG reference with its
sentences negated, against the reference itself.

    python benchmarks/bench_correctness.py [--mtrag-root DIR] [--dataset-root SCIFACT]
        [--max-answers N] [--max-claims N] [--json PATH]
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import statistics
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import _common as C

DEFAULT_MTRAG = (C.PROJECT_ROOT / ".." / "shared" / "datasets" / "mtrag_human").resolve()
FILE = "reference_subset_with_human_evaluations.json"
TARGET_SPEARMAN_GAIN = 0.15
TARGET_NEGATION_LOSS = 0.90
# each compared with people's ratings
MEASURES = (
    "token_f1",
    "claim_f1",
    "claim_precision",
    "claim_recall",
    "soft_precision",
    "soft_recall",
    "claim_score",
    "axis_claim_f1",  # the axis with report.scorecard.claim_level_measure claim_f1
    "axis",  # the axis as the report reads it
    "mix_claim_score_token_f1",  # a diagnostic
)


def _literal(value: Any) -> Any:
    """MTRAG stores lists and dicts as Python literals inside strings."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return json.loads(value)
    return value


def _read_mtrag(root: Path) -> dict:
    path = root / FILE
    if not path.exists():
        path = root / (FILE + ".gz")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def mtrag_answers(root: Path, rating: str = "completeness") -> list[dict[str, Any]]:
    """(task, model, question, answer, reference, completeness mean) of every rated model
    answer (the reference responder left out)."""
    data = _read_mtrag(root)
    tasks = {}
    for t in data["tasks"]:
        turns = _literal(t["input"])
        question = next(x["text"] for x in reversed(turns) if x.get("speaker") == "user")
        tasks[t["task_id"]] = (question, _literal(t["targets"])[0]["text"])
    out = []
    for e in data["evaluations"]:
        if e["model_id"] == "reference":
            continue
        ann = _literal(e["annotations"])
        ratings = [float(v["value"]) for v in (ann.get(rating) or {}).values()]
        if not ratings:
            continue
        question, reference = tasks[e["task_id"]]
        out.append(
            {
                "task_id": e["task_id"],
                "model_id": e["model_id"],
                "question": question,
                "answer": e["model_response"],
                "reference": reference,
                "completeness": statistics.fmean(ratings),
            }
        )
    return out


def rater_agreement(root: Path, rating: str = "completeness") -> dict[str, Any]:
    """What one more annotator reaches: each annotator's rating of a model answer against the
    mean of the other annotators' ratings of it, Spearman over every such pair."""
    xs, ys = [], []
    for e in _read_mtrag(root)["evaluations"]:
        if e["model_id"] == "reference":
            continue
        ann = _literal(e["annotations"])
        vals = [float(v["value"]) for v in (ann.get(rating) or {}).values()]
        for i, v in enumerate(vals if len(vals) >= 2 else []):
            xs.append(v)
            ys.append(statistics.fmean(vals[:i] + vals[i + 1 :]))
    return {"pairs": len(xs), "spearman_one_vs_rest": _spearman(xs, ys)}


def _spearman(x: list[float], y: list[float]) -> float | None:
    from scipy.stats import spearmanr

    if len(x) < 3 or len(set(x)) < 2:
        return None
    return round(float(spearmanr(x, y).statistic), 4)


def _balanced(rows: list[dict], key: str, split: Any) -> dict[str, Any]:
    from ragrig.metrics.calibration import balanced_accuracy, fit_threshold, predict

    cal = [r for r in rows if r["task_id"] in split.calibration]
    held = [r for r in rows if r["task_id"] not in split.calibration]
    y = lambda rs: [int(r["completeness"] >= 3) for r in rs]  # noqa: E731
    try:
        threshold, _ = fit_threshold(y(cal), [r[key] for r in cal])
        ba = balanced_accuracy(y(held), predict([r[key] for r in held], threshold))
    except ValueError as exc:  # one class only in a half (the small fixture)
        return {"threshold": None, "balanced_accuracy_held_out": None, "why": str(exc)}
    return {"threshold": round(threshold, 4), "balanced_accuracy_held_out": round(ba, 4)}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    C.add_common_args(p)
    p.add_argument("--mtrag-root", type=Path, default=DEFAULT_MTRAG)
    p.add_argument("--max-answers", type=int, default=0, help="0: every rated model answer")
    p.add_argument("--max-claims", type=int, default=300, help="SciFact dev claims probed")
    p.add_argument("--quantize", default="auto", help="the verifier's precision")
    p.add_argument(
        "--rating",
        default="completeness",
        help="the people's rating compared with (the small fixture has faithfulness only)",
    )
    args = p.parse_args(argv)

    C.setup_env()
    threads = C.apply_threads(args.params, torch=True)
    from ragrig.core.config import load_section
    from ragrig.judge.confirm import shared_verifier
    from ragrig.judge.correctness import ReferenceCorrectness
    from ragrig.judge.perturb import negate
    from ragrig.metrics import correctness as corr
    from ragrig.report.scorecard import reference_axis
    from ragrig.tools.calibrate.core import split_tasks
    from ragrig.weights.precision import resolve_precision

    card = load_section("report", args.params).scorecard
    min_tokens = card.claim_level_min_tokens
    card_f1 = card.model_copy(update={"claim_level_measure": "claim_f1"})
    quantize = resolve_precision(args.quantize, fp32="none")
    t0 = time.perf_counter()
    verifier = shared_verifier("shipped", 192, 32, threads, quantize)
    load_s = time.perf_counter() - t0
    scorer = ReferenceCorrectness(verifier)

    # --- MTRAG: claim-level vs token-F1 against people's completeness ----------------------
    rows = mtrag_answers(args.mtrag_root, args.rating)
    if args.max_answers:
        rows = rows[: args.max_answers]
    t0 = time.perf_counter()
    read = scorer.score_all([(r["question"], r["answer"], r["reference"]) for r in rows])
    score_s = time.perf_counter() - t0
    status: dict[str, int] = {}
    modes: dict[str, int] = {}
    for r, c in zip(rows, read, strict=True):
        status[c.status] = status.get(c.status, 0) + 1
        r["token_f1"] = corr.token_f1(r["answer"], r["reference"])
        scored = c.status == "scored"
        # an answer without a claim-level reading keeps token-F1, as the report does
        for k in ("claim_precision", "claim_recall", "claim_f1", "soft_precision", "soft_recall"):
            r[k] = getattr(c, k) if scored else r["token_f1"]
        # the claim score: soft F1, a refusal pair its agreement, else token-F1
        r["claim_score"] = c.claim_score if c.claim_score is not None else r["token_f1"]
        # the axis as the report reads it, and with claim_level_measure claim_f1
        r["axis"] = reference_axis(r["answer"], r["token_f1"], asdict(c), card)[0]
        r["axis_claim_f1"] = reference_axis(r["answer"], r["token_f1"], asdict(c), card_f1)[0]
        # a diagnostic, not what the report reads: the claim score and token-F1 half and half
        r["mix_claim_score_token_f1"] = (r["claim_score"] + r["token_f1"]) / 2
        r["contradictions"] = c.contradictions
        if scored or c.status == "refusal":
            modes[c.failure_mode or "none"] = modes.get(c.failure_mode or "none", 0) + 1
    split = split_tasks((r["task_id"] for r in rows), 0)
    human = [r["completeness"] for r in rows]
    halves = {
        name: [r for r in rows if (r["task_id"] in split.calibration) == (name == "cal")]
        for name in ("cal", "held")
    }
    measures = {}
    for key in MEASURES:
        measures[key] = {
            "spearman_completeness": _spearman([r[key] for r in rows], human),
            **{
                f"spearman_{name}": _spearman([r[key] for r in h], [r["completeness"] for r in h])
                for name, h in halves.items()
            },
            **_balanced(rows, key, split),
        }

    def _gain(key: str) -> float | None:
        a = measures[key]["spearman_completeness"]
        b = measures["token_f1"]["spearman_completeness"]
        return round(a - b, 4) if a is not None and b is not None else None

    # the target is read where the report reads: the correctness axis
    gain = _gain("axis")
    gains = {k: _gain(k) for k in ("claim_f1", "claim_score", "axis_claim_f1", "axis")}

    # --- negation probes --------------------------------------------------------------------
    claims_file = args.dataset_root / "original" / "claims_dev.jsonl"
    claims = []
    if claims_file.exists():
        with open(claims_file, encoding="utf-8") as f:
            claims = [json.loads(line)["claim"] for line in f if line.strip()]
    claims = claims[: args.max_claims]
    pairs = [(c, negate(c)) for c in claims]
    pairs = [(c, n) for c, n in pairs if n]
    items = [("", c, c) for c, _ in pairs] + [("", n, c) for c, n in pairs]
    probe = scorer.score_all(items)
    orig, neg = probe[: len(pairs)], probe[len(pairs) :]

    def _lost(o: Any, n: Any) -> bool:
        """What the axis reads (the claim score) drops, or a contradiction is added."""
        return (n.claim_score or 0.0) < (
            o.claim_score or 0.0
        ) or n.contradictions > o.contradictions

    def _lost_f1(o: Any, n: Any) -> bool:
        return (n.claim_f1 or 0.0) < (o.claim_f1 or 0.0) or n.contradictions > o.contradictions

    lost = [_lost(o, n) for o, n in zip(orig, neg, strict=True)]
    lexical = ['"kind": "negation"' in n.claims for n in neg]
    verdict_lost = [
        corr.parse_verdict(f"CONTRADICTED. {n}") != corr.expected_verdict("SUPPORT")
        and corr.parse_verdict(f"SUPPORTED. {c}") == corr.expected_verdict("SUPPORT")
        for c, n in pairs
    ]
    # MTRAG references with every negatable sentence negated, against the reference itself
    from ragrig.core.text import split_sentences

    refs = list(dict.fromkeys(r["reference"] for r in rows))
    negated_refs = []
    for ref in refs:
        sents = split_sentences(ref)
        flipped = [negate(s.rstrip(".")) for s in sents]
        if any(flipped):
            text = " ".join((f + "." if f else s) for s, f in zip(sents, flipped, strict=True))
            negated_refs.append((ref, text))
    mt = scorer.score_all(
        [("", ref, ref) for ref, _ in negated_refs] + [("", n, ref) for ref, n in negated_refs]
    )
    mt_lost = [
        _lost(o, n) for o, n in zip(mt[: len(negated_refs)], mt[len(negated_refs) :], strict=True)
    ]

    def _share(xs: list[bool]) -> float | None:
        return round(sum(xs) / len(xs), 4) if xs else None

    negation = {
        "scifact_claims": len(claims),
        "negatable": len(pairs),
        "claim_level_lost": _share(lost),
        "claim_f1_lost": _share([_lost_f1(o, n) for o, n in zip(orig, neg, strict=True)]),
        "claim_level_lost_with_lexical_negation_finding": _share(
            [a and b for a, b in zip(lost, lexical, strict=True)]
        ),
        "claim_level_lost_verifier_alone": _share(
            [a and not b for a, b in zip(lost, lexical, strict=True)]
        ),
        "verdict_path_lost": _share(verdict_lost),
        "mtrag_references_negated": len(negated_refs),
        "mtrag_claim_level_lost": _share(mt_lost),
    }
    on_mtrag = args.mtrag_root.resolve() == DEFAULT_MTRAG
    result = {
        **C.header("correctness", ["torch", "scipy"]),
        "config": {
            "mtrag": str(args.mtrag_root),
            "answers": len(rows),
            "rating": args.rating,
            "tasks": {"calibration": len(split.calibration), "held_out": len(split.held_out)},
            "claim_level_min_tokens": min_tokens,
            "quantize": quantize,
            "threads": threads,
        },
        "status": dict(sorted(status.items())),
        "failure_modes": dict(sorted(modes.items())),
        "measures": measures,
        "rater_agreement": rater_agreement(args.mtrag_root, args.rating),
        "spearman_gain_axis_over_token_f1": gain,
        "spearman_gain_over_token_f1": gains,
        "negation": negation,
        "seconds": {
            "load": round(load_s, 2),
            "mtrag_scoring": round(score_s, 2),
            "answers_per_s": round(len(rows) / score_s, 2) if score_s else None,
        },
        "target": f"the correctness axis's Spearman >= token-F1's + {TARGET_SPEARMAN_GAIN}; a negated "
        f"answer loses correctness in >= {TARGET_NEGATION_LOSS} of cases",
        "target_met": (
            bool(
                gain is not None
                and gain >= TARGET_SPEARMAN_GAIN
                and (negation["claim_level_lost"] or 0) >= TARGET_NEGATION_LOSS
            )
            if on_mtrag
            else None
        ),
    }
    C.print_table(
        f"Correctness vs people's {args.rating} on {len(rows)} MTRAG answers "
        f"(BA: threshold fitted on {len(split.calibration)} tasks, measured on "
        f"{len(split.held_out)})",
        ["measure", "Spearman", "cal half", "held half", "BA held-out", "threshold"],
        [
            [
                k,
                m["spearman_completeness"],
                m["spearman_cal"],
                m["spearman_held"],
                m["balanced_accuracy_held_out"],
                m["threshold"],
            ]
            for k, m in measures.items()
        ],
    )
    ra = result["rater_agreement"]
    print(
        f"one annotator vs the others' mean: Spearman {ra['spearman_one_vs_rest']} "
        f"({ra['pairs']} pairs)"
    )
    C.print_table("Negation probes", ["probe", "value"], [[k, v] for k, v in negation.items()])
    C.write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
