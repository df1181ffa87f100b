"""Citation precision and recall against gold documents (SciFact: the rationale documents).

A citation [n] of an answer names passage n of the context the generator saw; the passage is a
chunk (generations `context_chunk_ids`), the chunk belongs to a document (the ranked run the
context was taken from). A citation is correct when that document is a gold document of the
query. Per answer:

* precision = correct citations / citations (distinct passages cited). An answer without
  citations has no precision (counted apart as `no_citations`, not 0/0);
* recall = gold documents present in the context that the answer cites / gold documents present
  in the context. An answer whose context holds no gold document has no recall (counted apart as
  `no_gold_in_context`).

Queries without any gold document (SciFact NOT_ENOUGH_INFO claims) have neither value and are
counted as `no_gold`. Only answered generations (status ok) are measured.

Gold documents (`gold_documents`): the documents of a claim's rationales when the queries table
has SciFact's `evidence` column and the claim's label is known, else the query's documents with
a positive relevance judgment (qrels).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ragrig.core.errors import DataValidationError


@dataclass(frozen=True)
class CitationScore:
    qid: str
    n_citations: int
    n_correct: int
    n_gold_in_context: int
    n_gold_cited: int

    @property
    def precision(self) -> float | None:
        return self.n_correct / self.n_citations if self.n_citations else None

    @property
    def recall(self) -> float | None:
        return self.n_gold_cited / self.n_gold_in_context if self.n_gold_in_context else None


def gold_documents(queries: pd.DataFrame, qrels: pd.DataFrame) -> dict[str, frozenset[str]]:
    """qid -> its gold documents (module doc): rationale documents where known, else qrels."""
    positive: dict[str, set[str]] = {}
    for qid, doc_id, rel in zip(qrels["qid"], qrels["doc_id"], qrels["relevance"], strict=True):
        if rel > 0:
            positive.setdefault(str(qid), set()).add(str(doc_id))
    gold = {str(q): frozenset(positive.get(str(q), ())) for q in queries["qid"]}
    if "evidence" in queries.columns and "claim_label" in queries.columns:
        for qid, label, evidence in zip(
            queries["qid"], queries["claim_label"], queries["evidence"], strict=True
        ):
            if label == "unknown" or not isinstance(evidence, str):
                continue
            try:
                gold[str(qid)] = frozenset(str(d) for d in json.loads(evidence))
            except (ValueError, TypeError) as exc:
                raise DataValidationError(
                    f"queries: evidence of query {qid!r} is not a JSON object: {exc}"
                ) from exc
    return gold


def chunk_documents(run: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(qid, chunk_id) -> doc_id of the ranked run the generator's contexts came from."""
    return {
        (str(q), str(c)): str(d)
        for q, c, d in zip(run["qid"], run["chunk_id"], run["doc_id"], strict=True)
    }


def context_documents(
    qid: str, chunk_ids: Sequence[Any], doc_of: Mapping[tuple[str, str], str]
) -> list[str]:
    """The documents of a query's context passages, in order; a chunk the run does not place
    for that query is a DataValidationError naming both."""
    docs = []
    for chunk_id in chunk_ids:
        if (qid, str(chunk_id)) not in doc_of:
            raise DataValidationError(
                f"generations: query {qid!r} was given chunk {chunk_id!r}, which the run "
                "does not rank for it"
            )
        docs.append(doc_of[(qid, str(chunk_id))])
    return docs


def gold_in_context(
    generations: pd.DataFrame, run: pd.DataFrame, gold: Mapping[str, frozenset[str]]
) -> dict[str, bool]:
    """qid -> whether a gold document reached the context of its answer (status ok only)."""
    doc_of = chunk_documents(run)
    out = {}
    for g in generations.itertuples(index=False):
        if g.status != "ok":
            continue
        qid = str(g.qid)
        docs = context_documents(qid, json.loads(g.context_chunk_ids), doc_of)
        out[qid] = bool(gold.get(qid, frozenset()) & set(docs))
    return out


def score_citations(
    generations: pd.DataFrame,
    run: pd.DataFrame,
    gold: Mapping[str, frozenset[str]],
) -> tuple[list[CitationScore], dict[str, int]]:
    """One CitationScore per answered query that has gold documents, and the counts of what
    was not measured. `run` (qid, chunk_id, doc_id) is the ranking the contexts came from; a
    context chunk it does not place for that query is a DataValidationError naming both."""
    doc_of = chunk_documents(run)
    scores: list[CitationScore] = []
    counts = {"answers": 0, "no_gold": 0, "no_citations": 0, "no_gold_in_context": 0}
    for g in generations.itertuples(index=False):
        if g.status != "ok":
            continue
        counts["answers"] += 1
        qid = str(g.qid)
        gold_docs = gold.get(qid, frozenset())
        if not gold_docs:
            counts["no_gold"] += 1
            continue
        docs = context_documents(qid, json.loads(g.context_chunk_ids), doc_of)
        cited = [n for n in json.loads(g.citations) if 1 <= n <= len(docs)]
        cited_docs = {docs[n - 1] for n in cited}
        in_context = gold_docs & set(docs)
        score = CitationScore(
            qid,
            n_citations=len(cited),
            n_correct=sum(docs[n - 1] in gold_docs for n in cited),
            n_gold_in_context=len(in_context),
            n_gold_cited=len(in_context & cited_docs),
        )
        counts["no_citations"] += not score.n_citations
        counts["no_gold_in_context"] += not score.n_gold_in_context
        scores.append(score)
    return scores, counts


def citation_long(scores: list[CitationScore]) -> pd.DataFrame:
    """The per-query measures `citation/precision` and `citation/recall` (where defined)."""
    rows = []
    for s in scores:
        if s.precision is not None:
            rows.append((s.qid, "citation/precision", s.precision))
        if s.recall is not None:
            rows.append((s.qid, "citation/recall", s.recall))
    return pd.DataFrame(rows, columns=["qid", "measure", "value"])


def citation_summary(scores: list[CitationScore], counts: Mapping[str, int]) -> dict[str, Any]:
    """metrics.json `citations`: micro precision and recall (pooled over answers) with their
    denominators, the per-answer means, and the counts of answers not measured."""
    n_cit = sum(s.n_citations for s in scores)
    n_gold = sum(s.n_gold_in_context for s in scores)
    prec = [s.precision for s in scores if s.precision is not None]
    rec = [s.recall for s in scores if s.recall is not None]
    return {
        "precision": sum(s.n_correct for s in scores) / n_cit if n_cit else None,
        "recall": sum(s.n_gold_cited for s in scores) / n_gold if n_gold else None,
        "mean_precision": sum(prec) / len(prec) if prec else None,
        "mean_recall": sum(rec) / len(rec) if rec else None,
        "n_citations": n_cit,
        "n_gold_in_context": n_gold,
        "n_answers_with_citations": len(prec),
        "n_answers_with_context_gold": len(rec),
        **dict(counts),
    }
