"""The relevance axis of one query: do the passages given to the generator answer the question?

Parts, each in 0..1, combined with configurable weights renormalised over the parts available
for the query (`ragrig.metrics.scorecard.combine`):

* `semantic`: the best cosine between the question's vector and a context passage's vector
  (embed-stage vectors, normalised), mapped linearly from [irrelevant, relevant] to [0, 1] and
  clipped. Raw MiniLM cosines are not relevance probabilities: on SciFact test (all-MiniLM-L6-v2)
  a claim and its gold abstract have a median cosine of 0.59, a BM25-retrieved non-gold
  abstract 0.44, a random abstract 0.09; the defaults (0.1, 0.6) map a random passage to 0, a
  typical gold passage to about 1 and a topically close one to about 0.7.
* `keyword`: share of the question's content words (`ragrig.core.text.tokenize`: lower case,
  stop words out, stemmed) found anywhere in the context.
* `llm`: the LLM judge's relevance rating, when the judgments carry one.
* `context`: with qrels, the mean of ranked context precision and context recall. Context
  precision is also reported as the plain share of context passages from a positive document,
  but that share cannot reach 1 when a query has fewer positive documents than passages (one
  gold abstract among 3 passages: 1/3 at best), so the aggregate uses the rank-aware form
  (mean of precision@i at each positive passage's rank i, as Ragas's context precision).

A query whose context is empty retrieved nothing: every available part is 0 (`empty_context`
counted apart), the retrieval convention of an empty ranking.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

PARTS = ("semantic", "keyword", "llm", "context")


def map_similarity(cosine: float, irrelevant: float, relevant: float) -> float:
    """Cosine mapped linearly so that `irrelevant` -> 0 and `relevant` -> 1, clipped to [0, 1]."""
    if relevant <= irrelevant:
        raise ValueError(f"similarity range needs irrelevant < relevant: {irrelevant}, {relevant}")
    return float(min(1.0, max(0.0, (cosine - irrelevant) / (relevant - irrelevant))))


def best_cosine(query_vec: np.ndarray, passage_vecs: np.ndarray) -> float:
    """Highest cosine of the query with any passage (vectors normalised here, not assumed)."""
    q = np.asarray(query_vec, dtype=np.float64)
    p = np.asarray(passage_vecs, dtype=np.float64).reshape(-1, q.shape[0])
    qn = np.linalg.norm(q)
    pn = np.linalg.norm(p, axis=1)
    if qn == 0 or not len(p) or not (pn > 0).any():
        raise ValueError("cosine of a zero vector")
    sims = (p @ q)[pn > 0] / (pn[pn > 0] * qn)
    return float(sims.max())


def keyword_overlap(question_tokens: Sequence[str], context_tokens: Iterable[str]) -> float | None:
    """Share of the question's distinct content words present in the context; None when the
    question has no content word."""
    q = set(question_tokens)
    if not q:
        return None
    return len(q & set(context_tokens)) / len(q)


def context_precision(context_docs: Sequence[str], positives: set[str]) -> float | None:
    """Share of context passages whose document is a positive one (None for an empty context)."""
    if not context_docs:
        return None
    return sum(1 for d in context_docs if d in positives) / len(context_docs)


def context_precision_ranked(context_docs: Sequence[str], positives: set[str]) -> float | None:
    """Mean of precision@i over the ranks i holding a positive passage (0 when none does; None
    for an empty context)."""
    if not context_docs:
        return None
    hits, total = 0, 0.0
    for i, d in enumerate(context_docs, start=1):
        if d in positives:
            hits += 1
            total += hits / i
    return total / hits if hits else 0.0


def context_recall(context_docs: Sequence[str], positives: set[str]) -> float | None:
    """Share of the query's positive documents present in the context (None without positives)."""
    if not positives:
        return None
    return len(positives & set(context_docs)) / len(positives)
