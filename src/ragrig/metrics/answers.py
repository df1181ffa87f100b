"""Answer-level measures: the verdict of a claim-verdict answer, token-F1, self-consistency over
sampled answers, and refusal correctness against answerability labels.

* `parse_verdict`: the answer's verdict (the `claim_verdict` prompt asks for one of SUPPORTED /
  CONTRADICTED / NOT ENOUGH INFORMATION first), as SciFact's label names, read by the one
  verdict parser of the correctness axis.
* `self_consistency(answer, samples)`: agreement of the answer and its samples with their modal
  answer. Verdict answers (any of them has a verdict): the share of all answers whose verdict
  is the most frequent one (an answer with no verdict counts as its own "no verdict" value).
  Other answers: the medoid (the answer with the highest mean token-F1 to the others; ties to
  the earliest, the main answer first) is the modal answer, and the value is the mean token-F1
  of every answer to it (itself included, 1.0). None when there is no sample to compare with.
* `refusals`: SciFact claims labelled SUPPORT / CONTRADICT are answerable, NOT_ENOUGH_INFO ones
  are not; an answer is a refusal when the judge says so (answer_kind `refusal`) or when its
  verdict is NOT ENOUGH INFORMATION. Queries with another label (MIXED, unknown) are counted
  apart, never guessed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from ragrig.metrics.correctness import CONTRADICTED, SUPPORTED, token_f1
from ragrig.metrics.correctness import NOT_ENOUGH_INFO as NEI_VERDICT
from ragrig.metrics.correctness import parse_verdict as _parse

SUPPORT, CONTRADICT, NOT_ENOUGH_INFO = "SUPPORT", "CONTRADICT", "NOT_ENOUGH_INFO"
VERDICTS = (SUPPORT, CONTRADICT, NOT_ENOUGH_INFO)
ANSWERABLE_LABELS = frozenset({SUPPORT, CONTRADICT})
UNANSWERABLE_LABELS = frozenset({NOT_ENOUGH_INFO})

_LABEL = {SUPPORTED: SUPPORT, CONTRADICTED: CONTRADICT, NEI_VERDICT: NOT_ENOUGH_INFO}


def parse_verdict(answer: str) -> str | None:
    """The answer's verdict as a claim label (SUPPORT / CONTRADICT / NOT_ENOUGH_INFO), read by
    the correctness axis's parser (`ragrig.metrics.correctness.parse_verdict`: the earliest
    verdict phrase of the answer); None when it gives none."""
    return _LABEL.get(_parse(answer))


def self_consistency(answer: str, samples: Sequence[str | None]) -> float | None:
    """Agreement of `answer` and its `samples` with their modal answer (module doc); failed
    samples (None) are left out; None when no sample remains."""
    answers = [answer, *(s for s in samples if s is not None)]
    if len(answers) < 2:
        return None
    verdicts = [parse_verdict(a) for a in answers]
    if any(v is not None for v in verdicts):
        counts = Counter(verdicts)
        return max(counts.values()) / len(answers)
    n = len(answers)
    f1 = [[1.0 if i == j else token_f1(answers[i], answers[j]) for j in range(n)] for i in range(n)]
    medoid = max(range(n), key=lambda i: (sum(f1[i]) - 1.0, -i))
    return sum(f1[medoid]) / n


def is_refusal(answer_kind: str | None, answer: str) -> bool:
    """The judge found a full refusal, or the answer's verdict is NOT ENOUGH INFORMATION."""
    return answer_kind == "refusal" or parse_verdict(answer) == NOT_ENOUGH_INFO


def answerability(label: str) -> str | None:
    """'answerable' / 'unanswerable' for a SciFact claim label, None for any other label."""
    if label in ANSWERABLE_LABELS:
        return "answerable"
    if label in UNANSWERABLE_LABELS:
        return "unanswerable"
    return None


def refusal_summary(rows: Iterable[tuple[str, bool]]) -> dict[str, Any]:
    """Counts and rates of (claim label, refused) pairs, one per judged answer.

    precision = correct refusals (on unanswerable claims) / all refusals on labelled claims;
    rate = refusals on answerable claims / answerable claims; recall = correct refusals /
    unanswerable claims. A rate with an empty denominator is None (never 0, never NaN).
    Answers of claims with another label are counted under `unlabelled` and `by_label`.
    """
    by_label: dict[str, dict[str, int]] = {}
    n = {"answerable": 0, "unanswerable": 0, "unlabelled": 0}
    refused = {"answerable": 0, "unanswerable": 0, "unlabelled": 0}
    for label, r in rows:
        kind = answerability(label) or "unlabelled"
        n[kind] += 1
        refused[kind] += bool(r)
        entry = by_label.setdefault(label, {"answers": 0, "refusals": 0})
        entry["answers"] += 1
        entry["refusals"] += bool(r)
    labelled_refusals = refused["answerable"] + refused["unanswerable"]

    def ratio(a: int, b: int) -> float | None:
        return a / b if b else None

    return {
        "refusals": labelled_refusals,
        "correct_refusals": refused["unanswerable"],
        "precision": ratio(refused["unanswerable"], labelled_refusals),
        "answerable": n["answerable"],
        "refused_answerable": refused["answerable"],
        "rate": ratio(refused["answerable"], n["answerable"]),
        "unanswerable": n["unanswerable"],
        "recall": ratio(refused["unanswerable"], n["unanswerable"]),
        "unlabelled": n["unlabelled"],
        "refusals_unlabelled": refused["unlabelled"],
        "by_label": dict(sorted(by_label.items())),
    }


# Refusals against the evidence the generator saw: an answerable claim whose gold passage reached
# the context should be answered; one whose gold passage retrieval missed cannot be answered from
# the context given, so refusing it is right; an unanswerable one should be refused.
EVIDENCE_ROWS = {
    "answerable_evidence_seen": "answer",
    "answerable_evidence_missed": "refuse",
    "unanswerable": "refuse",
}


def evidence_row(label: str, has_gold: bool, gold_in_context: bool) -> str | None:
    """The row of `EVIDENCE_ROWS` an answer belongs to: by its claim label when known, else by
    whether the query has a gold document at all; None when neither says (counted apart)."""
    kind = answerability(label)
    if kind is None and has_gold:
        kind = "answerable"
    if kind == "unanswerable":
        return "unanswerable"
    if kind == "answerable":
        return "answerable_evidence_seen" if gold_in_context else "answerable_evidence_missed"
    return None


def refusal_by_evidence(rows: Iterable[tuple[str | None, bool]]) -> dict[str, Any]:
    """Per row of `EVIDENCE_ROWS`, over (row, refused) pairs: answers, refusals, the right
    behaviour, and the share of answers that did it (None for an empty row, never 0)."""
    out: dict[str, Any] = {
        name: {"answers": 0, "refusals": 0, "right": right} for name, right in EVIDENCE_ROWS.items()
    }
    unplaced = 0
    for row, refused in rows:
        if row is None:
            unplaced += 1
            continue
        out[row]["answers"] += 1
        out[row]["refusals"] += bool(refused)
    for entry in out.values():
        n, r = entry["answers"], entry["refusals"]
        done = r if entry["right"] == "refuse" else n - r
        entry["correct"] = done / n if n else None
        entry["refusal_rate"] = r / n if n else None
    out["unplaced"] = unplaced
    return out
