"""Retrieval measures computed by ir_measures (pytrec_eval), with ragrig's run contract enforced.

Contract (METRICS.md): rankings hold unique ids (a duplicate raises); k must be positive; a query
with relevant documents but no run is an empty ranking (every measure 0); a query without relevant
documents is not scored here (it belongs to its own answerability slice).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from ragrig.core.ranking import check_unique

Qrels = Mapping[str, Mapping[str, int]]
Rankings = Mapping[str, Sequence[str]]


def measure_names(k_values: Iterable[int]) -> list[str]:
    """Measure names in ragrig's per-query table: ndcg@k, recall@k for each k; p@1, rr, ap."""
    names = []
    for k in k_values:
        names += [f"ndcg@{k}", f"recall@{k}"]
    return [*names, "p@1", "rr", "ap"]


def _spec(name: str) -> str:
    base, _, k = name.partition("@")
    if base in {"ndcg", "recall", "p"} and k:
        if int(k) <= 0:
            raise ValueError(f"k must be positive in {name!r}")
        return {"ndcg": "nDCG@{k}", "recall": "R@{k}", "p": "P@{k}"}[base].format(k=int(k))
    if base == "rr":
        return "RR"
    if base == "ap":
        return "AP"
    raise ValueError(f"unknown measure {name!r}")


def answerable(qrels: Qrels) -> list[str]:
    return sorted(q for q, rels in qrels.items() if any(r > 0 for r in rels.values()))


def per_query(rankings: Rankings, qrels: Qrels, measures: Sequence[str]) -> pd.DataFrame:
    """Long table (qid, measure, value) over every answerable query in `qrels`."""
    import ir_measures

    specs = {name: ir_measures.parse_measure(_spec(name)) for name in measures}
    for qid, ranking in rankings.items():
        check_unique(ranking, f"ranking of query {qid!r}")
    qids = answerable(qrels)
    qrels_in = {q: {d: int(r) for d, r in qrels[q].items()} for q in qids}
    run_in = {
        q: {d: float(len(rankings[q]) - i) for i, d in enumerate(rankings[q])}
        for q in qids
        if rankings.get(q)
    }
    values = {(q, name): 0.0 for q in qids for name in measures}
    by_spec = {spec: name for name, spec in specs.items()}
    if run_in:
        for m in ir_measures.iter_calc(list(specs.values()), qrels_in, run_in):
            values[(m.query_id, by_spec[m.measure])] = float(m.value)
    rows = [
        {"qid": q, "measure": name, "value": values[(q, name)]} for q in qids for name in measures
    ]
    return pd.DataFrame(rows, columns=["qid", "measure", "value"])


def unjudged_at_k(rankings: Rankings, qrels: Qrels, k_values: Iterable[int]) -> pd.DataFrame:
    """Long table (qid, measure, value) of `unjudged@k`: the share of each answerable query's
    top-k retrieved documents that have no judgment at all for it (no qrels row, of any grade).
    Recall@k and nDCG count such a document as not relevant, which it may well be: labels are
    incomplete (METRICS.md: true set {a, b}, labels only {a}). The share is over the documents
    retrieved (min(k, ranking length)); a query with an empty ranking has none to share and no
    row (its missing run is counted elsewhere), so no NaN enters a mean."""
    rows = []
    for q in answerable(qrels):
        ranking = rankings.get(q) or []
        judged = qrels[q]
        for k in k_values:
            top = ranking[:k]
            if top:
                value = sum(d not in judged for d in top) / len(top)
                rows.append({"qid": q, "measure": f"unjudged@{k}", "value": value})
    return pd.DataFrame(rows, columns=["qid", "measure", "value"])


def mean_measures(rankings: Rankings, qrels: Qrels, measures: Sequence[str]) -> dict[str, float]:
    """Mean of each measure over the answerable queries."""
    table = per_query(rankings, qrels, measures)
    return {m: float(v) for m, v in table.groupby("measure")["value"].mean().items()}


def rankings_from_run(run: pd.DataFrame) -> dict[str, list[str]]:
    """qid -> doc ids in rank order, from a run table."""
    ordered = run.sort_values(["qid", "rank"], kind="mergesort")
    return {q: g["doc_id"].tolist() for q, g in ordered.groupby("qid", sort=True)}


def qrels_from_table(qrels: pd.DataFrame) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for q, d, r in zip(qrels["qid"], qrels["doc_id"], qrels["relevance"], strict=True):
        out.setdefault(q, {})[d] = int(r)
    return out


def fusion_against_lanes(
    fused: dict[str, float], lanes: dict[str, dict[str, float]], measure: str
) -> dict[str, Any] | None:
    """The fused ranking's `measure` beside its better lane's (means over the same queries):
    `below_best_lane` flags a fusion that loses to one of its own inputs. None without two
    lanes or without the measure."""
    if len(lanes) < 2 or measure not in fused:
        return None
    scored = {name: m[measure] for name, m in lanes.items() if measure in m}
    if len(scored) < 2:
        return None
    best = max(sorted(scored), key=lambda name: scored[name])
    return {
        "measure": measure,
        "fused": fused[measure],
        "best_lane": best,
        "best_lane_value": scored[best],
        "below_best_lane": bool(fused[measure] < scored[best]),
    }
