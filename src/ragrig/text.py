"""Text utilities shared by BM25, generators and judges: tokenisation and sentence splitting."""

from __future__ import annotations

import re
from functools import lru_cache

_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[\"'])")
_CITE = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")


def split_sentences(text: str) -> list[str]:
    """Split on sentence-final punctuation followed by an upper-case or digit start."""
    return [s.strip() for s in _SENT.split(text.strip()) if s.strip()]


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
