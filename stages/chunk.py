"""DVC stage chunk: documents -> chunks with document id, character offsets and (when the parse
output has elements) page and section; data/chunk/ingestion.json: the ingestion metrics."""

from __future__ import annotations

import _bootstrap  # noqa: F401  (this checkout's src/ first on sys.path)
from ragrig.runtime import stage


def main() -> None:
    args = stage.parser(__doc__).parse_args()
    from ragrig.chunk import chunk_documents, make_chunker
    from ragrig.chunk.quality import ingestion_metrics
    from ragrig.chunk.structure import read_elements
    from ragrig.core.config import load_section
    from ragrig.core.io import atomic_dir, read_table, write_json, write_table

    (parse_dir,) = args.inputs
    cfg = load_section("chunk", args.params)
    docs = read_table(parse_dir / "documents.parquet", "documents")
    # parse=docling's structure; absent (or empty) for BEIR corpora
    elements = read_elements(parse_dir / "elements.parquet")
    docling_dir = parse_dir / "docling"
    chunker = make_chunker(cfg)
    chunks = chunk_documents(
        docs,
        chunker,
        elements=elements,
        docling_dir=docling_dir if docling_dir.is_dir() else None,
    )
    metrics = ingestion_metrics(chunks, docs, elements, cfg)
    with atomic_dir(args.out) as out:
        write_table(chunks, out / "chunks.parquet", "chunks")
        per_doc = chunks.groupby("doc_id").size()
        write_json(
            out / "manifest.json",
            {
                "chunks": len(chunks),
                "documents": len(docs),
                "documents_without_chunks": int(len(docs) - len(per_doc)),
                "max_chunks_per_document": int(per_doc.max()) if len(per_doc) else 0,
                "elements": 0 if elements is None else len(elements),
                "chunker": dict(sorted(getattr(chunker, "stats", {}).items())),
            },
        )
        write_json(out / "ingestion.json", metrics)
    print(f"chunk: {len(chunks)} chunks from {len(docs)} documents")


if __name__ == "__main__":
    stage.run("chunk", main)
