"""Column contracts of the tables passed between stages, defined once and checked on read/write."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ragrig.core.errors import SchemaError
from ragrig.core.text import counted


@dataclass(frozen=True)
class Schema:
    columns: dict[str, str]  # name -> kind: str | int | float | bool | float? (nullable)
    unique: tuple[str, ...] = ()


# Statuses of a generations row with no answer: a failed call, or a call past its deadline.
GENERATION_FAILED = ("error", "timeout")
# Failure modes of an answer judged unfaithful (METRICS.md; ragrig.judge.decide): a hard
# check's kind names its mode; without one, an unsupported claim is a fabrication, and an answer
# whose every claim has support but whose answer-level score is below the threshold says more
# than its evidence (overgeneralisation). A stale fact is not detectable from the context.
FAILURE_MODES = (
    "contradiction",
    "wrong_number",
    "wrong_entity",
    "fabrication",
    "overgeneralisation",
)
# Failure modes of an answer read against its reference answer, claim by claim
# (ragrig.judge.correctness, which documents each)
CLAIM_FAILURE_MODES = (
    "wrong_number",
    "wrong_entity",
    "negation",
    "contradiction",
    "missing_information",
    "refusal_mismatch",
)
# The hard checks (ragrig.judge.overlap) that decide an answer unless judge.veto says otherwise:
# the two that cost MTRAG's human agreement nothing measurable (docs/benchmarks.md §19)
DEFAULT_VETO = ("number", "fabricated")

SCHEMAS: dict[str, Schema] = {
    "documents": Schema(
        {
            "doc_id": "str",
            "title": "str",
            "text": "str",
            "content": "str",
            "source": "str",
            "content_hash": "str",
        },
        ("doc_id",),
    ),
    "queries": Schema(
        {"qid": "str", "text": "str", "claim_label": "str", "n_gold": "int", "n_words": "int"},
        ("qid",),
    ),
    "qrels": Schema({"qid": "str", "doc_id": "str", "relevance": "int"}, ("qid", "doc_id")),
    "chunks": Schema(
        {"chunk_id": "str", "doc_id": "str", "text": "str", "start": "int", "end": "int"},
        ("chunk_id",),
    ),
    # parse=docling: one row per element of a documents row; content[start:end] == text, page
    # 1-based (0: no pages), level the item's depth in docling's document tree, self_ref
    # docling's `#/texts/12`-style reference
    "elements": Schema(
        {
            "doc_id": "str",
            "n": "int",
            "kind": "str",
            "text": "str",
            "page": "int",
            "section": "str",
            "start": "int",
            "end": "int",
            "level": "int",
            "self_ref": "str",
        },
        ("doc_id", "n"),
    ),
    "ids": Schema({"id": "str"}, ("id",)),
    "run": Schema(
        {"qid": "str", "doc_id": "str", "chunk_id": "str", "score": "float", "rank": "int"},
        ("qid", "doc_id"),
    ),
    # retrieve with metadata filters (ragrig.retrieve.filters): each document's metadata (one
    # text column per field), each query's predicate, and the runs of the hard/soft variants
    "doc_metadata": Schema({"doc_id": "str"}, ("doc_id",)),
    "predicates": Schema(
        {"qid": "str", "predicate": "str", "hard": "str", "soft": "str"}, ("qid",)
    ),
    "filter_runs": Schema(
        {
            "variant": "str",
            "qid": "str",
            "doc_id": "str",
            "chunk_id": "str",
            "score": "float",
            "rank": "int",
        },
        ("variant", "qid", "doc_id"),
    ),
    "lanes": Schema(
        {
            "lane": "str",
            "qid": "str",
            "doc_id": "str",
            "chunk_id": "str",
            "score": "float",
            "rank": "int",
        },
        ("lane", "qid", "doc_id"),
    ),
    "latency": Schema({"qid": "str", "stage": "str", "latency_ms": "float"}, ("qid", "stage")),
    "ann_recall": Schema({"qid": "str", "k": "int", "recall": "float"}, ("qid", "k")),
    "generations": Schema(
        {
            "qid": "str",
            "status": "str",
            "answer": "str",
            "context_chunk_ids": "str",
            "contexts": "str",
            "citations": "str",
            "model": "str",
            "prompt_tokens": "int",
            "completion_tokens": "int",
            "latency_ms": "float",
            "error": "str",
            "cpu_s": "float",  # process CPU seconds of the answer's call
            "samples": "str",  # JSON list of self-consistency samples; "[]" without
        },
        ("qid",),
    ),
    "judgments": Schema(
        {
            "qid": "str",
            "status": "str",
            "n_claims": "int",
            "n_supported": "int",
            "faithfulness": "float?",
            "claims": "str",
            "latency_ms": "float",
            "error": "str",
            # the faithfulness composite and the LLM judge (ragrig.judge.composite, .llm)
            "claim_support": "float?",
            "answer_support": "float?",
            "faithfulness_parts": "str",
            # the answer-level decision and its hard checks (ragrig.judge.decide)
            "judged_faithful": "float?",
            "contradictions": "str",
            "failure_mode": "str",
            "llm_status": "str",
            "llm_faithfulness": "float?",
            "llm_relevance": "float?",
            "llm_coverage": "float?",
            "llm_clarity": "float?",
            "llm_external_consistency": "float?",
            "llm_cached": "bool",
            "judge_prompt_tokens": "int",
            "judge_completion_tokens": "int",
            "judge_cpu_s": "float",
            "judge_model": "str",
        },
        ("qid",),
    ),
    # claim-level correctness against a reference (ragrig.judge.correctness)
    "correctness": Schema(
        {
            "qid": "str",
            "reference_column": "str",
            "status": "str",
            "answer_claims": "int",
            "reference_claims": "int",
            "supported": "int",
            "covered": "int",
            "contradictions": "int",
            "claim_precision": "float?",
            "claim_recall": "float?",
            "claim_f1": "float?",
            "vital_nuggets": "int",
            "vital_recall": "float?",
            "soft_precision": "float?",
            "soft_recall": "float?",
            "soft_f1": "float?",
            "answer_kind": "str",
            "reference_kind": "str",
            "claim_score": "float?",
            "failure_mode": "str",
            "claims": "str",
        },
        ("qid",),
    ),
    "per_query": Schema(
        {"qid": "str", "measure": "str", "value": "float"},
        ("qid", "measure"),
    ),
}

GENERATION_STATUSES = ("ok", "empty", "error")
JUDGMENT_STATUSES = ("scored", "no_claims", "invalid", "error", "skipped")
# the LLM judge's call per answer: disabled (no judge.llm), skipped (no answer to judge), ok,
# error (HTTP 4xx, or 5xx/connection after every retry), timeout, invalid (not JSON or breaking
# the schema); a cached call is ok with llm_cached true
LLM_JUDGE_STATUSES = ("disabled", "skipped", "ok", "error", "timeout", "invalid")


def _kind_ok(series: pd.Series, kind: str) -> bool:
    nullable = kind.endswith("?")
    kind = kind.rstrip("?")
    if not nullable and series.isna().any():
        return False
    values = series.dropna()
    if kind == "str":
        return (
            pd.api.types.is_string_dtype(series) or values.map(lambda v: isinstance(v, str)).all()
        )
    if kind == "int":
        return pd.api.types.is_integer_dtype(series) or (len(values) == 0)
    if kind == "float":
        return pd.api.types.is_float_dtype(series) or pd.api.types.is_integer_dtype(series)
    if kind == "bool":
        return pd.api.types.is_bool_dtype(series)
    raise SchemaError(f"unknown column kind {kind!r}")


def validate(df: pd.DataFrame, schema: str) -> pd.DataFrame:
    """Check required columns, kinds and unique keys; raise SchemaError naming the problem."""
    if schema not in SCHEMAS:
        raise SchemaError(f"unknown schema {schema!r}")
    spec = SCHEMAS[schema]
    missing = [c for c in spec.columns if c not in df.columns]
    if missing:
        raise SchemaError(
            f"{schema}: missing columns {missing}; has {counted(list(df.columns), 'column')}"
        )
    for col, kind in spec.columns.items():
        if not _kind_ok(df[col], kind):
            raise SchemaError(f"{schema}: column {col!r} is {df[col].dtype}, expected {kind}")
    if spec.unique:
        dup = df.duplicated(list(spec.unique), keep=False)
        if dup.any():
            rows = df.loc[dup, list(spec.unique)].to_dict("records")
            raise SchemaError(
                f"{schema}: duplicate keys {list(spec.unique)}: {counted(rows, 'row')}"
            )
    return df


_DTYPES = {"str": "object", "int": "int64", "float": "float64", "bool": "bool"}


def empty_table(schema: str) -> pd.DataFrame:
    """A table of `schema` with no row, every column of its kind (an empty object column would
    not pass as float)."""
    return pd.DataFrame(
        {c: pd.Series(dtype=_DTYPES[k.rstrip("?")]) for c, k in SCHEMAS[schema].columns.items()}
    )
