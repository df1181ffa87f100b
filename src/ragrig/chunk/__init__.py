"""chunk: split documents into retrievable chunks that keep their document id and offsets."""

from __future__ import annotations

from typing import Any, Protocol

import pandas as pd

from ragrig.registry import resolve


class Chunker(Protocol):
    def spans(self, content: str) -> list[tuple[int, int]]:
        """Character spans [start, end) of the chunks of one document."""
        ...


CHUNKERS = {
    "document": "ragrig.chunk.chunkers:DocumentChunker",
    "recursive": "ragrig.chunk.chunkers:RecursiveTokenChunker",
}


def make_chunker(cfg: Any) -> Chunker:
    return resolve(CHUNKERS, cfg.method, "chunker").from_config(cfg)


def chunk_documents(
    documents: pd.DataFrame, chunker: Chunker, progress: bool = True
) -> pd.DataFrame:
    """One row per chunk: chunk_id `<doc_id>#<n>`, doc_id, text and [start, end) in `content`."""
    from ragrig.progress import track

    rows = []
    docs = zip(documents["doc_id"], documents["content"], strict=True)
    for doc_id, content in track(docs, "chunk", "documents", len(documents)) if progress else docs:
        for n, (start, end) in enumerate(chunker.spans(content)):
            rows.append(
                {
                    "chunk_id": f"{doc_id}#{n}",
                    "doc_id": doc_id,
                    "text": content[start:end],
                    "start": start,
                    "end": end,
                }
            )
    return pd.DataFrame(rows, columns=["chunk_id", "doc_id", "text", "start", "end"])
