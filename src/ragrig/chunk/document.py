"""The whole-document chunker (`chunk=document`): one chunk per document."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DocumentChunker:
    """One chunk per document."""

    @classmethod
    def from_config(cls, cfg: Any) -> DocumentChunker:
        return cls()

    def spans(self, content: str) -> list[tuple[int, int]]:
        return [(0, len(content))]
