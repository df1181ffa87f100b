"""embed: encode chunks and queries into normalised dense vectors."""

from ragrig.embed.base import EMBEDDERS, Embedder, Prefixed, encode_windows, make_embedder
from ragrig.embed.step import encode_chunks, encode_queries_timed

__all__ = [
    "EMBEDDERS",
    "Embedder",
    "Prefixed",
    "encode_chunks",
    "encode_queries_timed",
    "encode_windows",
    "make_embedder",
]
