"""Calibration-only scorers: baselines a judge has to beat, not pipeline judges."""

from __future__ import annotations

from ragrig.core.text import tokenize


class NaiveOverlap:
    """Share of the answer's distinct content words (stemmed, English stop words removed, as
    the overlap judge tokenises) found anywhere in all the passages together. No sentences,
    no claims, no refusal handling: an answer with no content word has no score (no_claims)."""

    name = "naive_overlap"

    def score(self, answer: str, contexts: list[str]) -> float | None:
        words = set(tokenize([answer])[0])
        if not words:
            return None
        passages = set(tokenize([" ".join(contexts)])[0]) if contexts else set()
        return len(words & passages) / len(words)


BASELINES = {"naive_overlap": NaiveOverlap}
