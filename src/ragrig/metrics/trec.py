"""Runs and qrels in the TREC text formats that trec_eval, ranx, ir_measures and pyserini read.

Run file, one line per retrieved document, `qid Q0 docid rank score tag`; qrels file,
`qid 0 docid relevance`. Both are written at document level, as ragrig's metrics use them
(a run table holds one row per query and document).

Tie order: trec_eval and its readers order a query's documents by score (then by their own tie
rule, trec_eval by document id descending), not by the rank column, and trec_eval (so
pytrec_eval and ir_measures) holds a score as a single-precision float. So that every reader
sees ragrig's order, scores are written at single precision and fall strictly within each query:
a score that does not fall below its predecessor's (after rounding to single precision) is
lowered to the next single-precision value below it (`numpy.nextafter`). Each is written as
the shortest text that reads back as that value. Queries come sorted by id, documents by rank.

The qrels file holds the judgments of the queries ragrig scores (those with a relevant
document); a query whose judgments are all non-positive forms the `n_gold=0` slice and is not
scored, so it is left out. A query with judgments but no run counts as an empty ranking in
ragrig's means: trec_eval gives the same means with `-c`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from ragrig.core.errors import DataValidationError
from ragrig.core.io import atomic_write_text
from ragrig.core.text import id_problem, strict_float, strict_int


def _check_id(value: str, what: str) -> str:
    """`value` as text when a TREC file can hold it; the rule is parse's (`id_problem`), so an id
    parse accepted never fails here after the compute."""
    value = str(value)
    problem = id_problem(value)
    if problem:
        raise DataValidationError(
            f"{what} {value!r} {problem}: TREC files separate fields by whitespace"
        )
    return value


def trec_run_lines(run: pd.DataFrame, tag: str) -> list[str]:
    """Lines of a TREC run from a run table (qid, doc_id, score, rank)."""
    _check_id(tag, "run tag")
    ordered = run.sort_values(["qid", "rank"], kind="mergesort")
    lines: list[str] = []
    for qid, g in ordered.groupby("qid", sort=True):
        _check_id(qid, "query id")
        prev = np.float32(np.inf)
        for rank, (doc, raw) in enumerate(
            zip(g["doc_id"].tolist(), g["score"].astype(float).tolist(), strict=True), start=1
        ):
            score = np.float32(raw)
            if not np.isfinite(score):
                raise DataValidationError(
                    f"run of query {qid!r}: score of {doc!r} is {raw} (not a finite float32)"
                )
            if score >= prev:
                score = np.nextafter(prev, np.float32(-np.inf))
            prev = score
            text = np.format_float_positional(score, unique=True, trim="-")
            lines.append(f"{qid} Q0 {_check_id(doc, 'document id')} {rank} {text} {tag}")
    return lines


def write_trec_run(run: pd.DataFrame, path: Path, tag: str) -> None:
    atomic_write_text(Path(path), "".join(line + "\n" for line in trec_run_lines(run, tag)))


def trec_qrels_lines(qrels: pd.DataFrame) -> list[str]:
    """Lines of TREC qrels from a qrels table (qid, doc_id, relevance), scored queries only."""
    positive = set(qrels.loc[qrels["relevance"] > 0, "qid"])
    kept = qrels[qrels["qid"].isin(positive)].sort_values(["qid", "doc_id"], kind="mergesort")
    return [
        f"{_check_id(q, 'query id')} 0 {_check_id(d, 'document id')} {int(r)}"
        for q, d, r in zip(kept["qid"], kept["doc_id"], kept["relevance"], strict=True)
    ]


def write_trec_qrels(qrels: pd.DataFrame, path: Path) -> None:
    atomic_write_text(Path(path), "".join(line + "\n" for line in trec_qrels_lines(qrels)))


def _lines(path: Path, n_fields: int, kind: str, layout: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of each non-blank line; a line with another field count, or a byte
    that is not UTF-8, raises naming file and line."""
    from ragrig.core.io import iter_lines

    for n, line in iter_lines(Path(path)):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != n_fields:
            raise DataValidationError(
                f"{path}:{n}: a TREC {kind} line has {n_fields} fields ({layout}), got {len(parts)}"
            )
        yield n, parts


def read_trec_run(path: Path) -> pd.DataFrame:
    """A TREC run file as a run table (qid, doc_id, score, rank), each query's documents in the
    order trec_eval reads them: score descending, ties by document id descending; `rank` is
    renumbered 1..n in that order. A malformed line raises naming file and line."""
    rows = [
        (parts[0], parts[2], strict_float(parts[4], f"{path}:{n}", "score"))
        for n, parts in _lines(path, 6, "run", "qid Q0 docid rank score tag")
    ]
    table = pd.DataFrame(rows, columns=["qid", "doc_id", "score"])
    dup = table.duplicated(["qid", "doc_id"])
    if dup.any():
        first = table[dup].iloc[0]
        raise DataValidationError(
            f"{path}: query {first['qid']!r} lists document {first['doc_id']!r} twice"
        )
    table = table.sort_values(
        ["qid", "score", "doc_id"], ascending=[True, False, False], kind="mergesort"
    )
    table["rank"] = table.groupby("qid").cumcount() + 1
    table["chunk_id"] = table["doc_id"]
    return table[["qid", "doc_id", "chunk_id", "score", "rank"]].reset_index(drop=True)


def read_trec_qrels(path: Path) -> pd.DataFrame:
    """A TREC qrels file as a qrels table (qid, doc_id, relevance)."""
    rows = [
        (parts[0], parts[2], strict_int(parts[3], f"{path}:{n}", "relevance", signed=True))
        for n, parts in _lines(path, 4, "qrels", "qid iter docid relevance")
    ]
    return pd.DataFrame(rows, columns=["qid", "doc_id", "relevance"])
