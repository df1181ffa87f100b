"""`ragrig calibrate --labels FILE`: the run's judge measured against the team's own labels
(ragrig.dataset.labels), with the same reports as against MTRAG.

The judge's value per labelled answer is the score its decision reads (ragrig.judge.decide):
the answer-level score (`answer_support`), or 0 when a hard check of a kind in the run's
`judge.veto` contradicts a claim. The labelled questions are split in two halves by the
calibrate config's seed (sha256 order, as for MTRAG's tasks); the threshold is fitted on the
calibration half by the judge's rule (prevalence for a calibrated answer model, else maximum
balanced accuracy) and measured on the held-out half. With `--fit-weights`, the faithfulness
composite's weights too: the grid weighting ranking the calibration half best, measured on the
held-out half beside the configured ones. Beside it, the prediction-powered
estimate of the run's faithful share (ragrig.metrics.ppi) from every judged answer and the
labels, on the decision and on the score.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragrig.core.errors import RagrigError
from ragrig.tools.calibrate.config import CalibrateConfig


def _decision_score(j: dict[str, Any], veto: set[str]) -> float | None:
    support = j.get("answer_support")
    if support is None or support != support:
        return None
    kinds = {c.get("kind") for c in json.loads(j.get("contradictions") or "[]")}
    return 0.0 if kinds & veto else float(support)


def _part(j: dict[str, Any], col: str) -> float | None:
    v = j.get(col)
    return None if v is None or v != v else float(v)


def weight_grid(step: float = 0.1) -> list[dict[str, float]]:
    """Every (claims, llm, entity) weighting on a `step` grid summing to 1, claims > 0."""
    n = round(1 / step)
    return [
        {"claims": c / n, "llm": i / n, "entity": (n - c - i) / n}
        for c in range(1, n + 1)
        for i in range(0, n - c + 1)
    ]


def fit_weights(
    parts: list[dict[str, float | None]],
    labels: list[int],
    halves: list[str],
    configured: dict[str, float],
) -> dict[str, Any]:
    """The composite's weights (ragrig.judge.composite) ranking the calibration half's labelled
    answers best (ROC-AUC; ties: the weighting nearest the configured one), measured on the
    held-out half beside the configured weights."""
    from ragrig.judge.composite import composite
    from ragrig.metrics.calibration import roc_auc
    from ragrig.tools.calibrate.core import CALIBRATION, HELD_OUT

    def auc(weights: dict[str, float], half: str) -> float | None:
        ys, ss = [], []
        for p, y, h in zip(parts, labels, halves, strict=True):
            value, _ = composite(p, weights)
            if h == half and value is not None:
                ys.append(y)
                ss.append(value)
        try:
            return roc_auc(ys, ss)
        except ValueError:  # one human class in that half
            return None

    scored = []
    for w in weight_grid():
        a = auc(w, CALIBRATION)
        if a is not None:
            # rounded: a tie must not be broken by floating-point noise (then: grid order)
            distance = round(sum(abs(w[k] - configured.get(k, 0.0)) for k in w), 9)
            scored.append((-a, distance, w))
    if not scored:
        raise ValueError(
            "fitting the composite's weights needs both classes in the calibration half"
        )
    _, _, best = min(scored, key=lambda x: (x[0], x[1]))
    return {
        "rule": "the grid weighting (step 0.1, claims > 0) with the highest calibration-half "
        "ROC-AUC; ties: nearest the configured weights",
        "weights": best,
        "calibration_roc_auc": auc(best, CALIBRATION),
        "held_out_roc_auc": auc(best, HELD_OUT),
        "configured": dict(configured),
        "configured_held_out_roc_auc": auc(configured, HELD_OUT),
    }


def run_on_labels(
    cfg: CalibrateConfig,
    root: Path,
    labels_path: Path,
    data: Path,
    params: Path,
    weights: bool = False,
) -> dict[str, Any]:
    """Fit and measure the run's judge on the labels; the report (written nowhere)."""
    from ragrig.core.config import load_section
    from ragrig.core.io import read_table
    from ragrig.dataset.labels import read_labels, run_answers, run_id
    from ragrig.metrics.ppi import ppi_mean
    from ragrig.tools.calibrate import threshold_rule
    from ragrig.tools.calibrate.core import THRESHOLD_RULES, Scored, evaluate, split_tasks

    judge_cfg = load_section("judge", params)
    veto = set(judge_cfg.veto)
    generations = read_table(data / "generate" / "generations.parquet", "generations")
    judgments = read_table(data / "judge" / "judgments.parquet", "judgments")
    answers = run_answers(generations, judgments)
    labels = read_labels(labels_path, answers)
    scored = {str(j["qid"]): j for j in judgments.to_dict("records") if j["status"] == "scored"}
    split = split_tasks(labels, cfg.split.seed)
    rows = []
    for qid, lab in labels.items():
        s = _decision_score(scored[qid], veto)
        status = "no_claims" if s is None else "scored"
        rows.append(Scored(qid, "run", split.half(qid), lab["human"], status, s))
    calibrated = getattr(judge_cfg, "answer_model", None) is not None
    rule = threshold_rule(cfg, calibrated)
    try:
        result = evaluate(rows, cfg.no_claims, cfg.ece_bins, THRESHOLD_RULES[rule])
    except ValueError as exc:
        raise RagrigError(f"calibrate --labels {labels_path}: {exc}") from None
    result["threshold_rule"] = rule
    # PPI: every judged answer's value, corrected by the labelled ones
    values = {q: _decision_score(j, veto) for q, j in scored.items()}
    values = {q: v for q, v in values.items() if v is not None}
    labelled = [q for q in labels if q in values]
    alpha = cfg.ppi.alpha if cfg.ppi is not None else 0.05
    ppi: dict[str, Any] = {}
    try:
        decisions = {q: float(j["judged_faithful"]) for q, j in scored.items() if q in values}
        for kind, f in (("decision", decisions), ("score", values)):
            ppi[kind] = ppi_mean(
                list(f.values()),
                [f[q] for q in labelled],
                [labels[q]["human"] for q in labelled],
                alpha,
            )
    except ValueError as exc:
        raise RagrigError(f"calibrate --labels {labels_path}: {exc}") from None
    fitted_weights = None
    if weights:
        parts = [
            {
                "claims": _part(scored[r.task_id], "answer_support"),
                "llm": _part(scored[r.task_id], "llm_faithfulness"),
                "entity": _part(scored[r.task_id], "entity_overlap"),
            }
            for r in rows
        ]
        try:
            fitted_weights = fit_weights(
                parts,
                [r.label for r in rows],
                [r.half for r in rows],
                judge_cfg.weights.model_dump(),
            )
        except ValueError as exc:
            raise RagrigError(f"calibrate --labels {labels_path}: {exc}") from None
    return {
        "weights": fitted_weights,
        "labels": str(labels_path),
        "run_id": run_id(answers),
        "judge": {"method": judge_cfg.method, "veto": sorted(veto)},
        "counts": {
            "labels": len(labels),
            "faithful": sum(x["human"] for x in labels.values()),
            "judged_answers": len(values),
        },
        "split": {
            "seed": cfg.split.seed,
            "questions": {
                "calibration": len(split.calibration),
                "held_out": len(split.held_out),
            },
        },
        "scorer": result,
        "ppi": ppi,
    }


def format_labels_report(report: dict[str, Any]) -> list[str]:
    def f(x: Any) -> str:
        return "-" if x is None else f"{x:.3f}"

    r, c = report["scorer"], report["counts"]
    held = r["held_out"]
    lines = [
        f"{c['labels']} labels ({c['faithful']} faithful) of {c['judged_answers']} judged "
        f"answers; split by question, seed {report['split']['seed']}: "
        f"{report['split']['questions']['calibration']} calibration / "
        f"{report['split']['questions']['held_out']} held out",
        f"  {report['judge']['method']}: threshold {f(r['threshold'])} ({r['threshold_rule']}); "
        f"held out: balanced accuracy {f(held.get('balanced_accuracy'))}, kappa "
        f"{f(held.get('cohen_kappa'))}, ROC-AUC {f(held.get('roc_auc'))}, ECE {f(held.get('ece'))}"
        f" (n={held['n']})",
    ]
    w = report.get("weights")
    if w:
        shown = ", ".join(f"{k} {v:.1f}" for k, v in w["weights"].items())
        lines.append(
            f"  composite weights fitted: {shown}; held-out ROC-AUC {f(w['held_out_roc_auc'])} "
            f"(configured weights {f(w['configured_held_out_roc_auc'])})"
        )
    for kind, p in report["ppi"].items():
        lines.append(
            f"  faithful share by PPI on the judge's {kind}: {p['estimate']:.3f} "
            f"[{p['ci_low']:.3f}, {p['ci_high']:.3f}] (judge {p['judge_mean']:.3f}, correction "
            f"{p['correction']:+.3f}; labels alone {p['labels_only']['estimate']:.3f} "
            f"[{p['labels_only']['ci_low']:.3f}, {p['labels_only']['ci_high']:.3f}])"
        )
    return lines
