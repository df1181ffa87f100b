"""Text utilities shared by BM25, generators and judges: tokenisation and sentence splitting,
the checks of text that enters ragrig (lone surrogates replaced, integer fields read strictly,
ids that TREC files can hold) and the capped lists every message that names items uses."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from ragrig.core.errors import DataValidationError

REPLACEMENT = "\ufffd"
# A lone surrogate: a code point of U+D800-U+DFFF left in a str (a JSON escape such as "\ud83d"
# without its pair, a file name read with surrogateescape). UTF-8 cannot encode one, so hashing,
# writing or tokenising the text would raise.
_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_surrogates(text: str) -> tuple[str, int]:
    """`text` with every lone surrogate replaced by U+FFFD, and how many were replaced.

    Text that UTF-8 can encode (nearly all of it) is returned as it is, after one encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.subn(REPLACEMENT, text)
    return text, 0


def replace_surrogates_in(value: Any) -> tuple[Any, int]:
    """A JSON value (str, or lists and objects of them, keys included) with every lone surrogate
    replaced by U+FFFD, and how many were replaced; other values are returned as they are."""
    if isinstance(value, str):
        return replace_surrogates(value)
    if isinstance(value, list):
        out, total = [], 0
        for item in value:
            item, n = replace_surrogates_in(item)
            out.append(item)
            total += n
        return out, total
    if isinstance(value, dict):
        pairs, total = [], 0
        for key, item in value.items():
            key, n = replace_surrogates_in(key)
            item, m = replace_surrogates_in(item)
            pairs.append((key, item))
            total += n + m
        return dict(pairs), total
    return value, 0


def surrogate_warning(where: str, count: int, lines: int = 1) -> str:
    """The warning a reader prints when it replaced `count` lone surrogates, first at `where`
    (`file:line`), on `lines` lines."""
    more = f" on {lines} lines, the first here" if lines > 1 else ""
    return f"ragrig: warning: {where}: {count} lone surrogate(s) replaced by U+FFFD{more}"


# A message that names items (ids, lines, files) shows this many of them, then how many more: a
# corpus with one id on every line would otherwise give an error line of millions of characters.
SHOWN = 3


def sample(
    items: Iterable[Any],
    shown: int = SHOWN,
    form: Callable[[Any], str] = str,
    total: int | None = None,
) -> str:
    """At most `shown` of `items`, each written by `form`, then how many more:
    `"3, 7, 9, … and 39 more"`. Reads `items` through (to count them) without keeping them;
    `total` is the count when `items` holds only the first few of them (a manifest's sample)."""
    head: list[str] = []
    n = 0
    for item in items:
        if n < shown:
            head.append(form(item))
        n += 1
    n = n if total is None else total
    more = f", … and {n - shown} more" if n > shown else ""
    return ", ".join(head) + more


def counted(
    items: Iterable[Any],
    noun: str,
    plural: str | None = None,
    shown: int = SHOWN,
    form: Callable[[Any], str] = str,
) -> str:
    """How many `items` there are and at most `shown` of them:
    `counted([3, 7, 9, ...], "line")` is `"42 lines (3, 7, 9, … and 39 more)"`; one item is
    `"1 line (3)"`; `plural` when the noun does not take an "s" ("query", "queries")."""
    items = items if isinstance(items, list | tuple) else list(items)
    word = noun if len(items) == 1 else (plural or noun + "s")
    return f"{len(items)} {word} ({sample(items, shown, form)})" if items else f"0 {word}"


def id_problem(value: str) -> str | None:
    """What keeps `value` from being an id that TREC files (whitespace-separated fields, read by
    C programs) and ragrig's tables hold as it is, or None when nothing does: empty, whitespace
    of any script (a no-break space included) or a control character (NUL, DEL, C1)."""
    if not value:
        return "is empty"
    for ch in value:
        if ch.isspace():  # what the regex \s and str.split() take as whitespace too
            return f"holds whitespace ({ch!r})"
        if unicodedata.category(ch) == "Cc":
            return f"holds a control character ({ch!r})"
    return None


# Integer and number fields of input files: ASCII digits only. Python's int() and float() also
# take "1_0" (10), full-width or other Unicode digits ("２" is 2) and surrounding whitespace.
_UNSIGNED_INT = re.compile(r"[0-9]+")
_SIGNED_INT = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def strict_int(value: str, where: str, what: str = "value", *, signed: bool = False) -> int:
    """`value` as an integer when it is ASCII digits (after one optional + or - when `signed`),
    else a DataValidationError naming `where` (`file:line`), the field and the value."""
    if not (_SIGNED_INT if signed else _UNSIGNED_INT).fullmatch(value):
        rule = "ASCII digits with an optional sign" if signed else "ASCII digits only"
        raise DataValidationError(f"{where}: {what} {value!r} is not an integer ({rule})")
    return int(value)


def strict_float(value: str, where: str, what: str = "value") -> float:
    """`value` as a float when it is a finite decimal number in ASCII ("-1.5", "2e-3"), else a
    DataValidationError naming `where`, the field and the value (no "nan", "inf", "1_0")."""
    if not _NUMBER.fullmatch(value):
        raise DataValidationError(
            f"{where}: {what} {value!r} is not a number (ASCII decimal, e.g. -1.5 or 2e-3)"
        )
    number = float(value)
    if not math.isfinite(number):  # "1e999"
        raise DataValidationError(f"{where}: {what} {value!r} is not a finite number")
    return number


_CITE = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")
# Citation markers opening a segment: "[1]", "[2][3]", "[1, 2]".
_LEADING_CITES = re.compile(r"^(?:\s*\[\d+(?:\s*,\s*\d+)*\])+")


@lru_cache(maxsize=1)
def _segmenter():
    import pysbd

    # clean=False keeps the text verbatim, so segments map back to character offsets.
    return pysbd.Segmenter(language="en", clean=False, char_span=False)


# Abbreviations pySBD ends a sentence at: a segment ending in one never ends a sentence when the
# next opens with a digit, a lower-case letter or a bracket ("approx. 5 mg", "Eq. 3", "Tab. 2");
# "cf.", "ca." and "approx." never end one.
_ABBREV_END = re.compile(
    r"\b(?:approx|ca|cf|resp|eqs?|refs?|tabs?|suppl|vols?|figs|ch|sect|nos?)\.\s*$", re.IGNORECASE
)
_ABBREV_ALWAYS = re.compile(r"\b(?:approx|ca|cf)\.\s*$", re.IGNORECASE)


def _continues(previous: str, segment: str) -> bool:
    if not _ABBREV_END.search(previous):
        return False
    head = segment.lstrip()[:1]
    return (
        bool(_ABBREV_ALWAYS.search(previous))
        or head.isdigit()
        or head.islower()
        or head in ("(", "[")
    )


# pySBD's cost grows with the square of its input (each abbreviation rule rescans the whole
# string): a text longer than this is segmented block by block, each block ending at the last
# sentence-like boundary before the limit, so a 1 MB answer costs what a thousand short ones do.
SEGMENT_BLOCK_CHARS = 4000
_BOUNDARY = re.compile(r"[.!?][\"')\]]*\s+|\n\s*")


def _blocks(text: str, limit: int = SEGMENT_BLOCK_CHARS) -> list[str]:
    """`text` cut into consecutive pieces of at most `limit` characters (joined, they are
    `text`), each ending after the last sentence end or newline before the limit, else after
    the last space, else at the limit."""
    out, start = [], 0
    while len(text) - start > limit:
        window = text[start : start + limit]
        cut = 0
        for m in _BOUNDARY.finditer(window):
            cut = m.end()
        if cut == 0:
            cut = window.rfind(" ") + 1
        if cut <= 0:
            cut = limit
        out.append(text[start : start + cut])
        start += cut
    out.append(text[start:])
    return out


def _segments(text: str) -> list[str]:
    """pySBD's segments of `text`, in order, block by block (SEGMENT_BLOCK_CHARS)."""
    seg = _segmenter()
    return [s for block in _blocks(text) if block.strip() for s in seg.segment(block)]


@lru_cache(maxsize=8192)
def sentence_spans(text: str) -> tuple[tuple[int, int], ...]:
    """(start, end) character offsets of each sentence of `text`, whitespace trimmed.

    Segmentation is pySBD's rule set (abbreviations such as "et al.", "e.g.", "Fig. 2",
    "Dr.", decimals), with one repair for citations: a citation marker that opens a segment
    ("... fever. [1] It ...") belongs to the sentence before it, and a segment that opens with
    a citation followed by a lower-case word ("Smith et al. [3] showed ...") was never a new
    sentence. Cached by text: contexts recur across answers."""
    if not text.strip():
        return ()
    spans: list[list[int]] = []
    pos = 0
    for seg in _segments(text):
        start = text.find(seg, pos) if seg else -1
        if start < 0:  # a segment not found verbatim: the rest stays one sentence
            break
        if text[pos:start].strip():  # text the segmenter skipped is never dropped
            spans.append([pos, start])
        end = start + len(seg)
        pos = end
        lead = _LEADING_CITES.match(seg)
        if spans and lead:
            rest = seg[lead.end() :].lstrip()
            if not rest or rest[0].islower():
                spans[-1][1] = end  # mid-sentence citation: one sentence
                continue
            spans[-1][1] = start + lead.end()  # the citation closes the sentence before
            start += lead.end()
        spans.append([start, end])
    if text[pos:].strip():  # nothing returned (pySBD #126) or a segment not found
        spans.append([pos, len(text)])
    merged: list[list[int]] = []
    for span in spans:
        if merged and _continues(text[merged[-1][0] : merged[-1][1]], text[span[0] : span[1]]):
            merged[-1][1] = span[1]
        else:
            merged.append(span)
    spans = merged
    out = []
    for start, end in spans:
        chunk = text[start:end]
        lstrip = len(chunk) - len(chunk.lstrip())
        rstrip = len(chunk) - len(chunk.rstrip())
        if end - rstrip > start + lstrip:
            out.append((start + lstrip, end - rstrip))
    return tuple(out)


def split_sentences(text: str) -> list[str]:
    """The sentences of `text` (see `sentence_spans`), whitespace trimmed."""
    return [text[a:b] for a, b in sentence_spans(text)]


def strip_citations(text: str) -> str:
    """Remove [n] / [n, m] citation markers."""
    return _CITE.sub("", text).strip()


def cited_numbers(text: str) -> list[int]:
    """Every passage number cited as [n] or [n, m], in order of appearance."""
    return [int(n) for m in _CITE.finditer(text) for n in re.findall(r"\d+", m.group())]


_TOKEN = re.compile(r"(?u)\b\w\w+\b")


@lru_cache(maxsize=4)
def _stopwords(name: str) -> frozenset[str]:
    if name == "none":
        return frozenset()
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


@lru_cache(maxsize=4)
def _stemmer(name: str):
    if name == "none":
        return None
    import Stemmer

    return Stemmer.Stemmer(name)


def tokenize(
    texts: list[str], stemmer: str = "english", stopwords: str = "english"
) -> list[list[str]]:
    stop = _stopwords(stopwords)
    stem = _stemmer(stemmer)
    out = []
    for text in texts:
        toks = [t for t in _TOKEN.findall(text.lower()) if t not in stop]
        out.append(stem.stemWords(toks) if stem is not None else toks)
    return out
