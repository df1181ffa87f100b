"""Cost per query, system and judge apart: tokens priced by the dated table `report.prices`, plus
compute priced at `report.core_hour_usd` (USD per core-hour, dated by `report.prices_as_of`).

System cost of one answered query =
  generation tokens x the generator model's price (0 for a local model)
  + (generation CPU seconds `cpu_s`, process time of the generate call: every thread of an
     in-process model; next to nothing for an HTTP client)
  + the query-time stages' latency (embed_query, retrieve, rerank: wall seconds, charged as one
     core each; these stages run one query at a time)) x core_hour_usd / 3600.
Judge cost of one answer =
  judge tokens (`judge_prompt_tokens`, `judge_completion_tokens`) x the judge model's price
  + judge CPU seconds (`judge_cpu_s`; a judgments table without it: its latency, as one core)
    x core_hour_usd / 3600.

Not counted: the one-off indexing compute (parse, chunk, corpus embedding, index build: an
ingestion cost, not a per-query one), storage, and self-consistency samples (an evaluation
cost, drawn only when `generate.consistency_samples` > 0). What each figure includes is written
beside it in metrics.json (`includes`, `notes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ragrig.core.errors import ConfigError
from ragrig.metrics.aggregate import cost_usd, quantiles
from ragrig.report.config import price_hint

QUERY_STAGES = ("embed_query", "retrieve", "rerank")


def _priced(models: pd.Series, prices: Mapping[str, Any], as_of: str) -> None:
    for model in sorted({m for m in models if m}):
        if model not in prices:
            raise ConfigError(price_hint(model, as_of))


def _token_cost(models, prompt, completion, prices) -> list[float]:
    return [
        cost_usd(int(p), int(c), prices[m]) if m else 0.0
        for m, p, c in zip(models, prompt, completion, strict=True)
    ]


def per_query_costs(
    generations: pd.DataFrame, judgments: pd.DataFrame, latency: pd.DataFrame, cfg: Any
) -> tuple[pd.DataFrame, list[str]]:
    """One row per generation: qid, system_usd, judge_usd (None without a judgment) and their
    parts; and notes on what could not be counted. A model without a price is a ConfigError."""
    notes: list[str] = []
    per_s = cfg.core_hour_usd / 3600.0
    gens = generations
    _priced(gens["model"], cfg.prices, cfg.prices_as_of)
    tokens = _token_cost(
        gens["model"], gens["prompt_tokens"], gens["completion_tokens"], cfg.prices
    )
    if "cpu_s" in gens.columns:
        gen_cpu = gens["cpu_s"].astype(float).tolist()
    else:
        gen_cpu = [0.0] * len(gens)
        notes.append("generations have no cpu_s column: generation compute not counted")
    stages = latency[latency["stage"].isin(QUERY_STAGES)]
    stage_s = (stages.groupby("qid")["latency_ms"].sum() / 1e3).to_dict()
    query_s = [float(stage_s.get(q, 0.0)) for q in gens["qid"]]
    out = pd.DataFrame(
        {
            "qid": gens["qid"].tolist(),
            "tokens_usd": tokens,
            "generate_cpu_s": gen_cpu,
            "query_stages_s": query_s,
        }
    )
    out["system_usd"] = out["tokens_usd"] + (out["generate_cpu_s"] + out["query_stages_s"]) * per_s

    j = judgments
    if len(j):
        cols = set(j.columns)
        if {"judge_model", "judge_prompt_tokens", "judge_completion_tokens"} <= cols:
            models = j["judge_model"].fillna("").astype(str)
            _priced(models, cfg.prices, cfg.prices_as_of)
            j_tokens = _token_cost(
                models, j["judge_prompt_tokens"], j["judge_completion_tokens"], cfg.prices
            )
        else:
            j_tokens = [0.0] * len(j)
            notes.append("judgments have no judge token columns: judge tokens not counted")
        if "judge_cpu_s" in cols:
            j_cpu = j["judge_cpu_s"].astype(float).tolist()
        else:
            j_cpu = (j["latency_ms"].astype(float) / 1e3).tolist()
            notes.append("judgments have no judge_cpu_s: judge compute = its latency on one core")
        judge = pd.DataFrame(
            {"qid": j["qid"].tolist(), "judge_tokens_usd": j_tokens, "judge_cpu_s": j_cpu}
        )
        judge["judge_usd"] = judge["judge_tokens_usd"] + judge["judge_cpu_s"] * per_s
        out = out.merge(judge, on="qid", how="left")
    else:
        out = out.assign(judge_tokens_usd=None, judge_cpu_s=None, judge_usd=None)
    return out, notes


def cost_long(costs: pd.DataFrame) -> pd.DataFrame:
    """Per-query measures `cost/system_usd` and `cost/judge_usd` (where judged)."""
    parts = [
        pd.DataFrame(
            {"qid": costs["qid"], "measure": "cost/system_usd", "value": costs["system_usd"]}
        )
    ]
    judged = costs[costs["judge_usd"].notna()]
    parts.append(
        pd.DataFrame(
            {"qid": judged["qid"], "measure": "cost/judge_usd", "value": judged["judge_usd"]}
        )
    )
    out = pd.concat([p for p in parts if len(p)], ignore_index=True)
    out["value"] = out["value"].astype(float)
    return out


def _stats(values: list[float]) -> dict[str, float | None]:
    return {
        "mean": float(sum(values) / len(values)) if values else None,
        **{k: v for k, v in quantiles(values, [0.5, 0.99]).items()},
    }


def cost_summary(costs: pd.DataFrame, notes: list[str], cfg: Any) -> dict[str, Any]:
    """metrics.json `cost_usd_per_query`: system and judge {mean, p50, p99}; the top-level
    mean/p50/p99 are the system's (as before, for existing readers)."""
    system = _stats(costs["system_usd"].astype(float).tolist())
    judge = _stats(costs["judge_usd"].dropna().astype(float).tolist())
    return {
        **system,
        "system": system,
        "judge": judge,
        "prices_as_of": cfg.prices_as_of,
        "core_hour_usd": cfg.core_hour_usd,
        "includes": {
            "system": "generation tokens x price + (generation CPU s + embed_query, retrieve, "
            "rerank latency s as one core) x core_hour_usd",
            "judge": "judge tokens x price + judge CPU s x core_hour_usd",
        },
        "notes": notes,
    }
