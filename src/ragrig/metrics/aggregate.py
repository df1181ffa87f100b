"""Aggregation of long per-query tables by slice, latency quantiles, cost, and MLflow-legal keys."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

ALL = "all"


def bucket_n_gold(n: int) -> str:
    return "0" if n <= 0 else ("1" if n == 1 else ("2" if n == 2 else "3+"))


def bucket_length(n_words: int, bins: Sequence[int]) -> str:
    """Label a word count by cut points, e.g. bins [10, 16] -> '<10', '10-15', '>=16'."""
    edges = sorted(bins)
    if not edges:
        return ALL
    if n_words < edges[0]:
        return f"<{edges[0]}"
    for lo, hi in zip(edges, edges[1:], strict=False):
        if lo <= n_words < hi:
            return f"{lo}-{hi - 1}"
    return f">={edges[-1]}"


STAGE_ORDER = ("embed_query", "retrieve", "rerank", "generate", "judge")


def stage_key(stage: str) -> tuple:
    """Pipeline order for per-stage latency tables and plots."""
    return (STAGE_ORDER.index(stage), "") if stage in STAGE_ORDER else (len(STAGE_ORDER), stage)


def slice_value_key(value: str) -> tuple:
    """Order slice values naturally: '<10' before '10-15' before '>=16'; '1', '2', '3+'; else by name."""
    m = re.search(r"\d+", value)
    if value.startswith("<") and m:
        return (0, -1, int(m.group()))
    if m and value[: m.start()] in {"", ">="}:
        return (0, int(m.group()), 0)
    return (1, 0, value)


def slice_columns(
    queries: pd.DataFrame, slices: Sequence[str], length_bins: Sequence[int]
) -> pd.DataFrame:
    """qid plus one column per configured slice (always as strings)."""
    out = pd.DataFrame({"qid": queries["qid"]})
    for name in slices:
        if name == "claim_label":
            out[name] = queries["claim_label"].astype(str)
        elif name == "n_gold":
            out[name] = queries["n_gold"].map(bucket_n_gold)
        elif name == "query_length":
            out[name] = queries["n_words"].map(lambda n: bucket_length(int(n), length_bins))
        elif name in queries.columns:
            out[name] = queries[name].astype(str)
        else:
            raise KeyError(f"unknown slice {name!r}: not a built-in slice nor a query column")
    return out


def aggregate(long: pd.DataFrame, slices: pd.DataFrame, slice_names: Sequence[str]) -> pd.DataFrame:
    """Mean and count of every measure per slice value; the `all` slice is always present.

    Values that are missing (e.g. faithfulness of an answer with no claims) are simply absent
    from `long`, so each mean has its own denominator `n`; a mean is never NaN.
    """
    joined = long.merge(slices, on="qid", how="left")
    frames = []
    whole = joined.groupby("measure")["value"].agg(["mean", "count"]).reset_index()
    whole.insert(0, "slice", ALL)
    whole.insert(1, "slice_value", ALL)
    frames.append(whole)
    for name in slice_names:
        g = joined.groupby([name, "measure"])["value"].agg(["mean", "count"]).reset_index()
        g = g.rename(columns={name: "slice_value"})
        g.insert(0, "slice", name)
        frames.append(g)
    out = pd.concat(frames, ignore_index=True).rename(columns={"count": "n"})
    out["n"] = out["n"].astype(int)
    return out.sort_values(["slice", "slice_value", "measure"], kind="mergesort").reset_index(
        drop=True
    )


def quantiles(values: Sequence[float], qs: Sequence[float]) -> dict[str, float]:
    """{'p50': ..., 'p95': ...}; empty input gives an empty dict (no fake zeros)."""
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        return {}
    return {f"p{round(q * 100):d}": float(np.quantile(arr, q)) for q in qs}


def cost_usd(prompt_tokens: int, completion_tokens: int, price: Any) -> float:
    return (prompt_tokens * price.input_per_mtok + completion_tokens * price.output_per_mtok) / 1e6


_ILLEGAL = re.compile(r"[^A-Za-z0-9_\-. /]")


def mlflow_key(*parts: str) -> str:
    """Join parts with '/', spelling '@k' as '_at_k' and replacing other illegal characters."""
    cleaned = []
    for p in parts:
        p = str(p).replace("@", "_at_").replace("+", "plus").replace("<", "lt").replace(">=", "ge")
        p = p.replace(">", "gt").replace("=", "_")
        cleaned.append(_ILLEGAL.sub("_", p))
    return "/".join(cleaned)


def flatten(tree: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> dict[str, float]:
    """Flatten nested metrics into MLflow keys; non-numeric leaves are skipped."""
    out: dict[str, float] = {}
    for key, value in tree.items():
        path = (*prefix, str(key))
        if isinstance(value, Mapping):
            out.update(flatten(value, path))
        elif (
            isinstance(value, bool)
            or isinstance(value, int | float)
            and not (isinstance(value, float) and math.isnan(value))
        ):
            out[mlflow_key(*path)] = float(value)
    return out
