"""The recursive token-window chunker (`chunk=recursive`): windows aligned to separators."""

from __future__ import annotations

from typing import Any

from ragrig.chunk.base import load_tokenizer


class RecursiveTokenChunker:
    """Windows of at most `max_tokens` tokens sharing `overlap` tokens.

    A window ends at the strongest separator (in `separators` order) found in its second half,
    falling back to a plain token boundary, so chunks break between paragraphs, then lines,
    then sentences, then words. Offsets come from the tokenizer, so they are exact.
    """

    def __init__(self, tokenizer: Any, max_tokens: int, overlap: int, separators: list[str]):
        if overlap >= max_tokens:
            raise ValueError("overlap must be smaller than max_tokens")
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.overlap = overlap
        self.separators = list(separators)

    @classmethod
    def from_config(cls, cfg: Any) -> RecursiveTokenChunker:
        return cls(load_tokenizer(cfg.tokenizer), cfg.max_tokens, cfg.overlap, cfg.separators)

    def _offsets(self, content: str) -> list[tuple[int, int]]:
        enc = self.tokenizer.encode(content, add_special_tokens=False)
        return [(s, e) for s, e in enc.offsets if e > s]

    def _break_rank(self, gap: str) -> int:
        for rank, sep in enumerate(self.separators):
            if sep in gap:
                return rank
        return len(self.separators)

    def spans(self, content: str) -> list[tuple[int, int]]:
        offs = self._offsets(content)
        n = len(offs)
        if n == 0:
            return [(0, len(content))] if content else []
        spans: list[tuple[int, int]] = []
        start = 0
        while start < n:
            end = min(start + self.max_tokens, n)
            if end < n:
                best, best_rank = end, len(self.separators) + 1
                for cut in range(end, start + max(1, self.max_tokens // 2), -1):
                    rank = self._break_rank(content[offs[cut - 1][1] : offs[cut][0]])
                    if rank < best_rank:
                        best, best_rank = cut, rank
                        if rank == 0:
                            break
                end = best
            spans.append((offs[start][0], offs[end - 1][1]))
            if end >= n:
                break
            start = max(end - self.overlap, start + 1)
        return spans
