"""parse: turn a source dataset into the standard documents, queries and qrels tables.

A parser is a backend with `parse(dataset) -> Parsed`. `beir` reads a BEIR-layout folder; a
document-converting parser (e.g. docling for HTML/DOCX/PDF) fills the same documents table.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from ragrig.data.beir import BeirDataset
from ragrig.data.claims import NOT_ENOUGH_INFO


@dataclass(frozen=True)
class Parsed:
    documents: pd.DataFrame  # schema "documents"
    queries: pd.DataFrame  # schema "queries"
    qrels: pd.DataFrame  # schema "qrels"


class Parser(Protocol):
    def parse(self, dataset: Any) -> Parsed:
        """Read the configured dataset (a DatasetConfig) into the standard tables."""
        ...


PARSERS = {"beir": "ragrig.parse:BeirParser"}


def make_parser(cfg: Any) -> Parser:
    from ragrig.registry import resolve

    return resolve(PARSERS, cfg.method, "parser").from_config(cfg)


class BeirParser:
    """BEIR layout plus, when configured, SciFact-style claim files for per-query labels."""

    def __init__(self, title_separator: str = ". "):
        self.title_separator = title_separator

    @classmethod
    def from_config(cls, cfg: Any) -> BeirParser:
        return cls(cfg.title_separator)

    def parse(self, dataset: Any) -> Parsed:
        from ragrig.data.beir import load_beir
        from ragrig.data.claims import load_claims

        root = Path(dataset.root)
        data = load_beir(root, dataset.split)
        claims = load_claims([root / f for f in dataset.claims.files]) if dataset.claims else None
        return Parsed(
            documents_table(
                data, source=f"beir:{dataset.name}", title_separator=self.title_separator
            ),
            queries_table(data, claims),
            qrels_table(data),
        )


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def documents_table(dataset: BeirDataset, source: str, title_separator: str) -> pd.DataFrame:
    """One row per document; `content` (title + separator + text) is what chunk offsets index."""
    rows = []
    for doc_id in sorted(dataset.corpus):
        rec = dataset.corpus[doc_id]
        title, text = rec["title"].strip(), rec["text"].strip()
        content = f"{title}{title_separator}{text}" if title and text else (title or text)
        rows.append(
            {
                "doc_id": doc_id,
                "title": title,
                "text": text,
                "content": content,
                "source": source,
                "content_hash": content_hash(content),
            }
        )
    return pd.DataFrame(rows)


def queries_table(dataset: BeirDataset, claims: dict[str, dict[str, Any]] | None) -> pd.DataFrame:
    """One row per query of the split, with slice attributes (claim label, gold count, length)."""
    rows = []
    for qid in sorted(dataset.queries):
        text = dataset.queries[qid]
        n_gold = sum(1 for rel in dataset.qrels.get(qid, {}).values() if rel > 0)
        if claims is None:
            label, evidence = "unknown", {}
        elif qid in claims:
            label, evidence = claims[qid]["label"], claims[qid]["evidence"]
        else:
            label, evidence = NOT_ENOUGH_INFO, {}
        rows.append(
            {
                "qid": qid,
                "text": text,
                "claim_label": label,
                "evidence": json.dumps(evidence, sort_keys=True),
                "n_gold": n_gold,
                "n_words": len(text.split()),
            }
        )
    return pd.DataFrame(rows)


def qrels_table(dataset: BeirDataset) -> pd.DataFrame:
    rows = [
        {"qid": qid, "doc_id": doc_id, "relevance": int(rel)}
        for qid in sorted(dataset.qrels)
        for doc_id, rel in sorted(dataset.qrels[qid].items())
    ]
    return pd.DataFrame(rows, columns=["qid", "doc_id", "relevance"])
