"""Extractive baseline: the context sentences that best overlap the question, with citations."""

from __future__ import annotations

from typing import Any

from ragrig.core.text import split_sentences, tokenize
from ragrig.generate.base import Generation

REFUSAL = "I cannot answer this from the provided passages."


class ExtractiveGenerator:
    model_name = "extractive"

    def __init__(self, max_sentences: int = 2, min_overlap: float = 0.2):
        self.max_sentences = max_sentences
        self.min_overlap = min_overlap

    @classmethod
    def from_config(cls, cfg: Any, seed: int = 0, threads: int = 1) -> ExtractiveGenerator:
        return cls(cfg.max_sentences, cfg.min_overlap)

    def generate(self, question: str, passages: list[str]) -> Generation:
        q = set(tokenize([question])[0])
        if not q:
            return Generation(REFUSAL)
        scored = []
        for p, passage in enumerate(passages, start=1):
            for s, sentence in enumerate(split_sentences(passage)):
                toks = set(tokenize([sentence])[0])
                overlap = len(q & toks) / len(q)
                scored.append((-overlap, p, s, sentence))
        scored.sort()
        picked = [t for t in scored if -t[0] >= self.min_overlap][: self.max_sentences]
        if not picked:
            return Generation(REFUSAL)
        picked.sort(key=lambda t: (t[1], t[2]))
        return Generation(" ".join(f"{sentence} [{p}]" for _, p, _, sentence in picked))
