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
