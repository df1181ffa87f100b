"""Aggregation of long per-query tables by slice, latency quantiles, cost, and MLflow-legal keys.

Slices come from configuration and from the dataset. A slice reads one column of the queries
table and is either categorical (one bucket per value) or numeric (buckets between cut points,
given in the config or, when not given, chosen from the data as quantiles). Columns named with
the metadata prefix (default `meta_`, one per field of a query's BEIR `metadata` object) become
slices of their own. A slice with a single bucket says nothing and is dropped, with the reason.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd

from ragrig.core.errors import ConfigError
from ragrig.metrics.names import ALL, MISSING, RESERVED_SLICE_NAMES


class SliceDef(Protocol):
    """What the aggregation needs to know of one configured slice (see report config)."""

    name: str
    column: str
    kind: str  # "categorical" | "numeric"
    bins: Sequence[float] | None
    labels: Sequence[str] | None


@dataclass(frozen=True)
class Slices:
    """One string column per kept slice (plus qid), and what was decided about each slice."""

    columns: pd.DataFrame
    names: list[str]
    bins: dict[str, list[float | int]] = field(default_factory=dict)  # numeric cut points used
    dropped: dict[str, str] = field(default_factory=dict)  # slice name -> reason


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else float(x)


def _fmt_num(x: float) -> str:
    return str(_num(x)) if float(x).is_integer() else f"{x:g}"


def bin_labels(cuts: Sequence[float], integer: bool) -> list[str]:
    """Readable labels of the len(cuts)+1 buckets of cut points (lower bound included).

    Integers: cuts [10, 16] -> '<10', '10-15', '>=16'; a one-value bucket is that value ('1').
    Other numbers: cuts [0.5, 1.2] -> '<0.5', '0.5-1.2' (0.5 <= x < 1.2), '>=1.2'.
    """
    edges = [float(c) for c in cuts]
    if not edges:
        return [ALL]
    out = [f"<{_fmt_num(edges[0])}"]
    for lo, hi in zip(edges, edges[1:], strict=False):
        if integer:
            out.append(_fmt_num(lo) if hi - lo == 1 else f"{_fmt_num(lo)}-{_fmt_num(hi - 1)}")
        else:
            out.append(f"{_fmt_num(lo)}-{_fmt_num(hi)}")
    out.append(f">={_fmt_num(edges[-1])}")
    return out


def bin_index(value: float, cuts: Sequence[float]) -> int:
    """Bucket number of a value: 0 below the first cut, i when cuts[i-1] <= value < cuts[i]."""
    return int(np.searchsorted(np.asarray(cuts, dtype=float), float(value), side="right"))


def _round_sig(x: float, digits: int = 3) -> float:
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, digits - 1 - math.floor(math.log10(abs(x))))


def quantile_cuts(values: Sequence[float], n_bins: int, integer: bool) -> list[float | int]:
    """Cut points splitting the values into about `n_bins` equally filled buckets.

    Each cut is a data value (integers) or one rounded to 3 significant digits (other numbers),
    so labels stay short; ties can merge buckets, and a cut at or below the minimum (an empty
    first bucket) is left out. Fewer than two distinct values gives no cut at all.
    """
    v = np.sort(np.asarray([float(x) for x in values], dtype=float))
    if v.size == 0:
        return []
    cuts: list[float] = []
    for i in range(1, n_bins):
        c = float(v[(v.size * i) // n_bins])
        c = float(round(c)) if integer else _round_sig(c)
        if c > v[0] and (not cuts or c > cuts[-1]):
            cuts.append(c)
    return [_num(c) for c in cuts]


def _is_numeric(col: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col)


def _categorical(col: pd.Series) -> pd.Series:
    return col.map(
        lambda v: MISSING if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
    )


def _numeric(col: pd.Series, cuts: Sequence[float], labels: Sequence[str]) -> pd.Series:
    return col.map(lambda v: MISSING if pd.isna(v) else labels[bin_index(v, cuts)])


def slice_columns(
    queries: pd.DataFrame,
    specs: Sequence[SliceDef],
    *,
    quantile_bins: int = 3,
    max_categories: int = 20,
    metadata_prefix: str | None = "meta_",
) -> Slices:
    """Bucket every query by every slice: the configured ones, then one per metadata column.

    A numeric slice without bins whose column has at most `quantile_bins` distinct values gets
    one bucket per value. A configured slice naming a column the queries table lacks is a
    ConfigError. A slice is
    dropped (with its reason in `dropped`) when it has a single bucket, or, if categorical, more
    than `max_categories` values.
    """
    defs: list[tuple[str, str, str, Sequence[float] | None, Sequence[str] | None]] = []
    for s in specs:
        if s.name in RESERVED_SLICE_NAMES:
            raise ConfigError(f"report.slices: {s.name!r} is a reserved name; rename that slice")
        if s.column not in queries.columns:
            raise ConfigError(
                f"report.slices: slice {s.name!r} reads column {s.column!r}, which the queries "
                f"table lacks (columns: {sorted(queries.columns)})"
            )
        defs.append((s.name, s.column, s.kind, s.bins, s.labels))
    if metadata_prefix:
        taken_cols = {d[1] for d in defs}
        taken_names = {d[0] for d in defs}
        for col in sorted(c for c in queries.columns if str(c).startswith(metadata_prefix)):
            if col in taken_cols:
                continue
            name = col[len(metadata_prefix) :] or col
            if name in taken_names or name in RESERVED_SLICE_NAMES:
                name = col
            kind = "numeric" if _is_numeric(queries[col]) else "categorical"
            defs.append((name, col, kind, None, None))
            taken_names.add(name)

    out = pd.DataFrame({"qid": queries["qid"]})
    names: list[str] = []
    used_bins: dict[str, list[float | int]] = {}
    dropped: dict[str, str] = {}
    for name, column, kind, bins, labels in defs:
        col = queries[column]
        if kind == "numeric":
            if not _is_numeric(col):
                raise ConfigError(
                    f"report.slices: slice {name!r} is numeric but column {column!r} holds "
                    f"{col.dtype} values"
                )
            present = col.dropna()
            integer = bool(((present % 1) == 0).all())
            if bins is None and present.nunique() <= quantile_bins:
                # as few values as buckets: one bucket per value, labelled by the value
                values = col.map(lambda v: MISSING if pd.isna(v) else _fmt_num(v))
            else:
                if bins is not None:
                    cuts = [_num(b) for b in bins]
                else:
                    cuts = quantile_cuts(present.tolist(), quantile_bins, integer)
                integer = integer and all(float(c).is_integer() for c in cuts)
                names_of = list(labels) if labels is not None else bin_labels(cuts, integer)
                values = _numeric(col, cuts, names_of)
                used_bins[name] = cuts
        else:
            values = _categorical(col)
        n_buckets = values.nunique()
        if not len(values):
            dropped[name] = "no queries"
            used_bins.pop(name, None)
            continue
        if n_buckets < 2:
            dropped[name] = f"one bucket ({values.iloc[0]!r} holds all {len(values)} queries)"
            used_bins.pop(name, None)
            continue
        if kind == "categorical" and n_buckets > max_categories:
            dropped[name] = (
                f"{n_buckets} distinct values of {column} (more than max_categories "
                f"{max_categories}); configure it as numeric with bins, or raise the limit"
            )
            continue
        out[name] = values.astype(str)
        names.append(name)
    return Slices(out, names, used_bins, dropped)


STAGE_ORDER = ("embed_query", "retrieve", "rerank", "generate", "judge")


def stage_key(stage: str) -> tuple:
    """Pipeline order for per-stage latency tables and plots."""
    return (STAGE_ORDER.index(stage), "") if stage in STAGE_ORDER else (len(STAGE_ORDER), stage)


_LEADING_NUMBER = re.compile(r"^(<|>=)?(-?\d+(?:\.\d+)?)")


def slice_value_key(value: str) -> tuple:
    """Order slice values naturally: '<10', '10-15', '>=16'; '0', '1', '2', '3+'; '0.5-1.2'
    before '1.2-3'; other names alphabetically; the `missing` bucket last."""
    if value == MISSING:
        return (2, 0.0, 0, "")
    m = _LEADING_NUMBER.match(value)
    if m:
        return (0, float(m.group(2)), {"<": -1, None: 0, ">=": 1}[m.group(1)], value)
    return (1, 0.0, 0, value)


def _k_of(measure: str) -> int:
    tail = measure.rsplit("@", 1)[-1]
    return int(tail) if tail.isdigit() else 1 << 30


def headline_measure(measures: Iterable[str], prefix: str = "retrieval/") -> str | None:
    """The measure shown per slice: nDCG at the smallest k ('ndcg@10' before 'ndcg@100'),
    else the first measure with `prefix`; None when there is none."""
    names = sorted({m for m in measures if m.startswith(prefix)})
    ndcg = [m for m in names if m[len(prefix) :].startswith("ndcg@")]
    pool = ndcg or names
    return min(pool, key=lambda m: (_k_of(m), m)) if pool else None


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
