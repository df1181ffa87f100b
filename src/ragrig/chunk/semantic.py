"""chunk=semantic: cut a document between sentences whose embeddings are least similar.

Sentences come from pysbd and are located in `content` in order, so every span is exact. Each
sentence is embedded with the packaged MiniLM sentence-transformer (normalised); the cosine of
each adjacent pair is compared with a cut level: `threshold` when set, else the document's
`percentile`-th percentile of its adjacent cosines. Sentences are packed in order; a chunk is
closed before a sentence when

- the pair's cosine is below the cut level and the chunk already has `min_tokens` tokens, or
- adding the sentence would exceed `max_tokens` tokens.

A single sentence longer than `max_tokens` is a chunk of its own (counted as `oversized`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np


def sentence_spans(content: str, segment: Callable[[str], list[str]]) -> list[tuple[int, int]]:
    """[start, end) of each sentence `segment` returns, found in order in `content` and stripped
    of surrounding whitespace. Text no sentence matched verbatim is never dropped: it joins the
    sentence before it (or, at the very start, the first sentence)."""
    spans: list[tuple[int, int]] = []
    at = 0
    for sent in segment(content):
        s = sent.strip()
        pos = content.find(s, at) if s else -1
        if pos >= 0:
            spans.append((pos, pos + len(s)))
            at = pos + len(s)
    if not spans:
        stripped = content.strip()
        return (
            [(content.find(stripped), content.find(stripped) + len(stripped))] if stripped else []
        )
    lead = len(content) - len(content.lstrip())
    spans[0] = (min(spans[0][0], lead), spans[0][1])
    bounds = [s for s, _ in spans[1:]] + [len(content)]
    for i, nxt in enumerate(bounds):
        start, end = spans[i]
        if content[end:nxt].strip():
            spans[i] = (start, start + len(content[start:nxt].rstrip()))
    return spans


_BLOCK = re.compile(r"\n[ \t]*\n")


def pysbd_segmenter(language: str = "en") -> Callable[[str], list[str]]:
    """pysbd's sentences, one paragraph (block between blank lines) at a time: no sentence
    spans a blank line, and pysbd, whose time grows faster than the text, sees short texts."""
    import pysbd

    seg = pysbd.Segmenter(language=language, clean=False)

    def segment(text: str) -> list[str]:
        return [s for block in _BLOCK.split(text) if block.strip() for s in seg.segment(block)]

    return segment


def cut_points(sims: np.ndarray, threshold: float | None, percentile: float) -> np.ndarray:
    """Boolean per adjacent pair: True where a cut is allowed (cosine below the cut level)."""
    if len(sims) == 0:
        return np.zeros(0, dtype=bool)
    level = threshold if threshold is not None else float(np.percentile(sims, percentile))
    return sims < level


def pack(
    lengths: list[int], cuts: np.ndarray, min_tokens: int, max_tokens: int
) -> list[tuple[int, int]]:
    """Groups of sentence indices [i, j) from token lengths and allowed cuts (see module)."""
    groups: list[tuple[int, int]] = []
    start, total = 0, 0
    for i, n in enumerate(lengths):
        if i > start:
            too_long = total + n > max_tokens
            if too_long or (cuts[i - 1] and total >= min_tokens):
                groups.append((start, i))
                start, total = i, 0
        total += n
    if lengths:
        groups.append((start, len(lengths)))
    return groups


class SemanticChunker:
    def __init__(
        self,
        encode: Callable[[list[str]], np.ndarray],
        count_tokens: Callable[[str], int],
        *,
        threshold: float | None = None,
        percentile: float = 25.0,
        min_tokens: int = 32,
        max_tokens: int = 256,
        segment: Callable[[str], list[str]] | None = None,
    ):
        self.encode = encode
        self.count_tokens = count_tokens
        self.threshold = threshold
        self.percentile = percentile
        self.min_tokens = min_tokens
        self.max_tokens = max_tokens
        self.segment = segment or pysbd_segmenter()
        self.stats: Counter[str] = Counter()

    @classmethod
    def from_config(cls, cfg: Any) -> SemanticChunker:
        from ragrig.chunk.base import load_tokenizer

        model = load_sentence_model(cfg.model)
        tok = load_tokenizer(cfg.tokenizer)

        def encode(texts: list[str]) -> np.ndarray:
            return model.encode(
                texts, batch_size=cfg.batch_size, normalize_embeddings=True, convert_to_numpy=True
            )

        return cls(
            encode,
            lambda t: len(tok.encode(t, add_special_tokens=False).ids),
            threshold=cfg.threshold,
            percentile=cfg.percentile,
            min_tokens=cfg.min_tokens,
            max_tokens=cfg.max_tokens,
            segment=pysbd_segmenter(cfg.language),
        )

    def spans(self, content: str) -> list[tuple[int, int]]:
        sents = sentence_spans(content, self.segment)
        if len(sents) <= 1:
            return sents
        vecs = np.asarray(self.encode([content[s:e] for s, e in sents]), dtype=np.float32)
        sims = np.sum(vecs[:-1] * vecs[1:], axis=1)
        lengths = [self.count_tokens(content[s:e]) for s, e in sents]
        groups = pack(
            lengths,
            cut_points(sims, self.threshold, self.percentile),
            self.min_tokens,
            self.max_tokens,
        )
        out = []
        for i, j in groups:
            if sum(lengths[i:j]) > self.max_tokens:
                self.stats["oversized"] += 1
            out.append((sents[i][0], sents[j - 1][1]))
        return out


def load_sentence_model(ref: str) -> Any:
    from sentence_transformers import SentenceTransformer

    from ragrig.weights.models import resolve_model

    return SentenceTransformer(resolve_model(ref), device="cpu")
