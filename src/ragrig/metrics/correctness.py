"""The correctness axis of one answer: against ground truth where it exists, else surrogates.

Ground truth, in this order:

* a reference answer (a queries-table column named in the config): token-F1 is the axis value,
  exact match is reported beside it, both after SQuAD normalisation (lower case, punctuation
  and the articles a/an/the removed, whitespace collapsed);
* a SciFact claim label (SUPPORT / CONTRADICT / NOT_ENOUGH_INFO): the verdict the answer opens
  with (SUPPORTED / CONTRADICTED / NOT ENOUGH INFORMATION, any case or wording below) must match
  the label: 1 or 0. A refusal ("cannot answer", "not enough information", or an answer the judge
  classed as a refusal) is NOT_ENOUGH_INFO. An answer with no recognisable verdict is
  `no_verdict`: counted apart and scored 0 (the prompt asked for one; an answer that does not
  give it is not correct). A label `unknown` (or MIXED) is no ground truth.

Without ground truth, the four surrogates (self-consistency, coverage, clarity, external
consistency) are combined with their weights renormalised over those present; with none
present the axis is not measured for that answer.
"""

from __future__ import annotations

import re
import string
from collections import Counter

SUPPORTED, CONTRADICTED, NOT_ENOUGH_INFO, NO_VERDICT = (
    "SUPPORTED",
    "CONTRADICTED",
    "NOT_ENOUGH_INFO",
    "no_verdict",
)
VERDICTS = (SUPPORTED, CONTRADICTED, NOT_ENOUGH_INFO, NO_VERDICT)
LABEL_VERDICT = {
    "SUPPORT": SUPPORTED,
    "CONTRADICT": CONTRADICTED,
    "NOT_ENOUGH_INFO": NOT_ENOUGH_INFO,
}
SURROGATES = ("self_consistency", "coverage", "clarity", "external_consistency")

# Checked in this order at each position; the earliest match in the answer wins, so the verdict
# the answer opens with decides ("SUPPORTED. The passages do not contradict..." is SUPPORTED).
_NEI = (
    r"not[\s_]+enough[\s_]+(?:info(?:rmation)?|evidence)|insufficient\s+(?:info(?:rmation)?|"
    r"evidence)|\bnei\b|\b(?:cannot|can't|can\s+not|unable\s+to)\s+(?:be\s+)?"
    r"(?:answer(?:ed)?|determine[d]?|verif(?:y|ied)|confirm(?:ed)?|tell|say)\b|"
    r"\bno\s+(?:relevant\s+)?(?:information|evidence)\b|\bundetermined\b|\binconclusive\b"
)
_CONTRA = (
    r"\bcontradict(?:ed|s|ion|ory)?\b|\brefute[sd]?\b|\bnot\s+supported\b|\bunsupported\b|"
    r"\b(?:does|do|did)\s*(?:not|n't)\s+support\b|\bnot\s+(?:true|correct)\b|\bfalse\b|"
    r"\bincorrect\b"
)
_SUPPORT = r"\bsupport(?:ed|s|ing)?\b|\btrue\b|\bcorrect\b"
_VERDICT_RE = re.compile(
    rf"(?P<nei>{_NEI})|(?P<contra>{_CONTRA})|(?P<support>{_SUPPORT})", re.IGNORECASE
)
_GROUP = {"nei": NOT_ENOUGH_INFO, "contra": CONTRADICTED, "support": SUPPORTED}


def parse_verdict(answer: str, refusal: bool = False) -> str:
    """The verdict an answer gives: its earliest verdict phrase; else NOT_ENOUGH_INFO for a
    refusal; else `no_verdict`."""
    m = _VERDICT_RE.search(answer or "")
    if m:
        return _GROUP[m.lastgroup]
    return NOT_ENOUGH_INFO if refusal else NO_VERDICT


def expected_verdict(claim_label: str | None) -> str | None:
    """The verdict a claim label asks for; None when the label is no ground truth."""
    return LABEL_VERDICT.get(str(claim_label).strip().upper()) if claim_label else None


_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)
_CITATION = re.compile(r"\[\d+(?:\s*,\s*\d+)*\]")


def squad_normalise(text: str) -> str:
    """SQuAD v1.1 answer normalisation, citation markers ([1], [2, 3]) removed first."""
    text = _CITATION.sub(" ", text)
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, reference: str) -> float:
    return float(squad_normalise(prediction) == squad_normalise(reference))


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD token-F1 (1.0 when both normalise to nothing, 0.0 when only one does)."""
    pred = squad_normalise(prediction).split()
    ref = squad_normalise(reference).split()
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)
