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
from typing import NamedTuple

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


# --- references: nuggets, absent / empty / other-language references -------------------------

REFERENCE_ABSENT, REFERENCE_EMPTY, REFERENCE_OTHER_LANGUAGE = (
    "reference_absent",
    "reference_empty",
    "reference_other_language",
)
REFERENCE_PROBLEMS = (REFERENCE_ABSENT, REFERENCE_EMPTY, REFERENCE_OTHER_LANGUAGE)


class Nugget(NamedTuple):
    """One information unit of a reference; a vital one is required information."""

    text: str
    vital: bool = True


def parse_reference(value: object) -> tuple[str | None, list[Nugget] | None]:
    """(reference text, nuggets) of one queries-table cell. A JSON list of {"text": ...,
    "vital": true|false} (vital true when absent; a bare string is a vital nugget) is a nugget
    reference: its text is the nuggets joined. Any other string is a plain reference. None for
    a missing cell (None, NaN); "" for a blank one."""
    if value is None or (isinstance(value, float) and value != value):
        return None, None
    text = str(value)
    stripped = text.strip()
    if stripped.startswith("["):
        import json

        try:
            items = json.loads(stripped)
        except json.JSONDecodeError:
            items = None
        if isinstance(items, list) and all(
            isinstance(i, str) or (isinstance(i, dict) and isinstance(i.get("text"), str))
            for i in items
        ):
            nuggets = [
                Nugget(i.strip(), True)
                if isinstance(i, str)
                else Nugget(i["text"].strip(), bool(i.get("vital", True)))
                for i in items
            ]
            nuggets = [n for n in nuggets if n.text]
            joined = " ".join(n.text if n.text[-1] in ".!?" else n.text + "." for n in nuggets)
            return joined, nuggets or None
    return stripped, None


# A few of the most frequent function words per language: a text's language is the one whose
# list covers most of its words (a cheap check, enough to tell a French reference from an
# English answer; no model).
_FUNCTION_WORDS = {
    "en": "the of and to in is that it for was on are with as be this by not or have from",
    "de": "der die und in den von zu das mit sich des auf für ist im dem nicht ein eine als",
    "fr": "le la les de des et en un une du est que pour dans qui pas sur au par ce sont",
    "es": "el la de que y en los se del las por un una para con no es al lo como",
    "it": "il di che la e un per non una in sono è del della le si con da al gli",
    "pt": "o a de que e do da em um para é com não uma os no se na por mais",
    "nl": "de het een en van in is dat op te zijn voor met niet die er als aan ook",
}
_FUNCTION_SETS = {lang: frozenset(words.split()) for lang, words in _FUNCTION_WORDS.items()}
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


def _script(ch: str) -> str:
    import unicodedata

    name = unicodedata.name(ch, "")
    head = name.split(" ")[0]
    if head in ("CJK", "HIRAGANA", "KATAKANA", "HANGUL"):
        return "cjk"
    return head.lower() if head else "other"


def language(text: str, min_words: int = 5) -> str | None:
    """A cheap guess at a text's language: its dominant script, and for Latin script the
    language whose function words cover most of its words ("latin:en"); None when too short
    to tell (fewer than `min_words` words, or no function word of any list)."""
    words = _WORD.findall(text.lower())
    if len(words) < min_words:
        return None
    scripts = Counter(_script(w[0]) for w in words)
    script = scripts.most_common(1)[0][0]
    if script != "latin":
        return script
    hits = {lang: sum(w in s for w in words) for lang, s in _FUNCTION_SETS.items()}
    best = max(hits, key=lambda k: (hits[k], k == "en"))
    return f"latin:{best}" if hits[best] else None


def reference_problem(answer: str, reference: str | None) -> str | None:
    """Why a reference cannot score this answer: absent, empty, or in another language than
    the answer (both long enough to tell); None when it can."""
    if reference is None:
        return REFERENCE_ABSENT
    if not reference.strip():
        return REFERENCE_EMPTY
    a, r = language(answer), language(reference)
    if a is not None and r is not None and a != r:
        return REFERENCE_OTHER_LANGUAGE
    return None


def answer_tokens(text: str) -> int:
    """Words of an answer after SQuAD normalisation: what decides token-F1 or claim-level F1."""
    return len(squad_normalise(text).split())


def f1(precision: float | None, recall: float | None) -> float | None:
    """Harmonic mean (0 when both are 0; None when either is unmeasured)."""
    if precision is None or recall is None:
        return None
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


# --- coverage and clarity without an LLM judge -------------------------------------------------

_WH = frozenset(
    {
        *("what", "which", "who", "whom", "whose", "when", "where", "why", "how", "whether"),
        *("is", "are", "was", "were", "do", "does", "did", "can", "could", "should", "would"),
        *("will", "shall", "may", "might", "has", "have", "had"),
    }
)
# "..., and how ...", "; what ...": a new part of a multi-part question
_PART_SPLIT = re.compile(
    r"\?\s*|;\s*|,?\s+(?:and|or|also|plus)\s+(?=(?:what|which|who|whom|whose|when|where|why|how|"
    r"whether|is|are|was|were|do|does|did|can|could|should|would|will)\b)",
    re.IGNORECASE,
)


def question_parts(question: str) -> list[str]:
    """The parts of a multi-part question: split at question marks, semicolons, and "and" /
    "or" / "also" followed by a question word ("What is X and how does Y work?" -> 2 parts)."""
    parts = [p.strip(" ,.:") for p in _PART_SPLIT.split(question or "")]
    return [p for p in parts if p]


def coverage_by_parts(question: str, answer: str, min_share: float = 0.5) -> float | None:
    """Share of the question's parts the answer addresses: a part is addressed when the answer
    holds at least `min_share` of its content words (stemmed, stop words and question words
    out). None when no part has a content word (nothing to cover)."""
    from ragrig.core.text import tokenize

    parts = question_parts(question)
    words = [set(t) - _WH for t in tokenize(parts)] if parts else []
    words = [w for w in words if w]
    if not words:
        return None
    have = set(tokenize([answer])[0]) if answer.strip() else set()
    return sum(len(w & have) / len(w) >= min_share for w in words) / len(words)


_VOWELS = re.compile(r"[aeiouy]+")


def syllables(word: str) -> int:
    """English syllables by vowel groups, a silent final e not counted; at least 1."""
    w = word.lower()
    n = len(_VOWELS.findall(w))
    if w.endswith("e") and not w.endswith(("le", "ee")) and n > 1:
        n -= 1
    return max(n, 1)


# Sentence length that reads easily: up to CLEAR_SENTENCE_WORDS words scores 1, falling linearly
# to 0 at LONG_SENTENCE_WORDS (plain-language guidance puts the average near 15-20 words).
CLEAR_SENTENCE_WORDS, LONG_SENTENCE_WORDS = 20.0, 40.0


def clarity_parts(text: str) -> dict[str, float] | None:
    """The measurable parts of clarity, each 0-1: `sentence_length` (mean words a sentence,
    mapped from CLEAR_SENTENCE_WORDS..LONG_SENTENCE_WORDS to 1..0), `repetition` (1 - the share
    of word trigrams repeating an earlier one) and `readability` (Flesch reading ease clipped to
    0-100, over 100). None for a text with no word."""
    from ragrig.core.text import split_sentences

    sentences = [s for s in split_sentences(strip_citations_text(text)) if _WORD.search(s)]
    words = [w.lower() for s in sentences for w in _WORD.findall(s)]
    if not words:
        return None
    per_sentence = len(words) / len(sentences)
    span = LONG_SENTENCE_WORDS - CLEAR_SENTENCE_WORDS
    length = min(max((LONG_SENTENCE_WORDS - per_sentence) / span, 0.0), 1.0)
    trigrams = list(zip(words, words[1:], words[2:], strict=False))
    repeated = len(trigrams) - len(set(trigrams))
    repetition = 1.0 - repeated / len(trigrams) if trigrams else 1.0
    flesch = 206.835 - 1.015 * per_sentence - 84.6 * sum(map(syllables, words)) / len(words)
    return {
        "sentence_length": length,
        "repetition": repetition,
        "readability": min(max(flesch, 0.0), 100.0) / 100.0,
    }


def clarity(text: str) -> float | None:
    """Clarity 0-1: the mean of clarity_parts; None for a text with no word."""
    parts = clarity_parts(text)
    return None if parts is None else sum(parts.values()) / len(parts)


def strip_citations_text(text: str) -> str:
    """The text with citation markers ([1], [2, 3]) removed."""
    return _CITATION.sub("", text or "")
