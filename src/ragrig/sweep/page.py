"""The sweep's HTML page: every point of a sweep's rows.json side by side, with the HNSW,
chunking and quality-cost plots (`ragrig sweep-page`, written by every sweep)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragrig.core.errors import DataValidationError
from ragrig.core.io import atomic_write_text
from ragrig.report.html import FORMATS, esc, figure, note, number, page, svg, table
from ragrig.report.pareto import pareto_front

# (label, candidate metric names, better, format): the first candidate a row has is used. The
# MLflow keys of the report stage come first; the headline file's names after them.
SWEEP_METRICS: list[tuple[str, tuple[str, ...], str, str]] = [
    ("nDCG@10", ("retrieval/ndcg_at_10", "ndcg@10", "ndcg_at_10"), "max", "score"),
    ("Recall@10", ("retrieval/recall_at_10", "recall@10", "recall_at_10"), "max", "score"),
    ("Recall@100", ("retrieval/recall_at_100", "recall@100", "recall_at_100"), "max", "score"),
    ("MRR", ("retrieval/rr", "mrr@10", "mrr_at_10", "mrr"), "max", "score"),
    ("ANN recall@10", ("ann/recall_at_10",), "max", "score"),
    (
        "faithfulness",
        ("scorecard/axes/faithfulness/value", "judge/faithfulness", "faithfulness"),
        "max",
        "score",
    ),
    ("relevance", ("scorecard/axes/relevance/value", "relevance"), "max", "score"),
    ("correctness", ("scorecard/axes/correctness/value", "correctness"), "max", "score"),
    ("weighted", ("scorecard/weighted", "weighted", "weighted_score"), "max", "score"),
    (
        "p95 retrieve ms",
        ("latency_ms/retrieve/p95", "p95_retrieve_ms", "latency_p95_ms/retrieve"),
        "min",
        "ms",
    ),
    (
        "p95 generate ms",
        ("latency_ms/generate/p95", "p95_generate_ms", "latency_p95_ms/generate"),
        "min",
        "ms",
    ),
    (
        "cost/query USD",
        ("cost_usd_per_query/system/mean", "cost_usd_per_query/mean", "cost_per_query_usd"),
        "min",
        "usd",
    ),
]
# The HNSW plot: its parameters (a point may name the last part only, e.g. `ef_search`); the
# recall is the dense index's recall@10 against exact search when the points have it (what the
# HNSW settings change; relevance-judged recall@10 mixes in the dataset and the fusion), else the
# judged recall@10; the latency is the retrieve stage's p95 per query, else ANN search ms/query.
HNSW_PARAMS = ("index.dense.m", "index.dense.ef_construction", "retrieve.ef_search")
RECALL = ("ann/recall_at_10", "retrieval/recall_at_10", "recall@10", "recall_at_10")
LATENCY = ("latency_ms/retrieve/p95", "p95_retrieve_ms", "latency_p95_ms/retrieve", "ann/approx_ms")
CHUNK_SIZE = ("chunk.max_tokens",)
CHUNK_CHOICE = ("chunk", "chunk.method")
ROW_KEYS = ("point", "params", "metrics", "status", "error", "seconds")


def validate_rows(rows: Any, where: str = "rows") -> list[dict[str, Any]]:
    """Rows of contract 2, checked: a list of objects with point (str), params and metrics
    (objects), status ok|failed, error (str or null) and seconds (number). Raises
    DataValidationError naming the row and the field."""
    if not isinstance(rows, list):
        raise DataValidationError(
            f"{where}: expected a JSON list of rows, got {type(rows).__name__}"
        )
    for i, r in enumerate(rows):
        at = f"{where}: row {i}"
        if not isinstance(r, Mapping):
            raise DataValidationError(f"{at}: expected an object, got {type(r).__name__}")
        missing = [k for k in ROW_KEYS if k not in r]
        if missing:
            raise DataValidationError(f"{at}: missing {missing} (a row has {list(ROW_KEYS)})")
        if not isinstance(r["point"], str):
            raise DataValidationError(f"{at}: point must be a string")
        for k in ("params", "metrics"):
            if not isinstance(r[k], Mapping):
                raise DataValidationError(f"{at} ({r['point']}): {k} must be an object")
        if r["status"] not in ("ok", "failed"):
            raise DataValidationError(
                f"{at} ({r['point']}): status {r['status']!r} is not ok or failed"
            )
        if r["error"] is not None and not isinstance(r["error"], str):
            raise DataValidationError(f"{at} ({r['point']}): error must be a string or null")
        if number(r["seconds"]) is None and r["seconds"] is not None:
            raise DataValidationError(f"{at} ({r['point']}): seconds must be a number")
        for name, v in r["metrics"].items():
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                raise DataValidationError(
                    f"{at} ({r['point']}): metric {name!r} is not a number: {v!r}"
                )
    return [dict(r) for r in rows]


def pick(metrics: Mapping[str, Any], candidates: Sequence[str]) -> tuple[str, float] | None:
    """(name, value) of the first candidate present with a finite value, else None."""
    for name in candidates:
        v = number(metrics.get(name))
        if v is not None:
            return name, v
    return None


def best_rows(
    rows: Sequence[Mapping[str, Any]], candidates: Sequence[str], better: str
) -> set[int]:
    """Indices of the ok rows with the best value (ties: all of them); none with < 2 values."""
    vals = {
        i: p[1]
        for i, r in enumerate(rows)
        if r["status"] == "ok" and (p := pick(r["metrics"], candidates)) is not None
    }
    if len(vals) < 2:
        return set()
    target = max(vals.values()) if better == "max" else min(vals.values())
    return {i for i, v in vals.items() if v == target}


def _param_keys(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r["params"] if k not in keys]
    return keys


def _varied(rows: Sequence[Mapping[str, Any]], key: str) -> bool:
    return len({repr(r["params"].get(key)) for r in rows if key in r["params"]}) >= 2


def _key_of(rows: Sequence[Mapping[str, Any]], full: str) -> str | None:
    """The params key naming `full` in these rows: itself, or its last part (short form)."""
    keys = _param_keys(rows)
    if full in keys:
        return full
    short = full.rsplit(".", 1)[-1]
    return short if short in keys and short not in ("m",) else None


def _results_table(rows: list[dict[str, Any]]) -> str:
    """Points numbered from 1 (the plots label points by these numbers), the varied params, the
    headline metrics (best marked), seconds and status; a failed point's error on a row below."""
    keys = [k for k in _param_keys(rows) if _varied(rows, k) or len(rows) == 1]
    fixed = [k for k in _param_keys(rows) if k not in keys]
    shown = [
        (label, cands, better, kind)
        for label, cands, better, kind in SWEEP_METRICS
        if any(pick(r["metrics"], cands) for r in rows)
    ]
    best = {label: best_rows(rows, cands, better) for label, cands, better, _ in shown}
    header = [
        "#",
        *(esc(k) for k in keys),
        *(esc(label) for label, *_ in shown),
        "seconds",
        "status",
    ]
    width = len(header)
    body, classes = [], []
    for i, r in enumerate(rows):
        cells = [
            f'<td class="l" title="{esc(r["point"])}">{i + 1}</td>',
            *(esc(r["params"].get(k, "")) for k in keys),
        ]
        for label, cands, _, kind in shown:
            p = pick(r["metrics"], cands)
            text = FORMATS[kind](p[1] if p else None)
            cells.append(
                f'<td class="best" title="best {esc(label)}">{text} &#9733;</td>'
                if i in best[label]
                else text
            )
        cells.append("" if r["seconds"] is None else f"{float(r['seconds']):.1f}")
        cells.append(esc(r["status"]))
        body.append(cells)
        classes.append("failed" if r["status"] == "failed" else "")
        if r["status"] == "failed":
            body.append(
                [
                    f'<td class="l" colspan="{width}">point {i + 1} ({esc(r["point"])}) failed:'
                    f'<pre class="err">{esc(r["error"] or "no error recorded")}</pre></td>'
                ]
            )
            classes.append("failed")
    out = ""
    if fixed:
        out += note(
            "the same in every point: "
            + ", ".join(f"{k}={rows[0]['params'].get(k)}" for k in fixed if k in rows[0]["params"])
        )
    legend = (
        "&#9733; best point per metric (highest for quality, lowest for latency and cost; "
        "ties all marked; failed points never)"
    )
    return (
        out
        + table(header, body, left=1 + len(keys), row_class=classes)
        + (f'<p class="note">{legend}</p>')
    )


def _group_label(r: Mapping[str, Any], keys: Sequence[str]) -> str:
    return " ".join(f"{k}={r['params'][k]}" for k in keys if k in r["params"]) or "all points"


def _common_metric(rows: Sequence[Mapping[str, Any]], candidates: Sequence[str]) -> str | None:
    """The first candidate at least two ok rows have (one name for a whole plot axis)."""
    for name in candidates:
        have = [
            r for r in rows if r["status"] == "ok" and number(r["metrics"].get(name)) is not None
        ]
        if len(have) >= 2:
            return name
    return None


def _numbered(
    rows: Sequence[Mapping[str, Any]], *names: str
) -> list[tuple[int, Mapping, list[float]]]:
    """(point number from 1, row, values) of the ok rows with every named metric."""
    out = []
    for i, r in enumerate(rows):
        vals = [number(r["metrics"].get(n)) for n in names]
        if r["status"] == "ok" and all(v is not None for v in vals):
            out.append((i + 1, r, vals))
    return out


def _hnsw_plot(rows: list[dict[str, Any]]) -> list[str]:
    keys = [k for full in HNSW_PARAMS if (k := _key_of(rows, full))]
    if not any(_varied(rows, k) for k in keys):
        return [
            note(
                "recall@10 vs query latency: left out, the points do not vary an HNSW setting ("
                + ", ".join(HNSW_PARAMS)
                + ")"
            )
        ]
    rec_name, lat_name = _common_metric(rows, RECALL), _common_metric(rows, LATENCY)
    pts = _numbered(rows, rec_name, lat_name) if rec_name and lat_name else []
    if len(pts) < 2:
        return [
            note(
                f"recall@10 vs query latency: left out, fewer than 2 points have both a recall@10 "
                f"({', '.join(RECALL)}) and a query latency ({', '.join(LATENCY)})"
            )
        ]
    xy = [(v[0], v[1]) for _, _, v in pts]  # (recall, latency)
    front = pareto_front(xy)
    others = [k for k in _param_keys(rows) if k not in keys and _varied(rows, k)]
    fig, ax = figure("hnsw", 7.5, 4.5)
    groups: dict[str, list[int]] = {}
    for i, (_, r, _) in enumerate(pts):
        groups.setdefault(_group_label(r, others), []).append(i)
    for label, idx in groups.items():
        ax.scatter([xy[i][1] for i in idx], [xy[i][0] for i in idx], label=label, alpha=0.8)
    for i, (n, _, _) in enumerate(pts):
        ax.annotate(
            f"#{n}", (xy[i][1], xy[i][0]), fontsize=8, xytext=(4, 4), textcoords="offset points"
        )
    on_front = sorted(front, key=lambda i: (xy[i][1], -xy[i][0]))
    ax.plot(
        [xy[i][1] for i in on_front],
        [xy[i][0] for i in on_front],
        "k--",
        lw=1,
        label="Pareto front",
    )
    ax.scatter(
        [xy[i][1] for i in front],
        [xy[i][0] for i in front],
        s=130,
        facecolors="none",
        edgecolors="k",
    )
    ax.set_xlabel(f"query latency: {lat_name} (ms)")
    ax.set_ylabel(rec_name)
    ax.set_title("recall@10 vs query latency across HNSW settings")
    ax.legend(fontsize=8)
    fig.tight_layout()
    names = "; ".join(f"#{pts[i][0]} {esc(pts[i][1]['point'])}" for i in on_front)
    return [
        svg(fig, "hnsw"),
        f'<p class="note" id="pareto">Pareto front (highest {esc(rec_name)}, lowest '
        f"{esc(lat_name)}), by latency: {names}</p>",
    ]


def _quality_cost_sweep(rows: list[dict[str, Any]]) -> list[str]:
    cost = _common_metric(rows, SWEEP_METRICS[-1][1])
    series = [
        (label, name)
        for label, cands in (
            ("nDCG@10", SWEEP_METRICS[0][1]),
            ("faithfulness", SWEEP_METRICS[5][1]),
        )
        if cost and (name := _common_metric(rows, cands)) and len(_numbered(rows, cost, name)) >= 2
    ]
    if not series:
        return [
            note(
                "quality vs cost per query: left out, fewer than 2 points have a cost per query "
                "and nDCG@10 or faithfulness"
            )
        ]
    fig, axes = figure("sweep-quality-cost", 4.2 * len(series), 3.8, ncols=len(series))
    import numpy as np

    for ax, (label, name) in zip(np.atleast_1d(axes), series, strict=True):
        pts = _numbered(rows, cost, name)
        ax.scatter([v[0] for _, _, v in pts], [v[1] for _, _, v in pts])
        for n, _, v in pts:
            ax.annotate(
                f"#{n}", (v[0], v[1]), fontsize=8, xytext=(3, 3), textcoords="offset points"
            )
        ax.set_xlabel(f"cost per query (USD)\n{cost}")
        ax.set_ylabel(f"{label}\n{name}")
        ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 3))
        ax.set_title(f"{label} vs cost per query")
    fig.tight_layout()
    return [svg(fig, "sweep-quality-cost")]


def _chunk_label(r: Mapping[str, Any], size_key: str | None, choice_key: str | None) -> str | None:
    if size_key and size_key in r["params"]:
        return str(r["params"][size_key])
    if choice_key and choice_key in r["params"]:
        return str(r["params"][choice_key])
    return None


def _chunk_plot(rows: list[dict[str, Any]]) -> list[str]:
    size_key = next((k for full in CHUNK_SIZE if (k := _key_of(rows, full))), None)
    choice_key = next((k for k in CHUNK_CHOICE if k in _param_keys(rows)), None)
    labels = {_chunk_label(r, size_key, choice_key) for r in rows} - {None}
    if len(labels) < 2:
        return [
            note(
                "nDCG@10 vs chunk size: left out, the points do not vary the chunking ("
                + ", ".join(CHUNK_SIZE + CHUNK_CHOICE)
                + ")"
            )
        ]
    ndcg = _common_metric(rows, SWEEP_METRICS[0][1])
    pts = [
        (r, lab, v[0])
        for _, r, v in (_numbered(rows, ndcg) if ndcg else [])
        if (lab := _chunk_label(r, size_key, choice_key)) is not None
    ]
    if len(pts) < 2:
        return [note("nDCG@10 vs chunk size: left out, fewer than 2 points have an nDCG@10")]

    def order(lab: str) -> tuple:
        try:
            return (0, float(lab), "")
        except ValueError:
            return (1, 0.0, lab)

    xs = sorted({p[1] for p in pts}, key=order)
    pos = {lab: i for i, lab in enumerate(xs)}
    others = [k for k in _param_keys(rows) if k not in (size_key, choice_key) and _varied(rows, k)]
    groups: dict[str, list] = {}
    for r, lab, v in pts:
        groups.setdefault(_group_label(r, others), []).append((pos[lab], v))
    fig, ax = figure("chunk")
    for g, vals in groups.items():
        vals.sort()
        ax.plot([v[0] for v in vals], [v[1] for v in vals], "o-", label=g)
    ax.set_xticks(range(len(xs)), xs)
    ax.set_xlabel(f"chunk size ({size_key or choice_key}; tokens, or the chunker without a size)")
    ax.set_ylabel(f"nDCG@10: {ndcg}")
    ax.set_title("nDCG@10 vs chunk size")
    if len(groups) > 1:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return [svg(fig, "chunk")]


def sweep_page_html(rows: list[dict[str, Any]], title: str = "ragrig sweep") -> str:
    rows = validate_rows(rows)
    n_failed = sum(r["status"] == "failed" for r in rows)
    body = [
        f"<h1>{esc(title)}</h1>",
        f'<p class="sub" id="sweep-counts">{len(rows)} points: {len(rows) - n_failed} ok, {n_failed} failed</p>',
        "<h2>Results</h2>",
    ]
    if not rows:
        body.append(note("no point in this sweep"))
        return page(title, body)
    body.append(_results_table(rows))
    body.append("<h2>Recall@10 vs query latency (HNSW)</h2>")
    body += _hnsw_plot(rows)
    body.append("<h2>Quality vs cost per query</h2>")
    body += _quality_cost_sweep(rows)
    body.append("<h2>nDCG@10 vs chunk size</h2>")
    body += _chunk_plot(rows)
    return page(title, body)


def write_sweep_page(rows: list[dict], out: Path) -> Path:
    """Render the rows of a sweep (contract 2) to one self-contained page at `out`."""
    out = Path(out)
    atomic_write_text(out, sweep_page_html(rows))
    return out
