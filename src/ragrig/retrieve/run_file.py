"""retrieve=run_file: the rankings of the team's own retriever, read from a file and checked
against the corpus and the queries, then reranked, generated and judged like the pipeline's own.

Formats (`retrieve.format`, auto: by the file's suffix, `.run`/`.trec`/`.txt` TREC):

* TREC, `qid Q0 docid rank score tag` per line (ragrig.metrics.trec.read_trec_run);
* JSONL, one object per line with `qid`, `doc_id`, `score` (and optionally `chunk_id`);
* parquet, the same columns.

Each query's documents are ordered as trec_eval orders them: score descending, a tie broken by
document id descending (counted as `ties`, so a run whose order rests on ties says so); `rank`
is renumbered 1..n and at most `depth` documents are kept. A row naming a document the corpus
lacks, a query the queries table lacks, a chunk of another document, a document listed twice
for one query, a missing field or a score that is not a finite number: one error line naming
the file, the count and the first cases. A query of the queries table the run does not rank is
an empty ranking (counted as `queries_without_ranking`, as trec_eval -c counts it).

The passage a document contributes to the context (its `chunk_id`): the chunk the file names,
else the document's chunk nearest the query by the embed stage's vectors (cosine), else its
first chunk; with chunk=document the document's one chunk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragrig.core.errors import DataValidationError
from ragrig.core.text import sample

TREC_SUFFIXES = (".run", ".trec", ".txt")


def file_format(path: Path, fmt: str) -> str:
    if fmt != "auto":
        return fmt
    name = path.name.removesuffix(".gz")
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith(".jsonl"):
        return "jsonl"
    if name.endswith(TREC_SUFFIXES):
        return "trec"
    raise DataValidationError(
        f"{path}: cannot tell the run file's format from its name (.run/.trec/.txt, .jsonl, "
        ".parquet); set retrieve.format"
    )


def _read_jsonl(path: Path) -> pd.DataFrame:
    from ragrig.core.io import iter_lines

    rows = []
    for n, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise DataValidationError(f"{path}:{n}: not a JSON object ({exc})") from exc
        if not isinstance(obj, dict):
            raise DataValidationError(f"{path}:{n}: not a JSON object")
        missing = [k for k in ("qid", "doc_id", "score") if k not in obj]
        if missing:
            raise DataValidationError(f"{path}:{n}: no {', '.join(missing)}")
        score = obj["score"]
        if isinstance(score, bool) or not isinstance(score, int | float) or not np.isfinite(score):
            raise DataValidationError(f"{path}:{n}: score {score!r} is not a finite number")
        chunk = obj.get("chunk_id")
        rows.append((str(obj["qid"]), str(obj["doc_id"]), float(score), chunk))
    table = pd.DataFrame(rows, columns=["qid", "doc_id", "score", "chunk_id"])
    return table


def _read_parquet(path: Path) -> pd.DataFrame:
    try:
        table = pd.read_parquet(path)
    except Exception as exc:  # a corrupt or non-parquet file: one line
        raise DataValidationError(f"{path}: not a readable parquet file ({exc})") from exc
    missing = [c for c in ("qid", "doc_id", "score") if c not in table.columns]
    if missing:
        raise DataValidationError(f"{path}: no column {', '.join(missing)}")
    out = pd.DataFrame(
        {
            "qid": table["qid"].astype(str),
            "doc_id": table["doc_id"].astype(str),
            "score": pd.to_numeric(table["score"], errors="coerce").astype(float),
            "chunk_id": table["chunk_id"] if "chunk_id" in table.columns else None,
        }
    )
    bad = ~np.isfinite(out["score"].to_numpy())
    if bad.any():
        row = out[bad].iloc[0]
        raise DataValidationError(
            f"{path}: {int(bad.sum())} scores are not finite numbers (first: query "
            f"{row['qid']!r}, document {row['doc_id']!r})"
        )
    return out


def read_run_file(path: Path, fmt: str = "auto") -> pd.DataFrame:
    """The file's rows as a table (qid, doc_id, score, chunk_id: None where not given)."""
    from ragrig.metrics.trec import read_trec_run

    path = Path(path)
    if not path.is_file():
        raise DataValidationError(f"run file not found: {path} (system.run_file)")
    kind = file_format(path, fmt)
    if kind == "trec":
        table = read_trec_run(path)[["qid", "doc_id", "score"]].assign(chunk_id=None)
    elif kind == "jsonl":
        table = _read_jsonl(path)
    else:
        table = _read_parquet(path)
    if table.empty:
        raise DataValidationError(f"{path}: the run file ranks no document (system.run_file)")
    dup = table.duplicated(["qid", "doc_id"])
    if dup.any():
        first = table[dup].iloc[0]
        raise DataValidationError(
            f"{path}: {int(dup.sum())} rows list a document twice for one query (first: "
            f"query {first['qid']!r}, document {first['doc_id']!r})"
        )
    return table.reset_index(drop=True)


def _unknown(values: pd.Series, known: set[str], what: str, path: Path) -> None:
    bad = sorted(set(values) - known)
    if bad:
        raise DataValidationError(
            f"{path}: {len(bad)} {what} not in the dataset ({sample(bad, form=repr)}): is "
            "system.run_file the run of this corpus and these queries?"
        )


def run_from_file(
    table: pd.DataFrame,
    path: Path,
    query_ids: list[str],
    chunks: pd.DataFrame,
    depth: int,
    query_vectors: dict[str, np.ndarray] | None = None,
    chunk_vectors: dict[str, np.ndarray] | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The run table (qid, doc_id, chunk_id, score, rank) of a read run file, checked against
    the queries and the chunks (whose documents are the corpus), and what was counted."""
    _unknown(table["qid"], set(query_ids), "queries", path)
    doc_chunks: dict[str, list[str]] = {}
    for chunk_id, doc_id in zip(chunks["chunk_id"], chunks["doc_id"], strict=True):
        doc_chunks.setdefault(str(doc_id), []).append(str(chunk_id))
    _unknown(table["doc_id"], set(doc_chunks), "documents", path)
    ordered = table.sort_values(
        ["qid", "score", "doc_id"], ascending=[True, False, False], kind="mergesort"
    ).reset_index(drop=True)
    ties = int(ordered.duplicated(["qid", "score"]).sum())
    ordered["rank"] = ordered.groupby("qid").cumcount() + 1
    cut = int((ordered["rank"] > depth).sum())
    ordered = ordered[ordered["rank"] <= depth].reset_index(drop=True)

    chosen, nearest = [], 0
    for qid, doc, given in zip(ordered["qid"], ordered["doc_id"], ordered["chunk_id"], strict=True):
        options = doc_chunks[doc]
        if given is not None and not (isinstance(given, float) and np.isnan(given)):
            if str(given) not in options:
                raise DataValidationError(
                    f"{path}: query {qid!r} names chunk {given!r}, which is not a chunk of "
                    f"document {doc!r}"
                )
            chosen.append(str(given))
        elif len(options) == 1:
            chosen.append(options[0])
        elif query_vectors is not None and chunk_vectors is not None and qid in query_vectors:
            sims = [float(query_vectors[qid] @ chunk_vectors[c]) for c in options]
            chosen.append(options[int(np.argmax(sims))])
            nearest += 1
        else:
            chosen.append(options[0])
    ordered["chunk_id"] = chosen
    run = ordered[["qid", "doc_id", "chunk_id", "score", "rank"]]
    counts = {
        "rows": len(table),
        "queries_ranked": int(run["qid"].nunique()),
        "queries_without_ranking": len(set(query_ids) - set(run["qid"])),
        "ties": ties,
        "cut_at_depth": cut,
        "passage_by_nearest_chunk": nearest,
    }
    return run, counts
