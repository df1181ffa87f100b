"""The chunk stage's computation."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ragrig.chunk.base import Chunker


def chunk_documents(
    documents: pd.DataFrame,
    chunker: Chunker,
    progress: bool = True,
    *,
    elements: pd.DataFrame | None = None,
    docling_dir: Path | None = None,
) -> pd.DataFrame:
    """One row per chunk: chunk_id `<doc_id>#<n>`, doc_id, text and [start, end) in `content`;
    with `elements` (parse=docling) also the `page` and `section` of the element holding the
    chunk's start.

    A chunker with `document_spans` (chunk=hybrid) sees the whole corpus, its elements and the
    docling documents at once; any other chunker sees one document's content at a time.
    """
    from ragrig.chunk.structure import Elements, add_pointers
    from ragrig.core.progress import track

    if hasattr(chunker, "document_spans"):
        all_spans = chunker.document_spans(documents, elements, docling_dir, progress=progress)
    else:
        docs = zip(documents["doc_id"], documents["content"], strict=True)
        bar = track(docs, "chunk", "documents", len(documents)) if progress else docs
        all_spans = {doc_id: chunker.spans(content) for doc_id, content in bar}
    rows = []
    for doc_id, content in zip(documents["doc_id"], documents["content"], strict=True):
        for n, (start, end) in enumerate(all_spans.get(doc_id, [])):
            rows.append(
                {
                    "chunk_id": f"{doc_id}#{n}",
                    "doc_id": doc_id,
                    "text": content[start:end],
                    "start": start,
                    "end": end,
                }
            )
    chunks = pd.DataFrame(rows, columns=["chunk_id", "doc_id", "text", "start", "end"])
    index = Elements(elements)
    return add_pointers(chunks, index) if index else chunks
