"""Load and validate a BEIR-layout dataset: corpus.jsonl[.gz], queries.jsonl, qrels/<split>.tsv."""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragrig.errors import DataValidationError


@dataclass(frozen=True)
class BeirDataset:
    corpus: dict[str, dict[str, str]]  # doc_id -> {"title", "text"}
    queries: dict[str, str]  # qid -> text (only queries of the split)
    qrels: dict[str, dict[str, int]]  # qid -> {doc_id: relevance}
    corpus_path: Path


def _open_text(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def find_corpus(root: Path) -> Path:
    for name in ("corpus.jsonl", "corpus.jsonl.gz"):
        if (root / name).exists():
            return root / name
    raise DataValidationError(f"no corpus.jsonl or corpus.jsonl.gz in {root}")


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, record); a malformed line raises naming file and line."""
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataValidationError(f"{path}:{lineno}: malformed JSON ({exc.msg})") from exc
            if not isinstance(record, dict):
                raise DataValidationError(f"{path}:{lineno}: expected a JSON object")
            yield lineno, record


def _id_of(record: dict[str, Any], path: Path, lineno: int) -> str:
    if "_id" not in record:
        raise DataValidationError(f"{path}:{lineno}: record has no '_id'")
    return str(record["_id"])


def _load_records(path: Path, kind: str, fields: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """Read id -> {field: text}; duplicate ids and records whose fields are all blank raise,
    each error naming every offending id (up to ten) and the lines they are on."""
    records: dict[str, dict[str, str]] = {}
    seen: dict[str, int] = {}
    dups: dict[str, list[int]] = {}
    empty: list[str] = []
    for lineno, rec in iter_jsonl(path):
        rid = _id_of(rec, path, lineno)
        if rid in seen:
            dups.setdefault(rid, [seen[rid]]).append(lineno)
            continue
        seen[rid] = lineno
        records[rid] = {f: str(rec.get(f) or "") for f in fields}
        if not any(v.strip() for v in records[rid].values()):
            empty.append(rid)
    if dups:
        sample = ", ".join(f"{i!r} (lines {lines})" for i, lines in list(dups.items())[:10])
        raise DataValidationError(f"{path}: {len(dups)} duplicate {kind} id(s): {sample}")
    if empty:
        plural = {"query": "query(ies)"}.get(kind, f"{kind}(s)")
        raise DataValidationError(f"{path}: {len(empty)} {plural} with empty text: {empty[:10]}")
    return records


def load_corpus(path: Path) -> dict[str, dict[str, str]]:
    corpus = _load_records(path, "document", ("title", "text"))
    if not corpus:
        raise DataValidationError(f"{path}: the corpus is empty")
    return corpus


def load_queries(path: Path) -> dict[str, str]:
    return {qid: rec["text"] for qid, rec in _load_records(path, "query", ("text",)).items()}


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Read a BEIR qrels TSV (header `query-id corpus-id score`)."""
    if not path.exists():
        raise DataValidationError(f"qrels file not found: {path}")
    qrels: dict[str, dict[str, int]] = {}
    dups: list[tuple[str, str]] = []
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t")
        for lineno, row in enumerate(reader, start=1):
            if not row or not "".join(row).strip():
                continue
            if lineno == 1 and row[0].strip().lower() in {"query-id", "query_id", "qid"}:
                continue
            if len(row) != 3:
                raise DataValidationError(
                    f"{path}:{lineno}: expected 3 tab-separated fields, got {len(row)}"
                )
            qid, doc_id, score = (c.strip() for c in row)
            try:
                rel = int(score)
            except ValueError as exc:
                raise DataValidationError(
                    f"{path}:{lineno}: score {score!r} is not an integer"
                ) from exc
            if doc_id in qrels.setdefault(qid, {}):
                dups.append((qid, doc_id))
            qrels[qid][doc_id] = rel
    if dups:
        raise DataValidationError(f"{path}: duplicate (query, document) judgments: {dups[:10]}")
    if not qrels:
        raise DataValidationError(f"{path}: no judgments")
    return qrels


def load_beir(root: Path, split: str) -> BeirDataset:
    """Load corpus, the split's queries and qrels; cross-check every id."""
    root = Path(root)
    if not root.is_dir():
        raise DataValidationError(
            f"dataset root {root} is not a folder (run `ragrig data ensure`?)"
        )
    corpus_path = find_corpus(root)
    corpus = load_corpus(corpus_path)
    all_queries = load_queries(root / "queries.jsonl")
    qrels = load_qrels(root / "qrels" / f"{split}.tsv")
    unknown_q = sorted(q for q in qrels if q not in all_queries)
    if unknown_q:
        raise DataValidationError(
            f"qrels/{split}.tsv names {len(unknown_q)} unknown query id(s): {unknown_q[:10]}"
        )
    unknown_d = sorted({d for rels in qrels.values() for d in rels if d not in corpus})
    if unknown_d:
        raise DataValidationError(
            f"qrels/{split}.tsv names {len(unknown_d)} unknown document id(s): {unknown_d[:10]}"
        )
    queries = {qid: all_queries[qid] for qid in sorted(qrels)}
    return BeirDataset(corpus=corpus, queries=queries, qrels=qrels, corpus_path=corpus_path)
