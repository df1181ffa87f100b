"""Entity and number overlap: names, numbers and dates of an answer found in its context.

The 0.2 part of faithfulness in the metric contract, and the unseen-entity flag. A cheap,
model-free check (regular expressions and capitalisation):

* **names**: runs of capitalised words ("National Football League", "Phobos"), joined by
  "of"/"de"/"la"/"von"/"van" when a capitalised word follows, and words with an inner capital or
  a digit ("NASA", "mRNA", "ADAR1", "COVID-19"). A capitalised sentence opener is a name unless
  it is a stop word, a common opener ("However", "Yes") or an -ly adverb. A name is found when the
  context holds it as a whole phrase, ignoring case and a possessive "'s"; a single plain
  capitalised word also when the context holds its stem ("Antibiotic" in "antibiotics").
* **numbers and dates**: digits ("1,000", "2.5", "50%", "2008") and number words ("two",
  "twelve"), with a scale word ("5 million") applied. They compare as numbers: "1,000" equals
  "1000", "24 hours" does not match "25 hours".

It cannot see negation, relations or time: "Paris was founded in 1994" passes against "Paris was
not founded in 1994" (reference example `unseen_entity_flag`). It is a flag, not a grounding check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

_WORD = re.compile(r"[A-Za-z][\w'’\-]*|\d[\w\-]*")
_NUMBER = re.compile(
    r"(?<![\w.\-/])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?![\w\-]*[A-Za-z]\d)"
)
_SCALE = {"hundred": 1e2, "thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_SCALE_RE = re.compile(r"\s*(hundred|thousand|million|billion|trillion)\b", re.IGNORECASE)
_NUMBER_WORDS = {
    w: float(i)
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )  # fmt: skip
} | {
    "thirty": 30.0,
    "forty": 40.0,
    "fifty": 50.0,
    "sixty": 60.0,
    "seventy": 70.0,
    "eighty": 80.0,
    "ninety": 90.0,
    "dozen": 12.0,
}
_NUMBER_WORD_RE = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", re.IGNORECASE)
_JOINERS = {"of", "de", "la", "von", "van", "der", "du", "del", "al"}
# Capitalised sentence openers that are not names.
_OPENERS = {
    "however", "yes", "no", "also", "although", "based", "according", "overall", "additionally",
    "furthermore", "moreover", "therefore", "thus", "finally", "first", "second", "third", "then",
    "while", "because", "since", "when", "where", "which", "who", "what", "why", "how", "many",
    "most", "some", "several", "each", "every", "both", "either", "neither", "one", "another",
    "other", "here", "there", "instead", "still", "yet", "so", "but", "and", "or", "in", "on",
    "at", "for", "from", "with", "without", "after", "before", "during", "unlike", "like",
    "given", "using", "compared", "despite", "among", "between", "hence", "indeed", "note",
    "sorry", "unfortunately", "please", "sure", "okay", "ok", "well", "today", "currently",
    "up", "down", "about", "over", "under", "around", "approximately", "nearly", "only", "just",
    "even", "not", "this", "these", "those", "it", "its", "they", "we", "you", "i", "my", "our",
}  # fmt: skip


@lru_cache(maxsize=1)
def _stop() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN) | _OPENERS | set(_NUMBER_WORDS) | set(_SCALE)


# A list marker opening a line or sentence ("3. Let others play", "* Ranked"): no number.
_LIST_MARKER = re.compile(r"(?m)^\s*(?:\d{1,2}[.)]|[*\-•])\s+")


def _strip_possessive(word: str) -> str:
    return re.sub(r"['’]s$", "", word).strip("'’-")


def _is_marked(word: str) -> bool:
    """A word that is a name wherever it stands: an inner capital or letters mixed with digits."""
    return word[0].isalpha() and (
        any(c.isupper() for c in word[1:]) or any(c.isdigit() for c in word)
    )


def _acronym(word: str) -> bool:
    """A digit, or a capital inside the word other than after a hyphen ("IBM", "mRNA", "CH6";
    not "First-In")."""
    return word[0].isalpha() and (
        any(c.isdigit() for c in word)
        or any(c.isupper() and word[i - 1] != "-" for i, c in enumerate(word) if i)
    )


def names(text: str) -> list[str]:
    """Names of `text`, in order, without duplicates (see the module docstring)."""
    from ragrig.core.text import split_sentences, strip_citations

    out: list[str] = []
    run: list[str] = []
    pending: list[str] = []  # joiners waiting for a capitalised word

    def close() -> None:
        if run:
            name = " ".join(run)
            if name not in out:
                out.append(name)
        run.clear()
        pending.clear()

    for sentence in split_sentences(text):
        sentence = _LIST_MARKER.sub("", strip_citations(sentence))
        end = 0
        close()
        for i, m in enumerate(_WORD.finditer(sentence)):
            if sentence[end : m.start()].strip():
                close()  # punctuation between two words ends a name ("Like FICO, Vantagescore")
            end = m.end()
            raw = m.group()
            word = _strip_possessive(raw)
            if len(word) < 2:
                close()
                continue
            capital = word[0].isupper()
            if capital and i == 0 and not _is_marked(word):
                lower = word.lower()
                if lower in _stop() or lower.endswith("ly"):
                    continue
            if (capital and word[0].isalpha()) or _is_marked(word):
                run.extend(pending)
                pending.clear()
                run.append(word)
                if word != raw.strip("'’-"):
                    close()  # "NASA's Curiosity": a possessive ends the name
            elif run and word.lower() in _JOINERS and not pending:
                pending.append(word)
            else:
                close()
        close()
    return out


def numbers(text: str) -> list[float]:
    """Numeric values of `text` (digits and number words, scale words applied), in order."""
    found: list[tuple[int, float]] = []
    for m in _NUMBER.finditer(text):
        found.append((m.start(), float(m.group(1).replace(",", ""))))
    for m in _NUMBER_WORD_RE.finditer(text):
        found.append((m.start(), _NUMBER_WORDS[m.group(1).lower()]))
    out = []
    for start, value in sorted(found):
        end = _NUMBER.match(text, start) or _NUMBER_WORD_RE.match(text, start)
        scale = _SCALE_RE.match(text, end.end()) if end else None
        out.append(value * _SCALE[scale.group(1).lower()] if scale else value)
    return out


def _fmt(value: float) -> str:
    return f"{value:g}" if value != int(value) or abs(value) >= 1e15 else str(int(value))


@dataclass(frozen=True)
class EntityCheck:
    """Names and numbers of an answer, and those its context does not hold."""

    names: tuple[str, ...]
    numbers: tuple[str, ...]
    unseen_names: tuple[str, ...]
    unseen_numbers: tuple[str, ...]

    @property
    def flag(self) -> bool:
        """The unseen-entity flag: some name or number of the answer is absent from the context."""
        return bool(self.unseen_names or self.unseen_numbers)

    @property
    def overlap(self) -> float | None:
        """Share of the answer's names and numbers found in the context; None when it has none
        (no score, never 0 or NaN)."""
        total = len(self.names) + len(self.numbers)
        if not total:
            return None
        return 1 - (len(self.unseen_names) + len(self.unseen_numbers)) / total


# Trademark signs between or after the words of a name ("IBM Cloud® Kubernetes Service")
_MARKS = "®™©℠"


def _phrase_in(name: str, haystack: str) -> bool:
    gap = rf"[{_MARKS}]?\s+"
    words = [re.escape(w.strip(_MARKS)) for w in name.split()]
    pattern = r"(?<!\w)" + gap.join(words) + rf"[{_MARKS}]?(?:['’]s)?(?!\w)"
    return re.search(pattern, haystack, re.IGNORECASE) is not None


# What may stand before a word that opens its sentence or clause: markup, a list marker, a
# colon's clause
_OPENING = re.compile(r"(?:^|[.!?:;•\n]|\d[.)]|\*\*|[(\[\"“])[\s*_#\"“'‘(\[-]*$")


def opens_clause(name: str, text: str) -> bool:
    """Whether every occurrence of `name` in `text` opens a sentence or a clause (after a colon,
    a list marker or markup): a capitalised word there may be no name at all ("Ensure you are
    ...", "**Check** the ..."), so it is no hard evidence of one. A name whose first word is
    an acronym ("ALDH1", "PrP", "(LTP)", "SQL: ...") is a name wherever it stands: never an
    opener ("Enables SQL", "First-In" open with a plain word)."""
    if _acronym(name.split()[0]):
        return False
    hits = list(re.finditer(rf"(?<!\w){re.escape(name)}(?!\w)", text))
    return bool(hits) and all(_OPENING.search(text[: m.start()]) for m in hits)


def check(answer: str, context: str | list[str]) -> EntityCheck:
    """Which names and numbers of `answer` occur in `context` (one text or several passages)."""
    from ragrig.core.text import strip_citations

    ctx = context if isinstance(context, str) else "\n".join(context)
    answer = _LIST_MARKER.sub("", strip_citations(answer))
    found_numbers = set(numbers(ctx))
    answer_names = names(answer)
    answer_numbers: list[float] = []
    for v in numbers(answer):
        if v not in answer_numbers:
            answer_numbers.append(v)
    ctx_stems: set[str] | None = None

    def seen(name: str) -> bool:
        nonlocal ctx_stems
        if _phrase_in(name, ctx):
            return True
        if " " in name or _is_marked(name):
            return False
        # one plain capitalised word ("Antibiotic overuse ..."): its stem will do ("antibiotics")
        from ragrig.core.text import tokenize

        if ctx_stems is None:
            ctx_stems = set(tokenize([ctx], stopwords="none")[0])
        stem = tokenize([name], stopwords="none")[0]
        return bool(stem) and stem[0] in ctx_stems

    return EntityCheck(
        names=tuple(answer_names),
        numbers=tuple(_fmt(v) for v in answer_numbers),
        unseen_names=tuple(n for n in answer_names if not seen(n)),
        unseen_numbers=tuple(_fmt(v) for v in answer_numbers if v not in found_numbers),
    )
