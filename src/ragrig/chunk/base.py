"""What every chunk backend shares: its types, protocol and backend registry."""

from __future__ import annotations

from typing import Any, Protocol

from ragrig.core.registry import resolve


class Chunker(Protocol):
    def spans(self, content: str) -> list[tuple[int, int]]:
        """Character spans [start, end) of the chunks of one document."""
        ...


CHUNKERS = {
    "document": "ragrig.chunk.chunkers:DocumentChunker",
    "recursive": "ragrig.chunk.chunkers:RecursiveTokenChunker",
    "hybrid": "ragrig.chunk.hybrid:HybridDoclingChunker",
    "semantic": "ragrig.chunk.semantic:SemanticChunker",
}


def make_chunker(cfg: Any) -> Chunker:
    return resolve(CHUNKERS, cfg.method, "chunker").from_config(cfg)
