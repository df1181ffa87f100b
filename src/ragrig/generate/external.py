"""Answers of the team's own system (generate=answers_file, generate=rag_http) as the generations
table the judge and the report read, the passages it used mapped onto the corpus.

An answer names the passages its system used by id (`passage_ids`): a chunk id of the chunk
stage, or a document id (the chunk of it the run ranks for the query, else its first chunk). Its
`passages` (the texts the system actually put in its prompt) are what faithfulness is judged
against; without them, the chunks' texts cut at `max_passage_chars`. A passage the run does not
rank for the query is added to the *context run* (context_run.parquet: qid, doc_id, chunk_id,
score 0, rank after the run's), so the report maps every context passage to its document; it
is counted as `passages_outside_the_run`.

Answers file (JSONL, one object per line): `qid` and `answer` required; optional `passage_ids`,
`passages`, `citations` (passage numbers, 1-based; else read from the answer's [n] marks),
`latency_ms`, `prompt_tokens`, `completion_tokens`, and `status` ("ok", "error",
"timeout"; a failed call's `error`). A line that is not JSON or lacks a required field, a qid
given twice or not in the queries, a passage id the corpus lacks: one error line naming the
file, the line and the case.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ragrig.core.errors import DataValidationError
from ragrig.core.schemas import empty_table
from ragrig.core.text import counted

STATUSES = ("ok", "error", "timeout", "empty")


@dataclass
class Answer:
    """One answer of the team's system, as read from its file or its endpoint."""

    qid: str
    answer: str = ""
    passage_ids: list[str] = field(default_factory=list)
    passages: list[str] | None = None
    citations: list[int] | None = None
    latency_ms: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    status: str = "ok"
    error: str = ""


def _strings(value: Any, where: str, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
        raise DataValidationError(f"{where}: {what} is not a list of strings")
    return [str(v) for v in value]


def _number(obj: Mapping[str, Any], key: str, where: str, kind: type) -> Any:
    value = obj.get(key, 0)
    if value is None:
        return kind(0)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise DataValidationError(f"{where}: {key} {value!r} is not a number")
    if value < 0 or (kind is int and value != int(value)):
        raise DataValidationError(f"{where}: {key} {value!r} is not a count >= 0")
    return kind(value)


def parse_answer(obj: Any, where: str) -> Answer:
    """One answer object (a line of an answers file), checked."""
    if not isinstance(obj, dict):
        raise DataValidationError(f"{where}: not a JSON object")
    missing = [k for k in ("qid", "answer") if k not in obj]
    if missing:
        raise DataValidationError(f"{where}: no {' or '.join(missing)}")
    if not isinstance(obj["answer"], str):
        raise DataValidationError(f"{where}: answer is not a string")
    status = obj.get("status", "ok")
    if status not in STATUSES:
        raise DataValidationError(f"{where}: status {status!r} is not one of {STATUSES}")
    ids = _strings(obj.get("passage_ids", []), where, "passage_ids")
    passages = obj.get("passages")
    if passages is not None:
        passages = _strings(passages, where, "passages")
        if ids and len(passages) != len(ids):
            raise DataValidationError(
                f"{where}: {len(passages)} passages for {len(ids)} passage_ids"
            )
    cites = obj.get("citations")
    if cites is not None and (
        not isinstance(cites, list) or not all(type(c) is int and c >= 1 for c in cites)
    ):
        raise DataValidationError(f"{where}: citations is not a list of passage numbers >= 1")
    return Answer(
        qid=str(obj["qid"]),
        answer=obj["answer"],
        passage_ids=ids,
        passages=passages,
        citations=cites,
        latency_ms=_number(obj, "latency_ms", where, float),
        prompt_tokens=_number(obj, "prompt_tokens", where, int),
        completion_tokens=_number(obj, "completion_tokens", where, int),
        status=status,
        error=str(obj.get("error", "") or ""),
    )


def read_answers_file(path: Path) -> list[Answer]:
    """Every answer of a JSONL answers file, checked line by line; a qid given twice raises."""
    from ragrig.core.io import iter_lines

    path = Path(path)
    if not path.is_file():
        raise DataValidationError(f"answers file not found: {path} (system.answers_file)")
    answers: list[Answer] = []
    seen: dict[str, int] = {}
    for n, line in iter_lines(path):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise DataValidationError(f"{where}: not JSON ({exc})") from exc
        answer = parse_answer(obj, where)
        if answer.qid in seen:
            raise DataValidationError(
                f"{where}: query {answer.qid!r} is answered twice (first on line {seen[answer.qid]})"
            )
        seen[answer.qid] = n
        answers.append(answer)
    if not answers:
        raise DataValidationError(f"{path}: the answers file holds no answer (system.answers_file)")
    return answers


def to_generations(
    answers: list[Answer],
    source: str,
    query_ids: list[str],
    run: pd.DataFrame,
    chunks: pd.DataFrame,
    max_passage_chars: int,
    model: str,
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, int]]:
    """(generations, context run, counts) of the answers; `source` names them in errors."""
    from ragrig.generate.step import citations as cited

    known = set(query_ids)
    unknown = sorted({a.qid for a in answers} - known)
    if unknown:
        queries = counted(unknown, "query", "queries", form=repr)
        raise DataValidationError(f"{source}: {queries} not in the dataset")
    text = dict(zip(chunks["chunk_id"].astype(str), chunks["text"], strict=True))
    doc_of = dict(zip(chunks["chunk_id"].astype(str), chunks["doc_id"].astype(str), strict=True))
    first_chunk: dict[str, str] = {}
    for c, d in zip(chunks["chunk_id"].astype(str), chunks["doc_id"].astype(str), strict=True):
        first_chunk.setdefault(d, c)
    ranked = {(str(q), str(c)) for q, c in zip(run["qid"], run["chunk_id"], strict=True)}
    ranked_doc = {
        (str(q), str(d)): str(c)
        for q, d, c in zip(run["qid"], run["doc_id"], run["chunk_id"], strict=True)
    }
    next_rank = run.groupby("qid")["rank"].max().to_dict() if len(run) else {}
    rows, extra = [], []
    counts = {"answers": len(answers), "passages_outside_the_run": 0, "passage_texts_given": 0}
    for a in answers:
        chunk_ids = []
        for pid in a.passage_ids:
            if (a.qid, pid) in ranked:  # a chunk the run ranks for the query
                chunk = pid
            elif (a.qid, pid) in ranked_doc:  # a document it ranks: the run's chunk of it
                chunk = ranked_doc[(a.qid, pid)]
            elif pid in text:
                chunk = pid
            elif pid in first_chunk:
                chunk = first_chunk[pid]
            else:
                raise DataValidationError(
                    f"{source}: query {a.qid!r} used passage {pid!r}, neither a chunk nor a "
                    "document of the corpus"
                )
            if (a.qid, chunk) not in ranked:
                counts["passages_outside_the_run"] += 1
                next_rank[a.qid] = next_rank.get(a.qid, 0) + 1
                ranked.add((a.qid, chunk))
                extra.append((a.qid, doc_of[chunk], chunk, 0.0, next_rank[a.qid]))
            chunk_ids.append(chunk)
        if a.passages is not None:
            passages = a.passages
            counts["passage_texts_given"] += 1
        else:
            passages = [text[c][:max_passage_chars] for c in chunk_ids]
        failed = a.status in ("error", "timeout")
        status = a.status if failed or a.answer.strip() else "empty"
        numbers = a.citations if a.citations is not None else cited(a.answer, len(passages))
        rows.append(
            {
                "qid": a.qid,
                "status": status,
                "answer": "" if failed else a.answer.strip(),
                "context_chunk_ids": json.dumps(chunk_ids),
                "contexts": json.dumps(passages, ensure_ascii=False),
                "citations": json.dumps([n for n in numbers if n <= len(passages)]),
                "model": model,
                "prompt_tokens": a.prompt_tokens,
                "completion_tokens": a.completion_tokens,
                "latency_ms": a.latency_ms,
                "error": a.error,
                "cpu_s": 0.0,
                "samples": "[]",
            }
        )
    gens = pd.DataFrame(rows).sort_values("qid", kind="mergesort").reset_index(drop=True)
    context_run = (
        pd.DataFrame(extra, columns=["qid", "doc_id", "chunk_id", "score", "rank"])
        if extra
        else empty_table("run")
    )
    return gens, context_run, counts
