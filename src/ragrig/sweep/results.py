"""The sweep's results: one row per point (rows.json), and the table printed at the end."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

# (column, MLflow metric keys tried in order, higher is better)
HEADLINE: list[tuple[str, tuple[str, ...], bool]] = [
    ("nDCG@10", ("retrieval/ndcg_at_10",), True),
    ("Recall@100", ("retrieval/recall_at_100",), True),
    ("faithfulness", ("judge/faithfulness", "scorecard/axes/faithfulness/value"), True),
    ("p95 ms", ("latency_ms/total/p95", "latency_ms/retrieve/p95"), False),
    ("$/query", ("cost_usd_per_query/mean",), False),
]
# columns shown only when some point has them: the metadata filters' cost
OPTIONAL: list[tuple[str, tuple[str, ...], bool]] = [
    ("false excl.", ("filters/false_exclusion_rate",), False),
]


def row(
    point: str,
    params: dict[str, Any],
    metrics: dict[str, float],
    status: str,
    error: str | None,
    seconds: float,
) -> dict[str, Any]:
    """One point as the sweep page and rows.json hold it (the sweep/HTML contract)."""
    return {
        "point": point,
        "params": params,
        "metrics": metrics,
        "status": status,
        "error": error,
        "seconds": round(seconds, 3),
    }


def write_rows(rows: list[dict[str, Any]], sweep_dir: Path) -> Path:
    from ragrig.core.io import atomic_write_text

    out = sweep_dir / "rows.json"
    atomic_write_text(out, json.dumps(rows, indent=2, sort_keys=True) + "\n")
    return out


def write_sweep_page(rows: list[dict[str, Any]], sweep_dir: Path) -> Path:
    """The HTML page comparing every point (ragrig.report.html.write_sweep_page)."""
    from ragrig.sweep.page import write_sweep_page as render

    return render(rows, sweep_dir / "index.html")


def _value(metrics: dict[str, float], keys: tuple[str, ...]) -> float | None:
    for k in keys:
        v = metrics.get(k)
        if v is not None and not math.isnan(v):
            return v
    return None


def _fmt(v: float | None, column: str) -> str:
    if v is None:
        return "-"
    if column == "$/query":
        return f"{v:.2e}"
    if column.startswith("p95"):
        return f"{v:.1f}"
    return f"{v:.4f}"


def table(rows: list[dict[str, Any]]) -> str:
    """Swept values and headline metrics per point; `*` marks the best point per metric
    (highest, or lowest for latency and cost; ties all marked); failed points listed below."""
    keys = list(dict.fromkeys(k for r in rows for k in r["params"]))
    ok = [r for r in rows if r["status"] == "ok"]
    headline = HEADLINE + [
        c for c in OPTIONAL if any(_value(r["metrics"], c[1]) is not None for r in ok)
    ]
    best: dict[str, float] = {}
    for column, mkeys, higher in headline:
        values = [v for r in ok if (v := _value(r["metrics"], mkeys)) is not None]
        if len(values) > 1:
            best[column] = max(values) if higher else min(values)
    header = [*keys, *(c for c, _, _ in headline), "s"]
    lines = []
    for r in ok:
        cells = [str(r["params"].get(k, "")) for k in keys]
        for column, mkeys, _ in headline:
            v = _value(r["metrics"], mkeys)
            mark = "*" if column in best and v == best[column] else ""
            cells.append(_fmt(v, column) + mark)
        cells.append(f"{r['seconds']:.1f}")
        lines.append(cells)
    widths = [max([len(h), *(len(c[i]) for c in lines)]) for i, h in enumerate(header)]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    out += ["  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) for cells in lines]
    if best:
        out.append("* best point for that metric (lowest for latency and cost)")
    failed = [r for r in rows if r["status"] != "ok"]
    if failed:
        out.append(f"failed points ({len(failed)}):")
        out += [f"  {r['point']}: {r['error']}" for r in failed]
    return "\n".join(out)
