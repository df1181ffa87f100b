"""Calibration against human labels: the task split, scoring each rated answer, fitting the
decision threshold on one half and measuring on the other.

The split is fixed by the config's seed: tasks are ordered by sha256("<seed>:<task_id>") and the
first ceil(n/2) form the calibration half, the rest the held-out half. It is by task, so the
answers of one task (MTRAG: three responders) are always in the same half; `group:
conversation` keeps every turn of one conversation together too (MTRAG's 159 tasks come from
20 conversations, whose turns share passages).

The decision threshold that is reported and written into config is fitted on the calibration
half only (`fit_on` receives nothing else). The reverse direction (fit on the held-out half,
measure on the calibration half) is reported as a check of stability; its threshold is never
written anywhere.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ragrig.metrics import calibration as M
from ragrig.tools.calibrate.mtrag import RatedAnswer

CALIBRATION, HELD_OUT = "calibration", "held_out"


@dataclass(frozen=True)
class Split:
    seed: int
    calibration: frozenset[str]
    held_out: frozenset[str]

    def half(self, task_id: str) -> str:
        if task_id in self.calibration:
            return CALIBRATION
        if task_id in self.held_out:
            return HELD_OUT
        raise KeyError(f"task {task_id!r} is in neither half of the split")


CONVERSATION_SEP = "<::>"  # MTRAG task ids: "<conversation id><::><turn>"


def split_tasks(task_ids: Iterable[str], seed: int, group: str = "task") -> Split:
    """Order the groups (each task, or each conversation: the task id before `<::>`) by
    sha256("<seed>:<group>"); the tasks of the first ceil(n/2) groups calibrate."""
    ids = sorted(set(task_ids))
    if group not in ("task", "conversation"):
        raise ValueError(f"split group must be 'task' or 'conversation', got {group!r}")
    key = (lambda t: t) if group == "task" else (lambda t: t.split(CONVERSATION_SEP)[0])
    groups = sorted({key(t) for t in ids})
    if len(groups) < 2:
        raise ValueError(f"need at least 2 {group}s to split, got {len(groups)}")
    order = sorted(groups, key=lambda g: hashlib.sha256(f"{seed}:{g}".encode()).hexdigest())
    first = set(order[: math.ceil(len(order) / 2)])
    cal = frozenset(t for t in ids if key(t) in first)
    return Split(seed, cal, frozenset(ids) - cal)


@dataclass(frozen=True)
class Scored:
    """One rated answer as a scorer saw it. `status`: scored | no_claims | error | invalid;
    `score` is the scorer's own (None unless scored)."""

    task_id: str
    model_id: str
    half: str
    label: int
    status: str
    score: float | None
    reason: str = ""
    latency_ms: float = 0.0


class Scorer:
    """What calibration needs of a judge or a baseline: a score in [0, 1], or None for no
    checkable claim, for one rated answer."""

    name: str

    def __call__(self, item: RatedAnswer, question: str) -> tuple[float | None, str]:
        raise NotImplementedError


class JudgeScorer(Scorer):
    """A ragrig.judge backend, scored as the judge stage decides (ragrig.judge.decide): the
    verdict's soft score (the calibrated P(faithful), the mean claim score for a judge that gives
    claim scores, else supported / extracted claims), or 0 when a hard check of a kind in `veto`
    (the judge's judge.veto) contradicts a claim,
    so that an answer is judged faithful at a threshold t > 0 exactly when the pipeline judges it
    so, and the threshold is fitted on the decision the gate reads."""

    def __init__(self, name: str, judge: Any, veto: Any = ("number", "fabricated")):
        self.name, self.judge, self.veto = name, judge, tuple(veto)
        # (task_id, model_id) -> the verdict's answer kind, for refusal detection
        self.kinds: dict[tuple[str, str], str] = {}
        # (task_id, model_id) -> the verdict, rescored per fold by ragrig.tools.calibrate.transfer
        self.verdicts: dict[tuple[str, str], Any] = {}

    def __call__(self, item: RatedAnswer, question: str) -> tuple[float | None, str]:
        verdict = self.judge.judge(question, item.answer, list(item.contexts))
        self.kinds[(item.task_id, item.model_id)] = verdict.kind
        self.verdicts[(item.task_id, item.model_id)] = verdict
        return self.decide(verdict)

    def decide(self, verdict: Any) -> tuple[float | None, str]:
        """(score, reason) of one verdict: its soft score, or 0 when a vetoed kind of hard
        check contradicts a claim."""
        decisive = [c for c in verdict.contradictions if c[1] in self.veto]
        if verdict.soft_score is not None and decisive:
            return 0.0, "contradicted: " + "; ".join(f"{k} {d}" for _, k, d in decisive)
        return verdict.soft_score, verdict.reason


class BaselineScorer(Scorer):
    def __init__(self, name: str, baseline: Any):
        self.name, self.baseline = name, baseline

    def __call__(self, item: RatedAnswer, question: str) -> tuple[float | None, str]:
        return self.baseline.score(item.answer, list(item.contexts)), ""


def score_answers(
    scorer: Scorer, answers: Sequence[RatedAnswer], split: Split, question_mode: str
) -> list[Scored]:
    """Score every rated answer; a scorer failure is counted (error / invalid), never dropped."""
    from ragrig.judge import InvalidVerdict

    out = []
    for a in answers:
        t0 = time.perf_counter()
        try:
            score, reason = scorer(a, a.judge_question(question_mode))
            status = "no_claims" if score is None else "scored"
            if score is not None and not 0.0 <= score <= 1.0:
                status, reason, score = "invalid", f"score {score!r} outside [0, 1]", None
        except InvalidVerdict as exc:
            status, score, reason = "invalid", None, str(exc)
        except Exception as exc:  # counted as status=error
            status, score, reason = "error", None, f"{type(exc).__name__}: {exc}"
        out.append(
            Scored(
                a.task_id,
                a.model_id,
                split.half(a.task_id),
                a.faithful,
                status,
                score,
                reason,
                (time.perf_counter() - t0) * 1e3,
            )
        )
    return out


NO_CLAIMS_SCORE = {"faithful": 1.0, "unfaithful": 0.0, "exclude": None}


def metric_rows(rows: Sequence[Scored], no_claims: str) -> list[tuple[Scored, float]]:
    """(row, score used by the metrics): scored rows as they are, no_claims rows mapped by the
    config (1.0, 0.0, or left out), error/invalid rows left out (they are counted)."""
    if no_claims not in NO_CLAIMS_SCORE:
        raise ValueError(f"no_claims must be one of {sorted(NO_CLAIMS_SCORE)}, got {no_claims!r}")
    out = []
    for r in rows:
        if r.status == "scored":
            out.append((r, float(r.score)))  # type: ignore[arg-type]
        elif r.status == "no_claims" and NO_CLAIMS_SCORE[no_claims] is not None:
            out.append((r, NO_CLAIMS_SCORE[no_claims]))
    return out


def fit_on(rows: Sequence[tuple[Scored, float]]) -> tuple[float, float]:
    """Fit the decision threshold on these rows, and only these: the score maximising
    balanced accuracy."""
    return M.fit_threshold([r.label for r, _ in rows], [s for _, s in rows])


def prevalence_on(rows: Sequence[tuple[Scored, float]]) -> tuple[float, float]:
    """The decision threshold of a calibrated probability, from these rows only: their share
    of faithful answers (ragrig.metrics.calibration.prevalence_threshold)."""
    return M.prevalence_threshold([r.label for r, _ in rows], [s for _, s in rows])


THRESHOLD_RULES = {"max_balanced_accuracy": fit_on, "prevalence": prevalence_on}


def fit_answer_model_on(answers: Sequence[RatedAnswer], split: Split, half: str = CALIBRATION):
    """The answer model (ragrig.judge.extractive) fitted on the answers of one half only: the
    other half's answers and labels are never read."""
    from ragrig.judge.extractive import features, fit_answer_model

    mine = [a for a in answers if split.half(a.task_id) == half]
    return fit_answer_model(
        [features(a.answer, a.contexts) for a in mine], [a.faithful for a in mine]
    )


def _summary(rows: Sequence[tuple[Scored, float]], threshold: float, n_bins: int) -> dict:
    return M.summarise([r.label for r, _ in rows], [s for _, s in rows], threshold, n_bins)


def evaluate(
    rows: Sequence[Scored],
    no_claims: str,
    n_bins: int,
    fit: Callable[[Sequence[tuple[Scored, float]]], tuple[float, float]] = fit_on,
) -> dict[str, Any]:
    """Counts, the threshold fitted on the calibration half and every metric on the held-out
    half at that threshold; the reverse direction; threshold-free metrics on all rows."""
    usable = metric_rows(rows, no_claims)
    cal = [(r, s) for r, s in usable if r.half == CALIBRATION]
    held = [(r, s) for r, s in usable if r.half == HELD_OUT]
    threshold, fit_ba = fit(cal)  # a calibration half that cannot be fitted stops here
    try:
        reverse_threshold, reverse_fit_ba = fit(held)
        reverse = {
            "threshold": reverse_threshold,
            "fit_balanced_accuracy": reverse_fit_ba,
            "calibration": _summary(cal, reverse_threshold, n_bins),
        }
    except ValueError as exc:  # the reverse direction is a check: say why it is missing
        reverse = {"threshold": None, "undefined": str(exc), "calibration": {}}
    status = Counter(r.status for r in rows)
    no_claims_rows = [r for r in rows if r.status == "no_claims"]
    everything = M.summarise(
        [r.label for r, _ in usable], [s for _, s in usable], threshold, n_bins
    )
    return {
        "n": len(rows),
        "n_measured": len(usable),
        "status": {k: status.get(k, 0) for k in ("scored", "no_claims", "error", "invalid")},
        "no_claims": {
            "maps_to": no_claims,
            "n": len(no_claims_rows),
            "human_faithful": sum(r.label for r in no_claims_rows),
        },
        "errors": [
            {"task_id": r.task_id, "model_id": r.model_id, "status": r.status, "reason": r.reason}
            for r in rows
            if r.status in ("error", "invalid")
        ],
        "threshold": threshold,
        "calibration_fit_balanced_accuracy": fit_ba,
        "held_out": _summary(held, threshold, n_bins),
        "reverse": reverse,
        "all": {k: everything[k] for k in ("n", "n_faithful", "roc_auc", "ece")},
        "reliability_held_out": [
            b.__dict__ for b in M.reliability_bins(*_labels_scores(held), n_bins)
        ],
        "answers_per_s": (
            len(rows) / (sum(r.latency_ms for r in rows) / 1e3)
            if sum(r.latency_ms for r in rows) > 0
            else None
        ),
    }


def _labels_scores(rows: Sequence[tuple[Scored, float]]) -> tuple[list[int], list[float]]:
    return [r.label for r, _ in rows], [s for _, s in rows]
