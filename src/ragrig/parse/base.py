"""What every parser shares: the tables it returns, the protocol, the backend registry."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd

META_PREFIX = "meta_"


@dataclass(frozen=True)
class Parsed:
    documents: pd.DataFrame  # schema "documents"
    queries: pd.DataFrame  # schema "queries"
    qrels: pd.DataFrame  # schema "qrels"
    stats: dict[str, Any] = field(default_factory=dict)  # counts for the manifest (parse_stats)
    # a document-converting parser's extras: one row per element (schema "elements"), the
    # DoclingDocument JSON text per file_id, and the per-file parse report
    elements: pd.DataFrame | None = None
    docling: dict[str, str] = field(default_factory=dict)
    report: dict[str, Any] | None = None


class Parser(Protocol):
    def parse(self, dataset: Any) -> Parsed:
        """Read the configured dataset (a DatasetConfig) into the standard tables."""
        ...


PARSERS = {"beir": "ragrig.parse.beir:BeirParser", "docling": "ragrig.parse.docling:DoclingParser"}


def make_parser(cfg: Any) -> Parser:
    from ragrig.core.registry import resolve

    return resolve(PARSERS, cfg.method, "parser").from_config(cfg)


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
