"""What a run's metadata filters cost (docs/metrics.md "Filters"), from the retrieve stage's
filter outputs: the false-exclusion rate of its hard predicates, Recall@k against the original
eligible gold set (and the invalid rebuilt-gold figure beside it, named so), eligibility
violations counted on their own, and per relevance preference the hard-or-soft rule's verdict on
the same queries."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ragrig.core.errors import DataValidationError
from ragrig.core.predicates import passing
from ragrig.metrics.filters import (
    false_exclusion,
    hard_or_soft,
    recall_at_k,
    recall_over_filtered_gold,
)


@dataclass(frozen=True)
class FilterInputs:
    metadata: dict[str, dict[str, str]]  # doc_id -> field -> value
    predicates: dict[str, dict[str, Any]]  # qid -> the predicate asked
    hard: dict[str, dict[str, Any]]  # qid -> its part applied hard (eligibility aside)
    eligibility: dict[str, Any]  # the caller's eligibility (checked whether enforced or not)
    enforced: bool
    variants: pd.DataFrame | None  # filter_runs: variant, qid, doc_id, rank


def read_filter_inputs(retrieve_dir: Path) -> FilterInputs | None:
    """The retrieve stage's filter outputs; None when it ran without filters."""
    from ragrig.core.io import read_json, read_table

    manifest = read_json(retrieve_dir / "manifest.json").get("filters")
    if manifest is None:
        return None
    meta = read_table(retrieve_dir / "doc_metadata.parquet", "doc_metadata")
    fields = [c for c in meta.columns if c != "doc_id"]
    metadata = {
        str(row[0]): {f: v for f, v in zip(fields, row[1:], strict=True) if v is not None}
        for row in meta[["doc_id", *fields]].itertuples(index=False)
    }
    preds = read_table(retrieve_dir / "predicates.parquet", "predicates")
    runs = retrieve_dir / "filter_runs.parquet"
    return FilterInputs(
        metadata=metadata,
        predicates={
            q: json.loads(p) for q, p in zip(preds["qid"], preds["predicate"], strict=True)
        },
        hard={q: json.loads(p) for q, p in zip(preds["qid"], preds["hard"], strict=True)},
        eligibility=manifest["eligibility"],
        enforced=manifest["eligibility_enforced"],
        variants=read_table(runs, "filter_runs") if runs.exists() else None,
    )


def _rankings(run: pd.DataFrame, k: int) -> dict[str, list[str]]:
    top = run[run["rank"] <= k].sort_values(["qid", "rank"])
    return {str(q): g["doc_id"].astype(str).tolist() for q, g in top.groupby("qid", sort=True)}


def _per_query(
    rankings: dict[str, list[str]], gold: dict[str, set[str]], k: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Precision@k and Recall@k per query over its eligible gold set."""
    precision, recall = {}, {}
    for qid, docs in sorted(gold.items()):
        hits = len(docs & set(rankings.get(qid, ())[:k]))
        precision[qid], recall[qid] = hits / k, hits / len(docs)
    return precision, recall


def filter_measures(
    fi: FilterInputs, qrels: pd.DataFrame, run: pd.DataFrame, rule: Any, seed: int
) -> tuple[dict[str, Any], pd.DataFrame, list[str]]:
    """(metrics.json `filters`, a per-query table, console lines) of the filters in `fi`,
    over the retrieve stage's run `run`. `rule`: report.filters (k and the pre-registered
    limits)."""
    k = rule.k
    positive = qrels[qrels["relevance"] > 0]
    gold_all = {
        str(q): [str(d) for d in g["doc_id"]]
        for q, g in positive.groupby("qid", sort=True)
        if str(q) in fi.predicates
    }
    metadata = dict(fi.metadata)
    for docs in gold_all.values():  # a gold document parse left out: no metadata of its own
        for d in docs:
            metadata.setdefault(d, {})
    eligible = passing(metadata, fi.eligibility or None)
    try:
        exclusion = false_exclusion(gold_all, fi.hard, metadata, fi.eligibility or None)
    except ValueError as exc:  # an unmeasured rate is an error, never a 0
        raise DataValidationError(f"report: {exc}") from None
    rankings = _rankings(run, max(k, int(run["rank"].max()) if len(run) else k))
    cache: dict[str, set[str]] = {}

    def allowed(qid: str) -> set[str]:
        key = json.dumps(fi.hard.get(qid) or {}, sort_keys=True)
        if key not in cache:
            cache[key] = eligible & passing(metadata, fi.hard.get(qid) or None)
        return cache[key]

    excluded = set(exclusion.excluded_queries)
    violations = {
        q: sum(1 for d in docs if d not in eligible) for q, docs in sorted(rankings.items())
    }
    recall = recall_at_k(rankings, gold_all, eligible, k)
    try:
        invalid = recall_over_filtered_gold(
            rankings, gold_all, {q: allowed(q) for q in gold_all}, k
        )
    except ValueError:  # every gold document filtered out: the invalid figure is undefined
        invalid = None
    metrics: dict[str, Any] = {
        "false_exclusion_rate": exclusion.rate,
        "document_exclusion_rate": exclusion.document_rate,
        "eligible_queries": exclusion.eligible_queries,
        "excluded_queries": len(excluded),
        "ineligible_only_queries": len(exclusion.ineligible_only),
        "eligibility_enforced": fi.enforced,
        "eligibility_violations": sum(violations.values()),
        "violating_queries": sum(1 for v in violations.values() if v),
        f"recall@{k}": recall,
        f"recall@{k}_over_filtered_gold_invalid": invalid,
    }
    rows = []
    for qid in sorted(fi.predicates):
        kept = [d for d in gold_all.get(qid, ()) if d in eligible]
        removed = [d for d in kept if d not in allowed(qid)]
        top = rankings.get(qid, [])[:k]
        rows.append(
            {
                "qid": qid,
                "predicate": json.dumps(fi.predicates[qid], sort_keys=True),
                "eligible_gold": len(kept),
                "removed_gold": len(removed),
                "excluded": qid in excluded,
                "eligibility_violations": violations.get(qid, 0),
                f"recall@{k}": (len(set(kept) & set(top)) / len(kept)) if kept else None,
            }
        )
    lines = [
        f"filters: false exclusion {exclusion.rate:.4f} ({len(excluded)} of "
        f"{exclusion.eligible_queries} queries with eligible gold lost all of it; "
        f"{exclusion.document_rate:.4f} of eligible gold documents removed), "
        f"{len(exclusion.ineligible_only)} with only ineligible gold left out",
        f"filters: eligibility {'enforced' if fi.enforced else 'NOT enforced'}: "
        f"{metrics['eligibility_violations']} ineligible document(s) retrieved in "
        f"{metrics['violating_queries']} query(ies)",
        f"filters: Recall@{k} {recall:.4f} over the original eligible gold"
        + (
            f" ({invalid:.4f} with the gold set rebuilt after filtering: invalid, inflated)"
            if invalid is not None
            else ""
        ),
    ]
    if fi.variants is not None and len(fi.variants):
        metrics["hard_vs_soft"] = {}
        eligible_gold = {q: {d for d in docs if d in eligible} for q, docs in gold_all.items()}
        eligible_gold = {q: g for q, g in eligible_gold.items() if g}
        names = sorted({v.rsplit("=", 1)[0] for v in fi.variants["variant"].unique()})
        for name in names:
            sides = {}
            for mode in ("hard", "soft"):
                runs = fi.variants[fi.variants["variant"] == f"{name}={mode}"]
                sides[mode] = _per_query(_rankings(runs, k), eligible_gold, k)
            only = {q: {name: p[name]} for q, p in fi.predicates.items() if name in p}
            rate = false_exclusion(gold_all, only, metadata, fi.eligibility or None).rate
            verdict = hard_or_soft(
                sides["hard"][0],
                sides["soft"][0],
                sides["hard"][1],
                sides["soft"][1],
                rate,
                min_gain=rule.min_gain,
                max_exclusion=rule.max_exclusion,
                max_recall_loss=rule.max_recall_loss,
                seed=seed,
            )
            n = len(eligible_gold)
            lo, hi = verdict.gain_interval or (None, None)
            metrics["hard_vs_soft"][name] = {
                "queries": n,
                f"hard_precision@{k}": sum(sides["hard"][0].values()) / n,
                f"soft_precision@{k}": sum(sides["soft"][0].values()) / n,
                f"hard_recall@{k}": sum(sides["hard"][1].values()) / n,
                f"soft_recall@{k}": sum(sides["soft"][1].values()) / n,
                "precision_gain": verdict.precision_gain,
                "precision_gain_low": lo,
                "precision_gain_high": hi,
                "recall_change": verdict.recall_change,
                "exclusion_rate": rate,
                "use_hard": verdict.use_hard,
                "reasons": list(verdict.reasons),
            }
            interval = f" [{lo:+.4f}, {hi:+.4f}]" if lo is not None else ""
            lines.append(
                f"filters: {name} hard vs soft on {n} queries: precision@{k} gain "
                f"{verdict.precision_gain:+.4f}{interval}, recall change "
                f"{verdict.recall_change:+.4f}, exclusion {rate:.4f} -> "
                + ("hard" if verdict.use_hard else "soft (" + "; ".join(verdict.reasons) + ")")
            )
    return metrics, pd.DataFrame(rows), lines
