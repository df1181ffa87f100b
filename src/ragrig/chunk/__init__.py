"""chunk: split documents into retrievable chunks that keep their document id and offsets."""

from ragrig.chunk.base import CHUNKERS, Chunker, make_chunker
from ragrig.chunk.step import chunk_documents

__all__ = ["CHUNKERS", "Chunker", "chunk_documents", "make_chunker"]
