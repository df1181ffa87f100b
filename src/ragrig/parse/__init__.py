"""parse: turn a source dataset into the standard documents, queries and qrels tables.

A parser is a backend with `parse(dataset) -> Parsed`. `beir` reads a BEIR-layout folder; a
document-converting parser (e.g. docling for HTML/DOCX/PDF) fills the same documents table.
"""

from ragrig.parse.base import META_PREFIX, PARSERS, Parsed, Parser, content_hash, make_parser
from ragrig.parse.beir import (
    BeirParser,
    documents_table,
    metadata_columns,
    parse_stats,
    qrels_table,
    queries_table,
    stats_lines,
    surrogates_line,
)
from ragrig.parse.step import console_lines

__all__ = [
    "META_PREFIX",
    "PARSERS",
    "BeirParser",
    "Parsed",
    "Parser",
    "console_lines",
    "content_hash",
    "documents_table",
    "make_parser",
    "metadata_columns",
    "parse_stats",
    "qrels_table",
    "queries_table",
    "stats_lines",
    "surrogates_line",
]
