"""Deterministic faithfulness: answer sentences checked for lexical support in one context sentence."""

from __future__ import annotations

import re
from typing import Any

from ragrig.judge import Verdict
from ragrig.text import split_sentences, strip_citations, tokenize

_REFUSAL = re.compile(
    r"\b(cannot|can't|can not|unable to) (answer|determine|tell)|not enough information|"
    r"(do|does) not (contain|mention|provide)|I don't know",
    re.IGNORECASE,
)
# Clause boundaries inside a sentence that holds a refusal: "X does not mention A, but B".
_CLAUSE = re.compile(
    r"\s*(?:[,;:]\s*(?:but|however|although|though|yet|whereas)\b,?|;|\bbut\b|\bhowever\b,?)\s*",
    re.IGNORECASE,
)


class OverlapJudge:
    """A claim (answer sentence) is supported when at least `support_threshold` of its stemmed
    content words occur in a single context sentence. Sentences with fewer than
    `min_content_words` content words are not checkable claims. A refusal has no claims; a
    sentence joining a refusal to a statement ("The passages do not mention dosage, but aspirin
    reduces fever") is split into clauses, and its non-refusal clauses are claims, so hiding a
    claim behind a refusal phrase does not take it out of the score.

    Lexical support cannot see negation or relations: it is a first, cheap check.
    """

    def __init__(self, support_threshold: float = 0.6, min_content_words: int = 2):
        self.threshold = support_threshold
        self.min_words = min_content_words

    @classmethod
    def from_config(cls, cfg: Any) -> OverlapJudge:
        return cls(cfg.support_threshold, cfg.min_content_words)

    def claims(self, answer: str) -> list[str]:
        out: list[str] = []
        for sentence in split_sentences(answer):
            claim = strip_citations(sentence).rstrip(".!? ").strip()
            parts = [claim]
            if _REFUSAL.search(claim):
                clauses = (c.strip(" ,;:.!?") for c in _CLAUSE.split(claim))
                parts = [c for c in clauses if c and not _REFUSAL.search(c)]
            for part in parts:
                if len(set(tokenize([part])[0])) >= self.min_words and part not in out:
                    out.append(part)
        return out

    def supported(self, claim: str, context_sentences: list[set[str]]) -> bool:
        words = set(tokenize([claim])[0])
        best = max((len(words & s) / len(words) for s in context_sentences), default=0.0)
        return best >= self.threshold

    def judge(
        self, question: str, answer: str, contexts: list[str], reference: str | None = None
    ) -> Verdict:
        claims = self.claims(answer)
        if not claims:
            reason = (
                "empty answer"
                if not answer.strip()
                else ("refusal" if _REFUSAL.search(answer) else "no checkable claim")
            )
            return Verdict([], [], [], reason=reason)
        ctx = [set(tokenize([s])[0]) for c in contexts for s in split_sentences(c)]
        sup = [c for c in claims if self.supported(c, ctx)]
        uns = [c for c in claims if c not in sup]
        return Verdict(claims, sup, uns)
