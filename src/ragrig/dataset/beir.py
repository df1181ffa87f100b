"""Load and validate a BEIR-layout dataset: corpus.jsonl[.gz], queries.jsonl, qrels/<split>.tsv.

Every file is read as UTF-8 with a leading byte-order mark tolerated; a byte that is not UTF-8,
a malformed line or a truncated gzip raises one `DataValidationError` naming the file and line.
A line longer than `ReadLimits.max_record_bytes` or a `.gz` inflating past
`max_inflated_bytes` is refused naming the file and line (parse's settings; nothing reads a line
whole first). An id (document, query, or either in qrels) with whitespace or a control character
is refused naming file and line: TREC files could not hold it. A lone surrogate (a JSON escape such as "\\ud83d" without its pair: text UTF-8 cannot hold) is
replaced by U+FFFD, counted, and warned about on stderr naming the file and its first line. A
qrels grade is ASCII digits with an optional sign ("1_0" or a full-width "２" is refused).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ragrig.core.errors import DataValidationError
from ragrig.core.io import DEFAULT_LIMITS, ReadLimits, iter_lines
from ragrig.core.text import (
    counted,
    id_problem,
    replace_surrogates_in,
    strict_int,
    surrogate_warning,
)

# What to do with a document whose title and text are both blank (see conf/parse/beir.yaml).
EmptyTextPolicy = Literal["error", "skip", "keep"]
EMPTY_TEXT_POLICIES: tuple[str, ...] = ("error", "skip", "keep")


@dataclass(frozen=True)
class BeirDataset:
    corpus: dict[str, dict[str, str]]  # doc_id -> {"title", "text"}
    queries: dict[str, str]  # qid -> text (only queries of the split)
    qrels: dict[str, dict[str, int]]  # qid -> {doc_id: relevance}
    corpus_path: Path
    # Queries of queries.jsonl with no judgment in the split (not in `queries`).
    unjudged: tuple[str, ...] = ()
    # Documents whose title and text are blank, in file order; not in `corpus` when skipped.
    empty_documents: tuple[str, ...] = ()
    empty_text: str = "error"
    # Of the unjudged queries, how many each other split (qrels/<other>.tsv) judges.
    unjudged_in_other_splits: dict[str, int] = field(default_factory=dict)
    # qid -> {field: scalar} from each query's `metadata` object (scalar fields only).
    query_metadata: dict[str, dict[str, Any]] = field(default_factory=dict)
    # metadata fields left out because some value is an object or a list (e.g. SciFact's
    # evidence, keyed by document id): they cannot be a slice.
    nested_metadata_fields: tuple[str, ...] = ()
    # doc_id -> {field: scalar} from each document's `metadata` object (scalar fields only)
    doc_metadata: dict[str, dict[str, Any]] = field(default_factory=dict)
    # qid -> {field: value or list of values}: each query's `metadata.filter` object, the
    # metadata predicate its caller asks retrieval to apply (ragrig.retrieve.filters)
    query_filters: dict[str, dict[str, Any]] = field(default_factory=dict)
    # lone surrogates replaced by U+FFFD per file read: {"corpus": n, "queries": n}
    surrogates_replaced: dict[str, int] = field(default_factory=dict)

    @property
    def no_positive(self) -> tuple[str, ...]:
        """Judged queries with no judgment above 0: nothing to find, so no retrieval score."""
        return tuple(
            q for q in sorted(self.qrels) if not any(r > 0 for r in self.qrels[q].values())
        )


def find_corpus(root: Path) -> Path:
    for name in ("corpus.jsonl", "corpus.jsonl.gz"):
        if (root / name).exists():
            return root / name
    raise DataValidationError(f"no corpus.jsonl or corpus.jsonl.gz in {root}")


@dataclass
class Replaced:
    """How many lone surrogates the readers given this object replaced by U+FFFD."""

    count: int = 0


# a JSON escape that decodes to a surrogate: only a line holding one needs its record walked
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def iter_jsonl(
    path: Path,
    replaced: Replaced | None = None,
    warn: bool = True,
    limits: ReadLimits = DEFAULT_LIMITS,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, record); a malformed line raises naming file and line.

    Every lone surrogate in a record's strings (keys included) is replaced by U+FFFD and added
    to `replaced`; after the last line one warning on stderr names the file, the first line and
    the count (unless `warn` is False: a second read of the same file). `limits` bound one
    line and a `.gz` file's inflated size (see `iter_lines`)."""
    count = lines = first = 0
    for lineno, line in iter_lines(path, limits):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataValidationError(f"{path}:{lineno}: malformed JSON ({exc.msg})") from exc
        except RecursionError as exc:
            raise DataValidationError(f"{path}:{lineno}: JSON nested too deeply") from exc
        if not isinstance(record, dict):
            raise DataValidationError(f"{path}:{lineno}: expected a JSON object")
        if _SURROGATE_ESCAPE.search(line):
            record, n = replace_surrogates_in(record)
            if n:
                count, lines, first = count + n, lines + 1, first or lineno
        yield lineno, record
    if count:
        if replaced is not None:
            replaced.count += count
        if warn:
            print(surrogate_warning(f"{path}:{first}", count, lines), file=sys.stderr)


def _id_of(record: dict[str, Any], path: Path, lineno: int) -> str:
    if "_id" not in record:
        raise DataValidationError(f"{path}:{lineno}: record has no '_id'")
    rid = record["_id"]
    if isinstance(rid, bool) or not isinstance(rid, str | int) or not str(rid).strip():
        raise DataValidationError(
            f"{path}:{lineno}: '_id' must be a non-empty string or integer, got {rid!r}"
        )
    return check_id(str(rid), f"{path}:{lineno}", "'_id'")


def check_id(value: str, where: str, what: str) -> str:
    """`value` when it is an id every later stage can write (TREC files included), else one
    error naming `where` (`file:line`) and the id escaped as Python writes a str."""
    problem = id_problem(value)
    if problem:
        raise DataValidationError(
            f"{where}: {what} {value!r} {problem}; an id may hold no whitespace or control "
            "character (TREC run and qrels files separate fields by whitespace)"
        )
    return value


def _field(record: dict[str, Any], name: str, path: Path, lineno: int) -> str:
    value = record.get(name)
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise DataValidationError(
            f"{path}:{lineno}: field {name!r} must be a string, got {type(value).__name__}"
        )
    return str(value)


def count_records(path: Path, limits: ReadLimits = DEFAULT_LIMITS) -> int:
    """Non-blank lines of a JSONL file (`.gz` decompressed): the records a reader will see."""
    return sum(1 for _, line in iter_lines(path, limits) if line.strip())


def _load_records(
    path: Path,
    kind: str,
    fields: tuple[str, ...],
    done: Callable[[int], None] | None = None,
    replaced: Replaced | None = None,
    limits: ReadLimits = DEFAULT_LIMITS,
) -> tuple[dict[str, dict[str, str]], list[str]]:
    """Read id -> {field: text} and the ids whose fields are all blank (in file order).

    Duplicate ids raise with their count, a few of them and a few of the lines each is on.
    `done(1)` after each record read (a progress bar).
    """
    records: dict[str, dict[str, str]] = {}
    seen: dict[str, int] = {}
    dups: dict[str, list[int]] = {}
    empty: list[str] = []
    for lineno, rec in iter_jsonl(path, replaced, limits=limits):
        rid = _id_of(rec, path, lineno)
        if rid in seen:
            dups.setdefault(rid, [seen[rid]]).append(lineno)
            continue
        seen[rid] = lineno
        records[rid] = {f: _field(rec, f, path, lineno) for f in fields}
        if not any(v.strip() for v in records[rid].values()):
            empty.append(rid)
        if done is not None:
            done(1)
    if dups:
        ids = counted(dups.items(), f"duplicate {kind} id", form=_on_lines)
        raise DataValidationError(f"{path}: {ids}")
    return records, empty


def _on_lines(dup: tuple[str, list[int]]) -> str:
    rid, lines = dup
    return f"{rid!r} on {counted(lines, 'line')}"


def load_corpus(
    path: Path,
    empty_text: str = "skip",
    done: Callable[[int], None] | None = None,
    replaced: Replaced | None = None,
    limits: ReadLimits = DEFAULT_LIMITS,
) -> tuple[dict[str, dict[str, str]], list[str]]:
    """The corpus after the empty-text policy, and the ids of the blank documents (`done(1)`
    after each document read; lone surrogates replaced are added to `replaced`)."""
    if empty_text not in EMPTY_TEXT_POLICIES:
        raise DataValidationError(
            f"unknown empty_text policy {empty_text!r}; one of {EMPTY_TEXT_POLICIES}"
        )
    corpus, empty = _load_records(path, "document", ("title", "text"), done, replaced, limits)
    if empty and empty_text == "error":
        blank = counted(empty, "document", form=repr)
        raise DataValidationError(
            f"{path}: {blank} with empty title and text "
            "(set parse.empty_text=skip or keep to accept them)"
        )
    if empty_text == "skip":
        for doc_id in empty:
            del corpus[doc_id]
    if not corpus:
        detail = f" ({len(empty)} blank document(s) skipped)" if empty else ""
        raise DataValidationError(f"{path}: the corpus is empty{detail}")
    return corpus, empty


def load_queries(
    path: Path, replaced: Replaced | None = None, limits: ReadLimits = DEFAULT_LIMITS
) -> dict[str, str]:
    queries, empty = _load_records(path, "query", ("text",), replaced=replaced, limits=limits)
    if empty:
        blank = counted(empty, "query", "queries", form=repr)
        raise DataValidationError(f"{path}: {blank} with empty text")
    return {qid: rec["text"] for qid, rec in queries.items()}


_SCALAR = (str, int, float, bool)


def load_query_metadata(
    path: Path, limits: ReadLimits = DEFAULT_LIMITS
) -> tuple[dict[str, dict[str, Any]], tuple[str, ...]]:
    """id -> {field: value} of each record's `metadata` object (queries or documents), scalar fields only, and the
    sorted names of the fields dropped because some value is an object or a list. The file's
    lone surrogates are replaced, not counted or warned about again (`load_queries` does)."""
    raw: dict[str, dict[str, Any]] = {}
    for lineno, rec in iter_jsonl(path, warn=False, limits=limits):
        meta = rec.get("metadata")
        if meta is None:
            continue
        if not isinstance(meta, dict):
            raise DataValidationError(
                f"{path}:{lineno}: 'metadata' must be an object, got {type(meta).__name__}"
            )
        raw[_id_of(rec, path, lineno)] = meta
    nested = sorted(
        {
            k
            for meta in raw.values()
            for k, v in meta.items()
            if v is not None and not isinstance(v, _SCALAR)
        }
    )
    drop = set(nested)
    kept = {
        qid: {k: v for k, v in meta.items() if k not in drop and v is not None}
        for qid, meta in raw.items()
    }
    return {q: m for q, m in kept.items() if m}, tuple(nested)


def load_query_filters(
    path: Path, limits: ReadLimits = DEFAULT_LIMITS
) -> dict[str, dict[str, Any]]:
    """qid -> predicate of each query's `metadata.filter` object: field -> a scalar or a list of
    scalars (any of them accepted). Anything else is one clear error naming the line."""
    filters: dict[str, dict[str, Any]] = {}
    for lineno, rec in iter_jsonl(path, warn=False, limits=limits):
        meta = rec.get("metadata")
        if not isinstance(meta, dict) or meta.get("filter") is None:
            continue
        pred = meta["filter"]
        ok = isinstance(pred, dict) and all(
            isinstance(v, _SCALAR)
            or (isinstance(v, list) and v and all(isinstance(x, _SCALAR) for x in v))
            for v in pred.values()
        )
        if not ok:
            raise DataValidationError(
                f"{path}:{lineno}: 'metadata.filter' must map each field to a value or a "
                f"non-empty list of values, got {json.dumps(pred)[:120]}"
            )
        if pred:
            filters[_id_of(rec, path, lineno)] = pred
    return filters


def load_qrels(path: Path, limits: ReadLimits = DEFAULT_LIMITS) -> dict[str, dict[str, int]]:
    """Read a BEIR qrels TSV (header `query-id corpus-id score`); a score is an integer in
    ASCII digits with an optional sign, surrounding whitespace aside."""
    if not path.is_file():
        raise DataValidationError(f"qrels file not found: {path}")
    qrels: dict[str, dict[str, int]] = {}
    dups: list[tuple[str, str]] = []
    first = True
    for lineno, line in iter_lines(path, limits):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        row = line.split("\t")
        if first:
            first = False
            if row[0].strip().lower() in {"query-id", "query_id", "qid"}:
                continue
        if len(row) != 3:
            raise DataValidationError(
                f"{path}:{lineno}: expected 3 tab-separated fields, got {len(row)}"
            )
        qid, doc_id, score = (c.strip() for c in row)
        if not qid or not doc_id:
            raise DataValidationError(f"{path}:{lineno}: empty query or document id")
        check_id(qid, f"{path}:{lineno}", "query id")
        check_id(doc_id, f"{path}:{lineno}", "document id")
        rel = strict_int(score, f"{path}:{lineno}", "score", signed=True)
        if doc_id in qrels.setdefault(qid, {}):
            dups.append((qid, doc_id))
        qrels[qid][doc_id] = rel
    if dups:
        pairs = counted(dups, "duplicate judgment", form=lambda p: f"query {p[0]!r} on {p[1]!r}")
        raise DataValidationError(f"{path}: {pairs}")
    if not qrels:
        raise DataValidationError(f"{path}: no judgments")
    return qrels


def load_beir(
    root: Path,
    split: str,
    empty_text: str = "skip",
    done: Callable[[int], None] | None = None,
    limits: ReadLimits = DEFAULT_LIMITS,
) -> BeirDataset:
    """Load corpus, the split's queries and qrels; cross-check every id.

    `empty_text` decides what a document with blank title and text does: `error` refuses the
    corpus, `skip` leaves it out (its judgments stay in qrels, so a query's gold still counts it
    and recall is not inflated), `keep` keeps it with empty content. `limits` bound a line and
    a `.gz` file's inflated size in every file read.
    """
    root = Path(root)
    if not root.is_dir():
        raise DataValidationError(
            f"dataset root {root} is not a folder (run `ragrig data ensure`? a path with spaces "
            "or special characters needs Hydra quoting: -S \"dataset.root='/a b/c'\")"
        )
    corpus_path = find_corpus(root)
    in_corpus, in_queries = Replaced(), Replaced()
    corpus, empty = load_corpus(corpus_path, empty_text, done, in_corpus, limits)
    all_queries = load_queries(root / "queries.jsonl", in_queries, limits)
    metadata, nested = load_query_metadata(root / "queries.jsonl", limits)
    filters = load_query_filters(root / "queries.jsonl", limits)
    # a document's scalar fields, likewise
    doc_metadata, _ = load_query_metadata(corpus_path, limits)
    qrels = load_qrels(root / "qrels" / f"{split}.tsv", limits)
    unknown_q = sorted(q for q in qrels if q not in all_queries)
    if unknown_q:
        ids = counted(unknown_q, "unknown query id", form=repr)
        raise DataValidationError(f"qrels/{split}.tsv names {ids}")
    known_docs = corpus.keys() | set(empty)
    unknown_d = sorted({d for rels in qrels.values() for d in rels if d not in known_docs})
    if unknown_d:
        ids = counted(unknown_d, "unknown document id", form=repr)
        raise DataValidationError(f"qrels/{split}.tsv names {ids}")
    queries = {qid: all_queries[qid] for qid in sorted(qrels)}
    unjudged = tuple(q for q in all_queries if q not in qrels)
    elsewhere = {}
    for other in sorted((root / "qrels").glob("*.tsv")):
        if other.stem != split and unjudged:
            judged = _judged_qids(other, limits)
            elsewhere[other.stem] = sum(1 for q in unjudged if q in judged)
    return BeirDataset(
        corpus=corpus,
        queries=queries,
        qrels=qrels,
        corpus_path=corpus_path,
        unjudged=unjudged,
        empty_documents=tuple(empty),
        empty_text=empty_text,
        unjudged_in_other_splits=elsewhere,
        query_metadata={q: metadata[q] for q in queries if q in metadata},
        nested_metadata_fields=tuple(f for f in nested if f != "filter"),
        doc_metadata={d: m for d, m in doc_metadata.items() if d in corpus},
        query_filters={q: filters[q] for q in queries if q in filters},
        surrogates_replaced={"corpus": in_corpus.count, "queries": in_queries.count},
    )


def _judged_qids(path: Path, limits: ReadLimits = DEFAULT_LIMITS) -> set[str]:
    """Query ids another split's qrels file judges, read leniently: it only explains counts."""
    try:
        return {
            line.split("\t", 1)[0].strip() for _, line in iter_lines(path, limits) if "\t" in line
        }
    except DataValidationError:
        return set()
