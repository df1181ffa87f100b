"""Transfer before trust: every scorer measured on one group of MTRAG's answers after fitting
on the others, one group at a time.

A threshold (and an answer model) fitted on half of a set's tasks is measured on the other half
of the same domains and responders; a team's corpus is neither. Here each group of a factor is
held out in turn:

* `domain`: the task's collection (MTRAG: clapnq, cloud, fiqa, govt);
* `responder`: the model that wrote the answer (`model_id`).

Per fold, on the answers outside the held-out group only: the answer model of a judge that
`calibrate` fits (`fit_answer_model`) is refitted, and the decision threshold is fitted by the
scorer's own rule (`threshold_rule`: prevalence or max balanced accuracy). The held-out group's
answers are then scored with that model and decided at that threshold: balanced accuracy,
Cohen's kappa, ROC-AUC and ECE there, with n. A group whose answers are all of one human class
has no balanced accuracy (None, with the reason); its other figures stand.

The judge's verdicts do not depend on its answer model except for the answer-level score
(`Verdict.answer_score`), so each answer is judged once (`JudgeScorer.verdicts`) and rescored
per fold with the fold's model: exactly what judging it again with that model would give.

Per factor the report gives every group, the macro mean and the minimum of the held-out
balanced accuracy; `holds_up` ranks the judges by the minimum (the worst group is what a team
whose data is like it would get), and says whether the pipeline's default judge is first.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from ragrig.metrics import calibration as M
from ragrig.tools.calibrate.core import CALIBRATION, HELD_OUT, Scored, metric_rows
from ragrig.tools.calibrate.mtrag import RatedAnswer

FACTORS: dict[str, Callable[[RatedAnswer], str]] = {
    "domain": lambda a: a.domain,
    "responder": lambda a: a.model_id,
}


def _key(x: Any) -> tuple[str, str]:
    return (x.task_id, x.model_id)


def rescored(scorer: Any, answers: Sequence[RatedAnswer], model: Any) -> list[Scored]:
    """The rows of `scorer` (a JudgeScorer that has judged every answer) with each verdict's
    answer score recomputed by `model` (an AnswerModel), decided as the scorer decides."""
    out = []
    for a in answers:
        verdict = scorer.verdicts[_key(a)]
        if verdict.answer_score is not None:
            verdict = dataclasses.replace(
                verdict, answer_score=model.score(a.answer, list(a.contexts))
            )
        score, reason = scorer.decide(verdict)
        status = "no_claims" if score is None else "scored"
        out.append(Scored(a.task_id, a.model_id, "", a.faithful, status, score, reason))
    return out


def _halves(rows: Sequence[Scored], held: set[tuple[str, str]]) -> list[Scored]:
    return [dataclasses.replace(r, half=HELD_OUT if _key(r) in held else CALIBRATION) for r in rows]


def fold(
    rows: Sequence[Scored],
    held: set[tuple[str, str]],
    fit: Callable,
    no_claims: str,
    n_bins: int,
) -> dict[str, Any]:
    """Fit the threshold on the rows outside `held` (by `fit`), measure on the rows in it."""
    usable = metric_rows(_halves(rows, held), no_claims)
    others = [(r, s) for r, s in usable if r.half == CALIBRATION]
    mine = [(r, s) for r, s in usable if r.half == HELD_OUT]
    threshold, _ = fit(others)
    out = M.summarise([r.label for r, _ in mine], [s for _, s in mine], threshold, n_bins)
    out["n_answers"] = len(held)
    out["n_fitted_on"] = len(others)
    return out


def transfer_report(
    factors: Sequence[str],
    answers: Sequence[RatedAnswer],
    rows_by_scorer: dict[str, list[Scored]],
    scorers: dict[str, Any],
    fits: dict[str, Callable],
    refit: set[str],
    no_claims: str,
    n_bins: int,
    default_judge: str | None,
    judges: Sequence[str],
) -> dict[str, Any]:
    """Every scorer's leave-one-group-out figures per factor (see the module docstring).
    `refit`: the scorers whose answer model is refitted per fold (their JudgeScorer holds
    every verdict); `fits`: each scorer's threshold rule."""
    from ragrig.judge.extractive import features, fit_answer_model

    unknown = sorted(set(factors) - set(FACTORS))
    if unknown:
        raise ValueError(f"unknown transfer factor(s) {unknown}; known: {sorted(FACTORS)}")
    measures = {_key(a): features(a.answer, a.contexts) for a in answers} if refit else {}
    out: dict[str, Any] = {}
    for factor in factors:
        group_of = FACTORS[factor]
        groups = sorted({group_of(a) for a in answers})
        if len(groups) < 2:
            out[factor] = {"groups": groups, "undefined": f"one {factor} only: nothing to hold out"}
            continue
        per_scorer: dict[str, Any] = {}
        for name, rows in rows_by_scorer.items():
            per_group = {}
            for g in groups:
                held = {_key(a) for a in answers if group_of(a) == g}
                try:
                    fold_rows = rows
                    if name in refit:
                        others = [a for a in answers if _key(a) not in held]
                        model = fit_answer_model(
                            [measures[_key(a)] for a in others], [a.faithful for a in others]
                        )
                        fold_rows = rescored(scorers[name], answers, model)
                    per_group[g] = fold(fold_rows, held, fits[name], no_claims, n_bins)
                except ValueError as exc:  # e.g. the other groups hold one human class only
                    per_group[g] = {
                        "n_answers": len(held),
                        "balanced_accuracy": None,
                        "undefined": {"fit": f"fitting on the other {factor}s: {exc}"},
                    }
            bas = [r["balanced_accuracy"] for r in per_group.values()]
            defined = [b for b in bas if b is not None]
            per_scorer[name] = {
                "groups": per_group,
                "balanced_accuracy_mean": statistics.fmean(defined) if defined else None,
                "balanced_accuracy_min": min(defined) if defined else None,
                "groups_undefined": [g for g, b in zip(groups, bas, strict=True) if b is None],
                "answer_model": "refitted per fold" if name in refit else "none",
            }
        ranked = sorted(
            (n for n in judges if per_scorer.get(n, {}).get("balanced_accuracy_min") is not None),
            key=lambda n: -per_scorer[n]["balanced_accuracy_min"],
        )
        out[factor] = {
            "groups": groups,
            "scorers": per_scorer,
            "holds_up": {
                "rule": "judges ranked by their worst held-out group's balanced accuracy",
                "ranking": ranked,
                "default_judge": default_judge,
                "default_is_first": bool(ranked) and ranked[0] == default_judge,
            },
        }
    return out


def format_transfer(section: dict[str, Any]) -> list[str]:
    """One line per factor and scorer: each group's held-out balanced accuracy, mean, min."""

    def f(x: Any) -> str:
        return "-" if x is None else f"{x:.3f}"

    lines = []
    for factor, rep in section.items():
        if "undefined" in rep:
            lines.append(f"leave-one-{factor}-out: not measured ({rep['undefined']})")
            continue
        lines.append(
            f"leave-one-{factor}-out (fit on the other {factor}s, decide the held-out one), "
            "balanced accuracy:"
        )
        for name, r in rep["scorers"].items():
            cells = ", ".join(_cell(g, x) for g, x in r["groups"].items())
            lines.append(
                f"  {name}: {cells}; mean {f(r['balanced_accuracy_mean'])}, "
                f"min {f(r['balanced_accuracy_min'])}"
            )
        h = rep["holds_up"]
        if h["ranking"] and h["default_judge"]:
            verdict = (
                "holds up best"
                if h["default_is_first"]
                else (f"does not hold up best: {h['ranking'][0]} does")
            )
            lines.append(f"  default judge {h['default_judge']} {verdict} (by the worst {factor})")
    return lines


def _cell(group: str, x: dict[str, Any]) -> str:
    n = x.get("n", x["n_answers"])
    if x["balanced_accuracy"] is None:
        why = (x.get("undefined") or {}).get("fit") or (x.get("undefined") or {}).get(
            "balanced_accuracy", "undefined"
        )
        return f"{group} - (n={n}: {why})"
    return f"{group} {x['balanced_accuracy']:.3f} (n={n})"
