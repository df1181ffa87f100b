"""The files DVC's own views read: the headline metrics and the plot data series.

`dvc metrics show` / `dvc exp show` read `headline.json` (a short flat dict, stable key order,
rounded); `dvc plots show/diff` read the tabular series `latency.csv` (p50_ms, p95_ms, p99_ms
per stage) and `recall_at_k.csv` (recall and nDCG at k = 1 ... 100 of the final ranking,
`recall_final` / `ndcg_final`, and of each retrieval lane, `recall_<lane>` / `ndcg_<lane>`;
dvc.yaml plots the final ranking's, whose columns exist whatever lanes a configuration runs).
Everything here is deterministic for the same inputs, measured latencies aside."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from ragrig.metrics.aggregate import stage_key

# The query-time stages whose per-query latencies add up to the end-to-end `total` (the judge
# evaluates the answer afterwards; it is not part of answering a query).
ONLINE_STAGES = ("embed_query", "retrieve", "rerank", "generate")
TOTAL = "total"
# the cut-offs of the recall@k / nDCG@k curve (capped at the run depth by the data itself)
CURVE_KS = (1, 2, 3, 5, 10, 20, 30, 50, 100)
SIGNIFICANT = 4


def rounded(value: Any, digits: int = SIGNIFICANT) -> Any:
    """A float to `digits` significant digits (497.3978 -> 497.4, 5.5498e-06 -> 5.55e-06);
    ints, strings and None unchanged; NaN or infinity become None (never written as NaN)."""
    if isinstance(value, bool) or not isinstance(value, float):
        return value
    if not math.isfinite(value):
        return None
    if value == 0.0:
        return 0.0
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def total_latency(latency: pd.DataFrame) -> list[float]:
    """Per answered query (one with a `generate` latency), the sum of its online stages' ms."""
    online = latency[latency["stage"].isin(ONLINE_STAGES)]
    answered = set(online.loc[online["stage"] == "generate", "qid"])
    per_query = online[online["qid"].isin(answered)].groupby("qid", sort=True)["latency_ms"].sum()
    return [float(v) for v in per_query]


def _get(tree: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(tree, dict) or key not in tree:
            return None
        tree = tree[key]
    return tree


def headline(metrics: dict[str, Any]) -> dict[str, Any]:
    """The short flat dict of `reports/run/headline.json`, keys always present and in this
    order; a value that was not measured (no k=10 configured, no scored answer) is None."""
    ret = metrics.get("retrieval", {})
    axes = _get(metrics, "scorecard", "axes") or {}
    out: dict[str, Any] = {
        "ndcg@10": ret.get("ndcg@10"),
        "recall@10": ret.get("recall@10"),
        "recall@100": ret.get("recall@100"),
        "mrr": ret.get("rr"),  # mean reciprocal rank over the whole ranking (ir_measures RR)
        "faithfulness": _get(axes, "faithfulness", "value"),
        "relevance": _get(axes, "relevance", "value"),
        "correctness": _get(axes, "correctness", "value"),
        "weighted": _get(metrics, "scorecard", "weighted"),
        "gate": _get(metrics, "scorecard", "gate"),
    }
    for stage in ("retrieve", "generate", TOTAL):
        out[f"{stage}_p95_ms"] = _get(metrics, "latency_ms", stage, "p95")
    out["cost_usd_per_query"] = _get(metrics, "cost_usd_per_query", "mean")
    out["n_queries"] = _get(metrics, "counts", "queries")
    return {k: rounded(v) for k, v in out.items()}


def latency_table(metrics: dict[str, Any]) -> pd.DataFrame:
    """One row per stage in pipeline order (`total` last): p50_ms, p95_ms, p99_ms."""
    lat = metrics.get("latency_ms", {})
    qs = ("p50", "p95", "p99")
    rows = [
        {"stage": s, **{f"{q}_ms": rounded(lat[s].get(q)) for q in qs}}
        for s in sorted(lat, key=lambda s: (s == TOTAL, stage_key(s)))
    ]
    return pd.DataFrame(rows, columns=["stage", *(f"{q}_ms" for q in qs)])


def recall_curve(
    rankings: dict[str, pd.DataFrame], qrels: pd.DataFrame, ks: tuple[int, ...] = CURVE_KS
) -> pd.DataFrame:
    """recall@k and nDCG@k (document level, scored queries) per k for each named run table
    (`final`, then each lane): columns k, then `recall_<name>`, `ndcg_<name>`."""
    from ragrig.metrics.ir import mean_measures, qrels_from_table, rankings_from_run

    q = qrels_from_table(qrels)
    measures = [f"{m}@{k}" for k in ks for m in ("recall", "ndcg")]
    table = pd.DataFrame({"k": list(ks)})
    for name, run in rankings.items():
        means = mean_measures(rankings_from_run(run), q, measures)
        for m in ("recall", "ndcg"):
            table[f"{m}_{name}"] = [rounded(means.get(f"{m}@{k}", math.nan)) for k in ks]
    return table


def run_tables(reranked: pd.DataFrame, lanes: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The curve's runs: the final (reranked) ranking, then each retrieval lane by name."""
    return {"final": reranked, **{str(n): g for n, g in lanes.groupby("lane", sort=True)}}


def write_views(
    metrics: dict[str, Any],
    rankings: dict[str, pd.DataFrame],
    qrels: pd.DataFrame,
    folder: Path,
) -> list[Path]:
    """headline.json, latency.csv and recall_at_k.csv in `folder` (the report's run folder)."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    head = folder / "headline.json"
    head.write_text(json.dumps(headline(metrics), indent=2) + "\n", encoding="utf-8")
    lat = folder / "latency.csv"
    latency_table(metrics).to_csv(lat, index=False)
    curve = folder / "recall_at_k.csv"
    recall_curve(rankings, qrels).to_csv(curve, index=False)
    return [head, lat, curve]
