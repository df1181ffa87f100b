"""Metadata filters and what they cost (METRICS.md, "Filters: eligibility vs relevance").

Eligibility (tenant, permissions) is a hard invariant checked on its own; a relevance preference
(locale, recency, version) may be a hard filter. Gold sets are intersected with the caller's
eligible documents first; a query whose gold is all ineligible belongs to the permission tests,
not to these measures.

* false-exclusion rate = queries whose every eligible gold document the filter removed / queries
  with at least one eligible gold document (an empty denominator raises: an unmeasured rate is
  never 0);
* per-document exclusion rate = eligible gold documents the filter removed / eligible gold
  documents (the partial losses the query rate hides);
* Recall@k keeps the original eligible gold set as its denominator: rebuilding the gold set after
  filtering (dropping queries whose gold was filtered out) inflates recall, and is offered here
  only to show by how much (`recall_over_filtered_gold`, named invalid).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragrig.core.predicates import Metadata, matches, passing  # noqa: F401 (re-exported)
from ragrig.core.text import counted


@dataclass(frozen=True)
class Exclusion:
    rate: float  # queries whose every eligible gold document was removed / eligible queries
    eligible_queries: int  # queries with at least one eligible gold document (the denominator)
    excluded_queries: tuple[str, ...]  # the numerator's queries, sorted
    document_rate: float  # eligible gold documents removed / eligible gold documents
    eligible_gold: int  # eligible gold documents over all eligible queries
    ineligible_only: tuple[str, ...]  # queries whose gold is all ineligible: left out, named


def false_exclusion(
    gold: Mapping[str, Sequence[str]],
    filters: Mapping[str, Mapping[str, Any] | None],
    metadata: Metadata,
    eligibility: Mapping[str, Any] | None,
) -> Exclusion:
    """The filter false-exclusion rate of `filters` (qid -> hard predicate) over `gold`."""
    eligible = passing(metadata, eligibility)
    unknown = sorted({d for docs in gold.values() for d in docs} - set(metadata))
    if unknown:
        raise ValueError(f"{counted(unknown, 'gold document', form=repr)} with no metadata")
    excluded, ineligible_only = [], []
    n_queries = n_gold = n_removed = 0
    for qid in sorted(gold):
        kept_gold = [d for d in gold[qid] if d in eligible]
        if not kept_gold:
            ineligible_only.append(qid)
            continue
        predicate = filters.get(qid)  # only the gold documents are checked: O(gold), not O(D)
        removed = [d for d in kept_gold if predicate and not matches(metadata[d], predicate)]
        n_queries += 1
        n_gold += len(kept_gold)
        n_removed += len(removed)
        if len(removed) == len(kept_gold):
            excluded.append(qid)
    if n_queries == 0:
        raise ValueError(
            "filter false-exclusion rate: no query has an eligible gold document "
            "(an unmeasured rate is not 0)"
        )
    return Exclusion(
        rate=len(excluded) / n_queries,
        eligible_queries=n_queries,
        excluded_queries=tuple(excluded),
        document_rate=n_removed / n_gold,
        eligible_gold=n_gold,
        ineligible_only=tuple(ineligible_only),
    )


def recall_at_k(
    rankings: Mapping[str, Sequence[str]],
    gold: Mapping[str, Sequence[str]],
    eligible: set[str],
    k: int,
) -> float:
    """Mean Recall@k over the queries with an eligible gold document, each against its
    original eligible gold set (what the filter removed still counts as missed)."""
    if k <= 0:
        raise ValueError("k must be positive")
    values = []
    for qid, docs in sorted(gold.items()):
        kept = {d for d in docs if d in eligible}
        if kept:
            top = list(rankings.get(qid, ()))[:k]
            values.append(len(kept & set(top)) / len(kept))
    if not values:
        raise ValueError("Recall@k: no query has an eligible gold document")
    return sum(values) / len(values)


def recall_over_filtered_gold(
    rankings: Mapping[str, Sequence[str]],
    gold: Mapping[str, Sequence[str]],
    allowed: Mapping[str, set[str]],
    k: int,
) -> float:
    """INVALID, shown only to measure the inflation: Recall@k with each query's gold set rebuilt
    after filtering (`allowed`: qid -> documents its filter and eligibility keep), queries whose
    gold was filtered out dropped."""
    filtered = {q: [d for d in docs if d in allowed[q]] for q, docs in gold.items()}
    kept = {q: docs for q, docs in filtered.items() if docs}
    if not kept:
        raise ValueError("no query keeps a gold document after filtering")
    return recall_at_k(rankings, kept, set().union(*allowed.values()), k)


@dataclass(frozen=True)
class HardOrSoft:
    """The pre-registered rule's verdict for one relevance preference, on the same queries."""

    use_hard: bool
    precision_gain: float  # mean of hard - soft precision per query
    gain_interval: tuple[float, float] | None  # paired bootstrap interval of that mean
    recall_change: float  # hard recall - soft recall (mean per query)
    exclusion_rate: float  # the hard filter's false-exclusion rate on these queries
    reasons: tuple[str, ...]  # each condition that failed, in words (empty: hard is used)


def hard_or_soft(
    hard_precision: Mapping[str, float],
    soft_precision: Mapping[str, float],
    hard_recall: Mapping[str, float],
    soft_recall: Mapping[str, float],
    exclusion_rate: float,
    *,
    min_gain: float,
    max_exclusion: float,
    max_recall_loss: float,
    seed: int,
) -> HardOrSoft:
    """Use the hard filter only if the lower bound of the precision gain's paired interval is at
    least `min_gain`, its false-exclusion rate at most `max_exclusion` and its recall loss within
    `max_recall_loss` (hard recall - soft recall >= -max_recall_loss). The three limits are
    pre-registered (configuration), never fitted to the outcome. Queries: the same on both sides
    (a mismatch raises)."""
    from ragrig.metrics.deltas import bootstrap_interval

    qids = sorted(hard_precision)
    sides = {
        "soft precision": soft_precision,
        "hard recall": hard_recall,
        "soft recall": soft_recall,
    }
    for name, side in sides.items():
        if sorted(side) != qids:
            raise ValueError(f"hard vs soft: {name} is not over the same queries")
    if not qids:
        raise ValueError("hard vs soft: no query to compare on")
    gains = [hard_precision[q] - soft_precision[q] for q in qids]
    gain = sum(gains) / len(gains)
    interval = bootstrap_interval(gains, seed)
    recall_change = sum(hard_recall[q] - soft_recall[q] for q in qids) / len(qids)
    reasons = []
    if interval is None:
        reasons.append("fewer than 2 queries: no interval for the gain")
    elif interval[0] < min_gain:
        reasons.append(f"gain's lower bound {interval[0]:.4f} < {min_gain}")
    if exclusion_rate > max_exclusion:
        reasons.append(f"false-exclusion rate {exclusion_rate:.4f} > {max_exclusion}")
    if recall_change < -max_recall_loss:
        reasons.append(f"recall change {recall_change:.4f} < -{max_recall_loss}")
    return HardOrSoft(
        use_hard=not reasons,
        precision_gain=gain,
        gain_interval=interval,
        recall_change=recall_change,
        exclusion_rate=exclusion_rate,
        reasons=tuple(reasons),
    )
