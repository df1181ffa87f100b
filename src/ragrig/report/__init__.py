"""report: per-query long table, slice aggregates, latency quantiles, cost, and metrics.json."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ragrig.metrics.aggregate import aggregate, cost_usd, quantiles, slice_columns
from ragrig.metrics.ir import measure_names, per_query, qrels_from_table, rankings_from_run
from ragrig.schemas import GENERATION_STATUSES, JUDGMENT_STATUSES


@dataclass(frozen=True)
class ReportInputs:
    queries: pd.DataFrame
    qrels: pd.DataFrame
    retrieved: pd.DataFrame  # run before rerank
    lanes: pd.DataFrame
    reranked: pd.DataFrame
    ann: pd.DataFrame | None
    ann_timing: dict[str, float] | None
    latency: pd.DataFrame  # qid, stage, latency_ms (embed_query, retrieve, rerank)
    generations: pd.DataFrame
    judgments: pd.DataFrame


@dataclass(frozen=True)
class Report:
    per_query: pd.DataFrame  # qid, measure, value + slice columns
    slices: pd.DataFrame  # slice, slice_value, measure, mean, n
    metrics: dict[str, Any]


def _long(df: pd.DataFrame, prefix: str) -> pd.DataFrame:
    out = df.copy()
    out["measure"] = prefix + out["measure"]
    return out


def build_report(inp: ReportInputs, cfg: Any) -> Report:
    """Compute every report table from the stage outputs (pure: no I/O, no MLflow)."""
    qrels = qrels_from_table(inp.qrels)
    measures = measure_names(cfg.k_values)
    final = per_query(rankings_from_run(inp.reranked), qrels, measures)
    before = per_query(rankings_from_run(inp.retrieved), qrels, measures)
    parts = [_long(final, "retrieval/")]

    delta = final.merge(before, on=["qid", "measure"], suffixes=("", "_before"))
    delta["value"] = delta["value"] - delta["value_before"]
    parts.append(_long(delta[["qid", "measure", "value"]], "rerank/delta_"))

    lane_means: dict[str, dict[str, float]] = {}
    for lane, g in inp.lanes.groupby("lane", sort=True):
        table = per_query(rankings_from_run(g), qrels, measures)
        parts.append(_long(table, f"lane/{lane}/"))
        lane_means[lane] = {
            m: float(v) for m, v in table.groupby("measure")["value"].mean().items()
        }

    if inp.ann is not None and len(inp.ann):
        measure = "ann/recall@" + inp.ann["k"].astype(str)
        parts.append(
            pd.DataFrame({"qid": inp.ann["qid"], "measure": measure, "value": inp.ann["recall"]})
        )

    gens = inp.generations
    price = cfg.prices
    costs = []
    for g in gens.itertuples(index=False):
        if g.model not in price:
            raise KeyError(
                f"no price for model {g.model!r} in report.prices (as of {cfg.prices_as_of})"
            )
        costs.append(cost_usd(g.prompt_tokens, g.completion_tokens, price[g.model]))
    gens = gens.assign(cost_usd=costs)
    ok = gens[gens["status"] == "ok"]
    for col, name in [
        ("prompt_tokens", "generation/prompt_tokens"),
        ("completion_tokens", "generation/completion_tokens"),
        ("cost_usd", "generation/cost_usd"),
    ]:
        parts.append(
            pd.DataFrame({"qid": gens["qid"], "measure": name, "value": gens[col].astype(float)})
        )
    n_cites = ok["citations"].map(lambda s: len(json.loads(s)))
    parts.append(
        pd.DataFrame(
            {"qid": ok["qid"], "measure": "generation/citations", "value": n_cites.astype(float)}
        )
    )

    j = inp.judgments
    scored = j[j["status"] == "scored"]
    parts.append(
        pd.DataFrame(
            {
                "qid": scored["qid"],
                "measure": "judge/faithfulness",
                "value": scored["faithfulness"].astype(float),
            }
        )
    )

    long = pd.concat([p for p in parts if len(p)], ignore_index=True)
    long = long.sort_values(["measure", "qid"], kind="mergesort").reset_index(drop=True)
    slices = slice_columns(inp.queries, cfg.slices, cfg.query_length_bins)
    agg = aggregate(long, slices, cfg.slices)
    per_query_table = long.merge(slices, on="qid", how="left")

    latency = pd.concat(
        [
            inp.latency[["qid", "stage", "latency_ms"]],
            pd.DataFrame(
                {"qid": gens["qid"], "stage": "generate", "latency_ms": gens["latency_ms"]}
            ),
            pd.DataFrame({"qid": j["qid"], "stage": "judge", "latency_ms": j["latency_ms"]}),
        ],
        ignore_index=True,
    )
    metrics = _metrics_tree(inp, cfg, agg, slices, lane_means, latency, gens, j)
    return Report(per_query_table, agg, metrics)


def _means(
    agg: pd.DataFrame, prefix: str, slice_name: str = "all", value: str = "all"
) -> dict[str, float]:
    sel = agg[
        (agg["slice"] == slice_name)
        & (agg["slice_value"] == value)
        & agg["measure"].str.startswith(prefix)
    ]
    return {m[len(prefix) :]: float(v) for m, v in zip(sel["measure"], sel["mean"], strict=True)}


def _metrics_tree(inp, cfg, agg, slices, lane_means, latency, gens, j) -> dict[str, Any]:
    n_queries = len(inp.queries)
    answerable = int((inp.queries["n_gold"] > 0).sum())
    gen_status = {s: int((gens["status"] == s).sum()) for s in GENERATION_STATUSES}
    judge_status = {s: int((j["status"] == s).sum()) for s in JUDGMENT_STATUSES}
    retrieved_q = set(inp.retrieved["qid"])
    tree: dict[str, Any] = {
        "counts": {
            "queries": n_queries,
            "answerable": answerable,
            "no_gold": n_queries - answerable,
            "missing_runs": int(sum(1 for q in inp.queries["qid"] if q not in retrieved_q)),
            "generated": int(len(gens)),
            "generation_status": gen_status,
            "judgment_status": judge_status,
        },
        "retrieval": _means(agg, "retrieval/"),
        "lanes": lane_means,
        "rerank": _means(agg, "rerank/"),
        "generation": _means(agg, "generation/"),
        "judge": {
            **_means(agg, "judge/"),
            "n_scored": judge_status["scored"],
            "no_claims": judge_status["no_claims"],
        },
        "latency_ms": {
            stage: quantiles(g["latency_ms"].tolist(), cfg.latency_quantiles)
            for stage, g in latency.groupby("stage", sort=True)
        },
        "cost_usd_per_query": {
            "mean": float(gens["cost_usd"].mean()) if len(gens) else 0.0,
            **quantiles(gens["cost_usd"].tolist(), [0.5, 0.99]),
            "prices_as_of": cfg.prices_as_of,
        },
        "slices": {},
    }
    if inp.ann is not None and len(inp.ann):
        tree["ann"] = {**_means(agg, "ann/"), **(inp.ann_timing or {})}
    for name in cfg.slices:
        sel = agg[agg["slice"] == name]
        tree["slices"][name] = {}
        # every value present among the queries, also one with nothing measurable (e.g. no gold)
        for value in sorted(slices[name].unique()):
            g = sel[sel["slice_value"] == value]
            entry = {
                m: float(v)
                for m, v in zip(g["measure"], g["mean"], strict=True)
                if m.startswith(("retrieval/", "judge/"))
            }
            entry["n_queries"] = int((slices[name] == value).sum())
            judged = g.loc[g["measure"] == "judge/faithfulness", "n"]
            entry["n_judged"] = int(judged.iloc[0]) if len(judged) else 0
            tree["slices"][name][str(value)] = entry
    return tree
