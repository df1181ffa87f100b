"""generate: answer each sampled query from its top passages, recording usage and latency."""

from ragrig.generate.base import GENERATORS, Generation, Generator, Request, make_generator
from ragrig.generate.step import (
    NOTE_KINDS,
    TRUNCATED,
    assemble_contexts,
    citations,
    generate_all,
    note_counts,
    sample_queries,
)

__all__ = [
    "GENERATORS",
    "Generation",
    "Generator",
    "NOTE_KINDS",
    "Request",
    "TRUNCATED",
    "assemble_contexts",
    "citations",
    "generate_all",
    "make_generator",
    "note_counts",
    "sample_queries",
]
