"""Paired per-query deltas of two runs on the same queries, with intervals and p-values.

For runs A and B over one query set, each query's nDCG@10, MRR (`rr`) and P@1 is computed for
both (ir_measures, at document level, as the report does: `metrics.ir.per_query`) and the
delta B - A taken per query. Over every group of queries (all of them, and each bucket of each
slice) this module reports the mean delta with

- a 95% interval from a paired bootstrap (`scipy.stats.bootstrap` over the per-query deltas,
  percentile method; resampling the deltas is resampling the query pairs), and
- a two-sided p-value from a paired randomisation test (`scipy.stats.permutation_test`,
  `permutation_type="samples"`: the sign of each query's delta is flipped at random; exact, over
  every sign pattern, when there are at most log2(n_resamples) queries).

Both draw from a generator seeded with the given seed (the pipeline passes `runtime.seed`), fresh
for every group and measure, so each figure is deterministic and does not depend on which other
groups were computed. A group of one query has a delta but no interval (`ci_low`/`ci_high`
None, never NaN); `n` always says how many queries a figure rests on.

Two runs over different query sets are refused with one error line naming the difference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ragrig.core.errors import DataValidationError
from ragrig.core.text import counted
from ragrig.metrics.ir import Qrels, Rankings, per_query
from ragrig.metrics.names import ALL, MISSING

MEASURES: tuple[str, ...] = ("ndcg@10", "rr", "p@1")
# Readable names of the measures above (the project's tables use the ir_measures-derived keys).
LABELS = {"ndcg@10": "nDCG@10", "rr": "MRR", "p@1": "P@1"}
N_RESAMPLES = 10_000
CONFIDENCE = 0.95
SUMMARY_COLUMNS = [
    "slice",
    "slice_value",
    "measure",
    "n",
    "mean_a",
    "mean_b",
    "delta",
    "ci_low",
    "ci_high",
    "p_value",
]


def check_same_queries(
    a: Sequence[str] | set[str], b: Sequence[str] | set[str], names: tuple[str, str] = ("A", "B")
) -> None:
    """Raise DataValidationError unless both runs hold exactly the same query ids."""
    sa, sb = set(a), set(b)
    if sa == sb:
        return
    only_a, only_b = sorted(sa - sb), sorted(sb - sa)
    raise DataValidationError(
        f"paired deltas need runs on the same queries: {counted(only_a, 'query id', form=repr)} "
        f"only in {names[0]}, {counted(only_b, 'query id', form=repr)} only in {names[1]}"
    )


def per_query_deltas(
    run_a: Rankings,
    run_b: Rankings,
    qrels: Qrels,
    measures: Sequence[str] = MEASURES,
    names: tuple[str, str] = ("A", "B"),
) -> pd.DataFrame:
    """Long table (qid, measure, a, b, delta = b - a) over every answerable query of `qrels`."""
    check_same_queries(list(run_a), list(run_b), names)
    ta = per_query(run_a, qrels, measures)
    tb = per_query(run_b, qrels, measures)
    out = ta.merge(tb, on=["qid", "measure"], suffixes=("_a", "_b"), validate="one_to_one")
    out = out.rename(columns={"value_a": "a", "value_b": "b"})
    out["delta"] = out["b"] - out["a"]
    return out.sort_values(["measure", "qid"], kind="mergesort").reset_index(drop=True)


def bootstrap_interval(
    deltas: Sequence[float],
    seed: int,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> tuple[float, float] | None:
    """Percentile interval of the mean delta from a bootstrap over queries; None below 2 queries."""
    from scipy.stats import bootstrap

    d = np.asarray(deltas, dtype=float)
    if d.size < 2:
        return None
    if np.all(d == d[0]):  # every resample has the same mean
        return float(d[0]), float(d[0])
    res = bootstrap(
        (d,),
        np.mean,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        random_state=np.random.default_rng(seed),
    )
    ci = res.confidence_interval
    return float(ci.low), float(ci.high)


def randomisation_p(deltas: Sequence[float], seed: int, n_resamples: int = N_RESAMPLES) -> float:
    """Two-sided p-value of a paired randomisation (sign-flip) test of mean delta = 0."""
    from scipy.stats import permutation_test

    d = np.asarray(deltas, dtype=float)
    if d.size == 0:
        raise ValueError("randomisation test of no queries")
    if np.all(d == 0) or d.size == 1:  # one query: its two sign patterns are equally extreme
        return 1.0
    res = permutation_test(
        (d,),
        np.mean,
        permutation_type="samples",
        alternative="two-sided",
        n_resamples=n_resamples,
        vectorized=True,
        random_state=np.random.default_rng(seed),
    )
    return float(min(1.0, res.pvalue))


def _summarise(
    g: pd.DataFrame, seed: int, n_resamples: int, confidence: float
) -> dict[str, float | int | None]:
    d = g["delta"].to_numpy(dtype=float)
    ci = bootstrap_interval(d, seed, n_resamples, confidence)
    return {
        "n": int(d.size),
        "mean_a": float(g["a"].mean()),
        "mean_b": float(g["b"].mean()),
        "delta": float(d.mean()),
        "ci_low": None if ci is None else ci[0],
        "ci_high": None if ci is None else ci[1],
        "p_value": randomisation_p(d, seed, n_resamples),
    }


def summarise(
    deltas: pd.DataFrame,
    seed: int,
    slices: pd.DataFrame | None = None,
    slice_names: Sequence[str] = (),
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> pd.DataFrame:
    """One row per (slice, slice_value, measure): n, means of A and B, mean delta, interval,
    p-value. The `all` slice comes first; `slices` holds qid plus one column per slice name."""
    groups: list[tuple[str, str, pd.DataFrame]] = [(ALL, ALL, deltas)]
    if slice_names:
        if slices is None:
            raise ValueError("slice names given without a slice table")
        joined = deltas.merge(slices[["qid", *slice_names]], on="qid", how="left")
        # a query the slice table lacks is counted in the `missing` bucket, never dropped
        joined[list(slice_names)] = joined[list(slice_names)].astype(object).fillna(MISSING)
        for name in slice_names:
            for value, g in joined.groupby(name, sort=True):
                groups.append((name, str(value), g))
    rows = []
    for name, value, g in groups:
        for measure, gm in g.groupby("measure", sort=True):
            rows.append(
                {
                    "slice": name,
                    "slice_value": value,
                    "measure": measure,
                    **_summarise(gm, seed, n_resamples, confidence),
                }
            )
    out = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    for col in ("ci_low", "ci_high"):  # no interval stays None, never NaN
        out[col] = pd.Series(
            [None if r[col] is None else float(r[col]) for r in rows], dtype=object, index=out.index
        )
    return out


@dataclass(frozen=True)
class Comparison:
    per_query: pd.DataFrame  # qid, measure, a, b, delta
    summary: pd.DataFrame  # SUMMARY_COLUMNS
    names: tuple[str, str]
    seed: int
    n_resamples: int
    confidence: float

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: settings, then overall[measure] and slices[name][value][measure]."""

        def entry(row: Any) -> dict[str, Any]:
            out = {k: getattr(row, k) for k in SUMMARY_COLUMNS[3:]}
            return {k: v if v is None else int(v) if k == "n" else float(v) for k, v in out.items()}

        overall: dict[str, Any] = {}
        by_slice: dict[str, dict[str, dict[str, Any]]] = {}
        for row in self.summary.itertuples(index=False):
            if row.slice == ALL:
                overall[row.measure] = entry(row)
            else:
                by_slice.setdefault(row.slice, {}).setdefault(row.slice_value, {})[row.measure] = (
                    entry(row)
                )
        return {
            "a": self.names[0],
            "b": self.names[1],
            "delta": "b - a, per query",
            "interval": f"{self.confidence:.0%} paired bootstrap (percentile), "
            f"{self.n_resamples} resamples",
            "p_value": "two-sided paired randomisation (sign-flip) test",
            "seed": self.seed,
            "overall": overall,
            "slices": by_slice,
        }

    def metrics(self) -> dict[str, dict[str, float]]:
        """Overall figures only, numeric (for metrics.json / MLflow): measure -> field -> value."""
        out: dict[str, dict[str, float]] = {}
        for measure, e in self.as_dict()["overall"].items():
            out[measure] = {k: float(v) for k, v in e.items() if v is not None}
        return out


def compare_runs(
    run_a: Rankings,
    run_b: Rankings,
    qrels: Qrels,
    *,
    seed: int,
    names: tuple[str, str] = ("A", "B"),
    slices: pd.DataFrame | None = None,
    slice_names: Sequence[str] = (),
    measures: Sequence[str] = MEASURES,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> Comparison:
    """Paired deltas of B against A, overall and per slice (see the module docstring)."""
    table = per_query_deltas(run_a, run_b, qrels, measures, names)
    summary = summarise(table, seed, slices, slice_names, n_resamples, confidence)
    return Comparison(table, summary, names, seed, n_resamples, confidence)


def format_comparison(c: Comparison, slices: bool = True) -> str:
    """Readable table: one line per group and measure."""
    lines = [
        f"{c.names[1]} - {c.names[0]} per query; {c.confidence:.0%} paired bootstrap interval, "
        f"randomisation p (seed {c.seed}, {c.n_resamples} resamples)",
        f"{'slice':<28} {'measure':<8} {'n':>5} {'A':>7} {'B':>7} {'delta':>8} "
        f"{'interval':>19} {'p':>7}",
    ]
    for r in c.summary.itertuples(index=False):
        if not slices and r.slice != ALL:
            continue
        group = ALL if r.slice == ALL else f"{r.slice}={r.slice_value}"
        ci = "n/a" if r.ci_low is None else f"[{r.ci_low:+.4f}, {r.ci_high:+.4f}]"
        lines.append(
            f"{group:<28} {LABELS.get(r.measure, r.measure):<8} {r.n:>5} {r.mean_a:>7.4f} "
            f"{r.mean_b:>7.4f} {r.delta:>+8.4f} {ci:>19} {r.p_value:>7.4f}"
        )
    return "\n".join(lines)
