"""DVC stage chunk: documents -> chunks with document id and character offsets."""

from __future__ import annotations

import _bootstrap  # noqa: F401  (this checkout's src/ first on sys.path)
from ragrig import stage


def main() -> None:
    args = stage.parser(__doc__).parse_args()
    from ragrig.chunk import chunk_documents, make_chunker
    from ragrig.config import load_section
    from ragrig.io import atomic_dir, read_table, write_json, write_table

    (parse_dir,) = args.inputs
    cfg = load_section("chunk", args.params)
    docs = read_table(parse_dir / "documents.parquet", "documents")
    chunks = chunk_documents(docs, make_chunker(cfg))
    with atomic_dir(args.out) as out:
        write_table(chunks, out / "chunks.parquet", "chunks")
        per_doc = chunks.groupby("doc_id").size()
        write_json(
            out / "manifest.json",
            {
                "chunks": len(chunks),
                "documents": len(docs),
                "max_chunks_per_document": int(per_doc.max()),
            },
        )
    print(f"chunk: {len(chunks)} chunks from {len(docs)} documents")


if __name__ == "__main__":
    stage.run("chunk", main)
