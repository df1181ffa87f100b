"""Refusal detection against MTRAG's answerability labels: does a judge's answer kind (a full
`refusal`) pick out the answers to unanswerable tasks?

Two sets, each reported per judge (baselines have no answer kind):

* ``human_rated``: the rated answers of the calibration file (MTRAG tasks carry an
  `Answerability` label; 21 of 477 answers belong to UNANSWERABLE tasks). A responder may still
  answer an unanswerable task, so recall there measures the responders as much as the judge;
* ``reference_answers``: MTRAG-UN's human reference answers (`mtragun_reference_generation_
  tasks.jsonl`, 507 tasks: 285 ANSWERABLE, 97 UNANSWERABLE whose reference declines, 47 PARTIAL,
  78 UNDERSPECIFIED). Here an UNANSWERABLE task's answer is a refusal by construction, so
  precision and recall are those of the detector.

Positive = the task is UNANSWERABLE; negative = ANSWERABLE; answers of tasks with another label
(PARTIAL, UNDERSPECIFIED, CONVERSATIONAL, none) are counted apart per label, never guessed.
Predicted refusal = answer kind `refusal`; `partial_refusal` answers are counted apart (they
still make claims). An answer the judge failed on is counted as `not_judged`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragrig.core.errors import DataValidationError
from ragrig.tools.calibrate.mtrag import (
    ANSWERABLE,
    UNANSWERABLE,
    answerability_label,
    resolve_dataset_file,
)

RULE = (
    "positive: task UNANSWERABLE, negative: ANSWERABLE, other labels counted apart; predicted "
    "refusal: answer kind refusal (partial_refusal counted apart); a failed judgment is not_judged"
)


@dataclass(frozen=True)
class ReferenceAnswer:
    task_id: str
    question: str  # the conversation before the answer, `speaker: text` lines, last user turn
    last_turn: str
    contexts: tuple[str, ...]
    answer: str
    answerability: str


def _get(rec: Any, key: str, where: str, kind: type) -> Any:
    if not isinstance(rec, dict) or key not in rec:
        raise DataValidationError(f"{where}: missing field {key!r}")
    if not isinstance(rec[key], kind):
        raise DataValidationError(f"{where}: field {key!r} must be {kind.__name__}")
    return rec[key]


def load_reference_answers(path: str | Path) -> tuple[list[ReferenceAnswer], dict[str, int]]:
    """MTRAG-UN generation tasks (JSON lines, .gz or not) as reference answers with their
    answerability; bad input is a DataValidationError naming the file, line and field. Lone
    surrogates are replaced by U+FFFD, counted (`surrogates_replaced`, only when there are some)
    and warned about on stderr with the first line."""
    from ragrig.core.io import iter_lines
    from ragrig.core.text import replace_surrogates_in, surrogate_warning

    path = resolve_dataset_file(Path(path))
    out: list[ReferenceAnswer] = []
    seen: set[str] = set()
    replaced = replaced_lines = first = 0
    # line by line within the default record and inflated-size bounds, never the whole file
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataValidationError(f"{where}: not JSON: {exc}") from exc
        rec, n = replace_surrogates_in(rec)
        if n:
            replaced, replaced_lines, first = replaced + n, replaced_lines + 1, first or lineno
        tid = _get(rec, "task_id", where, str)
        where = f"{where} (task {tid!r})"
        if tid in seen:
            raise DataValidationError(f"{where}: duplicate task_id")
        seen.add(tid)
        turns = [
            (
                _get(t, "speaker", f"{where} input[{j}]", str),
                _get(t, "text", f"{where} input[{j}]", str),
            )
            for j, t in enumerate(_get(rec, "input", where, list))
        ]
        if not turns or turns[-1][0] != "user":
            raise DataValidationError(f"{where}: `input` must end with a user turn")
        targets = _get(rec, "targets", where, list)
        if not targets:
            raise DataValidationError(f"{where}: no target answer")
        contexts = tuple(
            _get(c, "text", f"{where} contexts[{j}]", str)
            for j, c in enumerate(_get(rec, "contexts", where, list))
        )
        out.append(
            ReferenceAnswer(
                task_id=tid,
                question="\n".join(f"{s}: {t}" for s, t in turns[:-1])
                + ("\n" if len(turns) > 1 else "")
                + (f"user: {turns[-1][1]}" if len(turns) > 1 else turns[-1][1]),
                last_turn=turns[-1][1],
                contexts=contexts,
                answer=_get(targets[0], "text", f"{where} targets[0]", str),
                answerability=answerability_label(rec.get("answerability"), where),
            )
        )
    if not out:
        raise DataValidationError(f"{path}: no tasks")
    counts: dict[str, int] = {"tasks": len(out)}
    for a in out:
        key = f"answerability_{a.answerability or 'none'}"
        counts[key] = counts.get(key, 0) + 1
    if replaced:
        counts["surrogates_replaced"] = replaced
        print(surrogate_warning(f"{path}:{first}", replaced, replaced_lines), file=sys.stderr)
    return out, counts


def detection(pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """(answerability label, answer kind or "" when the judge failed) pairs -> refusal
    detection counts, precision and recall (None when a denominator is 0)."""
    tp = fp = fn = tn = 0
    partial = not_judged = 0
    by_label: dict[str, dict[str, int]] = {}
    for label, kind in pairs:
        entry = by_label.setdefault(
            label or "none", {"answers": 0, "refusal": 0, "partial_refusal": 0}
        )
        entry["answers"] += 1
        if kind in ("refusal", "partial_refusal"):
            entry[kind] += 1
        if not kind:
            not_judged += 1
            continue
        if label not in (ANSWERABLE, UNANSWERABLE):
            continue
        partial += kind == "partial_refusal"
        refused = kind == "refusal"
        if label == UNANSWERABLE:
            tp += refused
            fn += not refused
        else:
            fp += refused
            tn += not refused
    return {
        "positive": UNANSWERABLE,
        "predicted": "answer kind refusal",
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "precision": tp / (tp + fp) if tp + fp else None,
        "recall": tp / (tp + fn) if tp + fn else None,
        "false_refusal_rate": fp / (fp + tn) if fp + tn else None,
        "partial_refusals_labelled": partial,
        "not_judged": not_judged,
        "by_label": dict(sorted(by_label.items())),
    }


def judge_reference_answers(
    judge: Any, answers: list[ReferenceAnswer], question_mode: str
) -> tuple[list[tuple[str, str]], list[str]]:
    """(answerability, answer kind) of each reference answer as `judge` reads it, and one
    message per failure: a judge failure gives kind "" (counted as not_judged)."""
    pairs, errors = [], []
    for a in answers:
        question = a.last_turn if question_mode == "last_turn" else a.question
        try:
            kind = judge.judge(question, a.answer, list(a.contexts)).kind
        except Exception as exc:  # counted as not_judged, named in errors
            kind = ""
            errors.append(f"task {a.task_id!r}: {type(exc).__name__}: {exc}")
        pairs.append((a.answerability, kind))
    return pairs, errors


def refusal_report(cfg: Any, root: Path, scorers: list, rated: list) -> dict[str, Any]:
    """calibration.json `refusal_detection`: per judge (scorers that record answer kinds),
    detection on the rated answers and, when configured, on MTRAG-UN's reference answers."""
    judges = [s for s in scorers if hasattr(s, "kinds")]
    reference: list[ReferenceAnswer] = []
    out: dict[str, Any] = {"rule": RULE}
    if cfg.refusal_tasks:
        path = Path(cfg.refusal_tasks)
        reference, counts = load_reference_answers(path if path.is_absolute() else root / path)
        out["reference_answers_file"] = cfg.refusal_tasks
        out["reference_answers_counts"] = counts
    out["judges"] = {}
    for s in judges:
        entry = {
            "human_rated": detection(
                (a.answerability, s.kinds.get((a.task_id, a.model_id), "")) for a in rated
            )
        }
        if reference:
            pairs, errors = judge_reference_answers(s.judge, reference, cfg.question)
            entry["reference_answers"] = {**detection(pairs), "errors": errors}
        out["judges"][s.name] = entry
    return out


def format_refusals(section: dict[str, Any]) -> list[str]:
    """Console lines: refusal detection precision/recall per judge and set."""

    def f(x: Any) -> str:
        return "-" if x is None else f"{x:.3f}"

    lines = []
    for name, sets in section.get("judges", {}).items():
        for which, d in sets.items():
            lines.append(
                f"refusal detection {name} on {which.replace('_', ' ')}: precision "
                f"{f(d['precision'])} recall {f(d['recall'])} (tp {d['tp']} fp {d['fp']} "
                f"fn {d['fn']} tn {d['tn']}; other labels and partial refusals counted apart; "
                f"not judged {d['not_judged']})"
            )
    return lines
