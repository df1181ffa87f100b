"""What every chunk backend shares: its types, protocol and backend registry."""

from __future__ import annotations

from typing import Any, Protocol

from ragrig.core.registry import resolve


class Chunker(Protocol):
    def spans(self, content: str) -> list[tuple[int, int]]:
        """Character spans [start, end) of the chunks of one document."""
        ...


CHUNKERS = {
    "document": "ragrig.chunk.document:DocumentChunker",
    "recursive": "ragrig.chunk.recursive:RecursiveTokenChunker",
    "hybrid": "ragrig.chunk.hybrid:HybridDoclingChunker",
    "semantic": "ragrig.chunk.semantic:SemanticChunker",
}


def make_chunker(cfg: Any) -> Chunker:
    return resolve(CHUNKERS, cfg.method, "chunker").from_config(cfg)


def load_tokenizer(ref: str) -> Any:
    """A fast tokenizer (tokenizers.Tokenizer) from a packaged model, a folder or a tokenizer.json."""
    from pathlib import Path

    from tokenizers import Tokenizer

    from ragrig.weights.models import resolve_model

    path = Path(resolve_model(ref))
    if path.is_dir():
        path = path / "tokenizer.json"
    tok = Tokenizer.from_file(str(path))
    tok.no_truncation()
    tok.no_padding()
    return tok
