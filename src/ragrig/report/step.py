"""The report stage's computation: per-query and slice tables, metrics.json's tree, the
reranker's paired deltas and the console summary."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ragrig.core.errors import ConfigError, DataValidationError
from ragrig.core.schemas import GENERATION_STATUSES, JUDGMENT_STATUSES
from ragrig.core.text import counted
from ragrig.metrics.aggregate import (
    Slices,
    aggregate,
    cost_usd,
    quantiles,
    slice_columns,
    slice_value_key,
)
from ragrig.metrics.bootstrap import slice_intervals
from ragrig.metrics.ir import (
    fusion_against_lanes,
    measure_names,
    per_query,
    qrels_from_table,
    rankings_from_run,
    unjudged_at_k,
)
from ragrig.metrics.names import ALL
from ragrig.report.answers import answer_measures
from ragrig.report.base import Report, ReportInputs
from ragrig.report.config import missing_prices, price_hint
from ragrig.report.judge import composite_summary, judge_measures
from ragrig.report.paired import rerank_comparison
from ragrig.report.scorecard import (
    floor_rule,
    per_answer_axes,
    scorecard_section,
    scorecard_tables,
    slice_scorecard,
)
from ragrig.report.summary import format_summary
from ragrig.report.views import TOTAL, total_latency


def _long(df: pd.DataFrame, prefix: str) -> pd.DataFrame:
    out = df.copy()
    out["measure"] = prefix + out["measure"]
    return out


def build_report(inp: ReportInputs, cfg: Any, *, seed: int = 0) -> Report:
    """Compute every report table from the stage outputs (pure: no I/O, no MLflow). `seed`
    (the stage passes runtime.seed) seeds the bootstrap intervals."""
    unknown = sorted(set(inp.qrels["qid"]) - set(inp.queries["qid"]))
    if unknown:
        ids = counted(unknown, "query id", form=repr)
        raise DataValidationError(f"qrels name {ids} missing from the queries table")
    qrels = qrels_from_table(inp.qrels)
    measures = measure_names(cfg.k_values)
    final = per_query(rankings_from_run(inp.reranked), qrels, measures)
    before = per_query(rankings_from_run(inp.retrieved), qrels, measures)
    parts = [_long(final, "retrieval/")]
    # incomplete labels said out loud: the share of the top-k that no one judged
    unjudged = unjudged_at_k(rankings_from_run(inp.reranked), qrels, cfg.k_values)
    parts.append(_long(unjudged, "judgments/"))

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

    fused_means = {m: float(v) for m, v in before.groupby("measure")["value"].mean().items()}
    fusion = fusion_against_lanes(fused_means, lane_means, f"ndcg@{cfg.k_values[0]}")

    if inp.ann is not None and len(inp.ann):
        measure = "ann/recall@" + inp.ann["k"].astype(str)
        parts.append(
            pd.DataFrame({"qid": inp.ann["qid"], "measure": measure, "value": inp.ann["recall"]})
        )

    gens = inp.generations
    for model in sorted(set(gens["model"])):
        if missing_prices(model, cfg.prices):
            raise ConfigError(price_hint(model, cfg.prices_as_of))
    costs = [
        cost_usd(p, c, cfg.prices[m])
        for m, p, c in zip(
            gens["model"], gens["prompt_tokens"], gens["completion_tokens"], strict=True
        )
    ]
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
    parts.extend(judge_measures(j))  # judge/claim_support, judge/llm_*

    sc = scorecard_tables(
        inp.queries,
        inp.qrels,
        inp.contexts_run,
        inp.generations,
        j,
        cfg.scorecard,
        inp.vectors,
        inp.claims,
    )
    parts.append(sc.long)

    answer_parts, answer_metrics = answer_measures(inp, cfg)  # cost, citations, refusals
    parts += answer_parts

    long = pd.concat([p for p in parts if len(p)], ignore_index=True)
    long = long.sort_values(["measure", "qid"], kind="mergesort").reset_index(drop=True)
    slices = slice_columns(
        inp.queries,
        cfg.slices,
        quantile_bins=cfg.quantile_bins,
        max_categories=cfg.max_categories,
        metadata_prefix=cfg.metadata_prefix,
    )
    agg = aggregate(long, slices.columns, slices.names)
    intervals = slice_intervals(
        long,
        slices.columns,
        slices.names,
        seed=seed,
        resamples=cfg.bootstrap_resamples,
        level=cfg.interval_level,
    )
    per_query_table = long.merge(slices.columns, on="qid", how="left")

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
    total = total_latency(latency)  # end to end per answered query (ragrig.report.views)
    if total:
        extra = pd.DataFrame({"qid": "", "stage": TOTAL, "latency_ms": total})
        latency = pd.concat([latency, extra], ignore_index=True)
    metrics = _metrics_tree(inp, cfg, agg, slices, lane_means, latency, gens, j, intervals)
    metrics["bootstrap"] = {
        "resamples": cfg.bootstrap_resamples,
        "level": cfg.interval_level,
        "seed": seed,
    }
    rule = floor_rule(cfg.scorecard, seed, cfg.bootstrap_resamples, cfg.interval_level)
    metrics["scorecard"] = scorecard_section(
        agg, sc, cfg.scorecard, inp.labels, inp.labels_file, 1.0 - cfg.interval_level, rule
    )
    cols = slices.columns
    for name, values in metrics["slices"].items():
        for value, entry in values.items():
            qids = cols.loc[cols[name].astype(str) == value, "qid"] if name in cols else None
            axes = per_answer_axes(sc.long, qids)
            entry.update(slice_scorecard(agg, name, value, cfg.scorecard, axes, rule))
    metrics.update(answer_metrics)
    if fusion is not None:
        metrics["fusion"] = fusion
    return Report(per_query_table, agg, metrics, sc.per_query)


def _means(
    agg: pd.DataFrame, prefix: str, slice_name: str = "all", value: str = "all"
) -> dict[str, float]:
    sel = agg[
        (agg["slice"] == slice_name)
        & (agg["slice_value"] == value)
        & agg["measure"].str.startswith(prefix)
    ]
    return {m[len(prefix) :]: float(v) for m, v in zip(sel["measure"], sel["mean"], strict=True)}


def query_counts(
    queries: pd.DataFrame, qrels: pd.DataFrame, run: pd.DataFrame, unjudged_not_parsed: int = 0
) -> dict[str, int]:
    """How many queries were scored (a judgment > 0), unjudged (no qrels row: in the queries
    table, or left out by parse), no-positive (judged, every judgment <= 0) and without a run
    (scored as an empty ranking if answerable)."""
    qids = list(queries["qid"])
    judged = set(qrels["qid"])
    positive = set(qrels.loc[qrels["relevance"] > 0, "qid"])
    has_run = set(run["qid"])
    scored = sum(1 for q in qids if q in positive)
    unjudged = sum(1 for q in qids if q not in judged)
    return {
        "queries": len(qids),
        "scored": scored,
        "unjudged": unjudged + unjudged_not_parsed,
        "no_positive": len(qids) - scored - unjudged,
        "missing_runs": sum(1 for q in qids if q not in has_run),
        "missing_runs_scored": sum(1 for q in qids if q in positive and q not in has_run),
    }


def _metrics_tree(
    inp: ReportInputs,
    cfg: Any,
    agg: pd.DataFrame,
    slices: Slices,
    lane_means: dict[str, dict[str, float]],
    latency: pd.DataFrame,
    gens: pd.DataFrame,
    j: pd.DataFrame,
    intervals: pd.DataFrame,
) -> dict[str, Any]:
    counts = query_counts(inp.queries, inp.qrels, inp.retrieved, inp.unjudged_not_parsed)
    gen_status = {s: int((gens["status"] == s).sum()) for s in GENERATION_STATUSES}
    judge_status = {s: int((j["status"] == s).sum()) for s in JUDGMENT_STATUSES}
    tree: dict[str, Any] = {
        "counts": {
            **counts,
            # earlier names, kept for existing readers: answerable == scored
            "answerable": counts["scored"],
            "no_gold": counts["queries"] - counts["scored"],
            "generated": int(len(gens)),
            "generation_status": gen_status,
            "judgment_status": judge_status,
        },
        "retrieval": _means(agg, "retrieval/"),
        "judgments": _means(agg, "judgments/"),
        "lanes": lane_means,
        "rerank": _means(agg, "rerank/"),
        "generation": _means(agg, "generation/"),
        "judge": {
            **_means(agg, "judge/"),
            "n_scored": judge_status["scored"],
            "no_claims": judge_status["no_claims"],
            **composite_summary(j, inp.judge_weights),  # weights used, LLM judge statuses
        },
        "latency_ms": {
            stage: quantiles(g["latency_ms"].tolist(), cfg.latency_quantiles)
            for stage, g in latency.groupby("stage", sort=True)
        },
        "slices": {},
        "slice_bins": {name: list(cuts) for name, cuts in slices.bins.items()},
        "slices_dropped": dict(slices.dropped),
    }
    if inp.parse_files is not None:
        # ingestion's counted failures, beside the query counts
        tree["counts"]["files"] = dict(inp.parse_files["counts"])
        tree["files_not_parsed"] = inp.parse_files["not_parsed"]
    ci = {
        (s, v, m): (lo, hi, n)
        for s, v, m, lo, hi, n in intervals.itertuples(index=False, name=None)
    }
    # the whole set's intervals: {measure: {ci_low, ci_high, n}}
    tree["intervals"] = {
        m: {"ci_low": lo, "ci_high": hi, "n": n}
        for (s, _, m), (lo, hi, n) in ci.items()
        if s == ALL
    }
    if inp.ann is not None and len(inp.ann):
        tree["ann"] = {**_means(agg, "ann/"), **(inp.ann_timing or {})}
    table = slices.columns
    for name in slices.names:
        sel = agg[agg["slice"] == name]
        tree["slices"][name] = {}
        # every value present among the queries, also one with nothing measurable (e.g. no gold)
        for value in sorted(table[name].unique(), key=slice_value_key):
            g = sel[sel["slice_value"] == value]
            entry = {
                m: float(v)
                for m, v in zip(g["measure"], g["mean"], strict=True)
                if m.startswith(("retrieval/", "judge/"))
            }
            for m in list(entry):
                if (name, str(value), m) in ci:
                    lo, hi, _ = ci[(name, str(value), m)]
                    entry[f"{m}_ci_low"], entry[f"{m}_ci_high"] = lo, hi
            entry["n_queries"] = int((table[name] == value).sum())
            judged = g.loc[g["measure"] == "judge/faithfulness", "n"]
            entry["n_judged"] = int(judged.iloc[0]) if len(judged) else 0
            tree["slices"][name][str(value)] = entry
    return tree


@dataclass(frozen=True)
class Outcome:
    report: Report
    deltas: Any  # ragrig.report.paired's rerank-vs-retrieve comparison
    summary: str  # the console summary (summary.txt)
    # more per-query tables, by file name: filters.csv (what the metadata filters cost),
    # position.csv (the lost-in-the-middle probe's answers)
    tables: dict[str, pd.DataFrame] = dataclasses.field(default_factory=dict)


def compute(
    inputs: ReportInputs,
    cfg: Any,
    params: dict[str, Any],
    seed: int,
    ingestion: dict[str, Any] | None = None,
) -> Outcome:
    """The report of `inputs`; every bootstrap (intervals, deltas) seeded by `seed`.

    `ingestion`: the chunk stage's ingestion.json (attribution, boundaries, coherence,
    near-duplicates), carried into metrics.json."""
    report = build_report(inputs, cfg, seed=seed)
    # the reranker's paired deltas on identical candidate sets
    deltas = rerank_comparison(inputs, report, seed)
    report.metrics["deltas"] = {"rerank_vs_retrieve": deltas.metrics()}
    if ingestion is not None:
        report.metrics["ingestion"] = ingestion
    summary = format_summary(report.metrics, params)
    tables = {}
    if inputs.filters is not None:
        from ragrig.report.filters import filter_measures

        metrics, tables["filters.csv"], lines = filter_measures(
            inputs.filters, inputs.qrels, inputs.retrieved, cfg.filters, seed
        )
        report.metrics["filters"] = metrics
        summary += "\n" + "\n".join(lines)
    if inputs.position is not None:
        from ragrig.report.position import answer_values, position_measures

        table = answer_values(*inputs.position, inputs.queries, cfg.scorecard)
        report.metrics["position"], lines = position_measures(table, seed)
        tables["position.csv"] = table
        summary += "\n" + "\n".join(lines)
    if cfg.coverage.intent is not None:
        from ragrig.report.coverage import coverage_section

        report.metrics["coverage"], tables["coverage.csv"], lines = coverage_section(
            inputs.queries, inputs.qrels, inputs.documents, report.per_query, cfg.coverage,
            cfg.interval_level, seed, cfg.bootstrap_resamples or 1000,
        )  # fmt: skip
        summary += "\n" + "\n".join(lines)
    return Outcome(report, deltas, summary, tables)
