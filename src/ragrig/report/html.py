"""Self-contained HTML scorecards: one run (`reports/index.html`) and one sweep (every point).

Nothing is fetched when a page opens: the style sheet is inline, plots are inline SVG drawn by
matplotlib (text kept as text), and there is no script. Numbers are printed with the console
summary's formats (scores to 4 decimals, latencies in ms to 2, costs in USD to 4 significant
digits), so a value on the page can be found in metrics.json by eye.

Run page (`write_run_page`): headline metrics with 95% percentile-bootstrap intervals over
queries (seeded, `ragrig.metrics.bootstrap`), the three-axis scorecard with its gate and
diagnosis, the per-slice table with counts, p50/p95/p99 latency per stage, and per-query
quality against cost.

Sweep page (`write_sweep_page`): the rows of contract 2 (`point`, `params`, `metrics`, `status`,
`error`, `seconds`; metric names are the MLflow keys the report stage logs): a results table
(best point per metric marked, failed points with their error), recall@10 against query latency
across HNSW settings with the Pareto front, quality against cost per query, nDCG@10 against
chunk size. A plot whose parameter the rows do not vary is left out with a one-line note.
"""

from __future__ import annotations

import html
import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragrig.core.errors import DataValidationError
from ragrig.core.io import atomic_write_text
from ragrig.metrics.aggregate import headline_measure, slice_value_key, stage_key
from ragrig.report.pareto import pareto_front

AXES = ("faithfulness", "relevance", "correctness")
N_RESAMPLES = 1000
ALPHA = 0.05

STYLE = """
body{font-family:system-ui,-apple-system,'DejaVu Sans',sans-serif;margin:24px auto;max-width:1100px;
color:#1d2330;background:#fff;line-height:1.4;padding:0 16px}
h1{font-size:1.6em;margin:0 0 4px}h2{font-size:1.2em;margin:28px 0 8px;border-bottom:1px solid #d8dce4}
.sub{color:#5a6272;margin:0 0 16px}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{border:1px solid #d8dce4;border-radius:8px;padding:10px 14px;min-width:150px;background:#f7f9fc}
.card .label{font-size:.85em;color:#5a6272}.card .value{font-size:1.6em;font-weight:600}
.card .ci{font-size:.8em;color:#5a6272}
table{border-collapse:collapse;margin:6px 0 12px;font-size:.92em}
th,td{border:1px solid #d8dce4;padding:4px 8px;text-align:right;vertical-align:top;white-space:nowrap}
th{background:#eef1f6}td.l,th.l{text-align:left}
td.best{background:#e3f4e1;font-weight:600}
tr.failed td{background:#fdecec}
.gate{display:inline-block;padding:3px 10px;border-radius:12px;font-weight:600;color:#fff}
.gate.pass{background:#2e7d32}.gate.fail_soft{background:#c77700}.gate.fail_hard{background:#c62828}
.gate.not_measured{background:#6b7280}
.note{color:#5a6272;font-size:.9em;margin:4px 0}
pre.err{white-space:pre-wrap;margin:4px 0 0;font-size:.85em;text-align:left}
figure{margin:8px 0}.scroll{overflow-x:auto}.measured{display:contents}svg{max-width:100%;height:auto}
"""


# --- formatting --------------------------------------------------------------------------------


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


def fmt_score(v: Any) -> str:
    """Scores and rates: 4 decimals, as the console summary; 'n/a' when not measured."""
    x = _number(v)
    return "n/a" if x is None else f"{x:.4f}"


def fmt_ms(v: Any) -> str:
    x = _number(v)
    return "n/a" if x is None else f"{x:.2f}"


def fmt_usd(v: Any) -> str:
    x = _number(v)
    return "n/a" if x is None else f"{x:.4g}"


FORMATS = {"score": fmt_score, "ms": fmt_ms, "usd": fmt_usd}


def fmt_interval(ci: tuple[float, float] | None, kind: str = "score") -> str:
    if ci is None:
        return ""
    f = FORMATS[kind]
    return f"[{f(ci[0])}, {f(ci[1])}]"


def _e(v: Any) -> str:
    return html.escape(str(v), quote=True)


def _page(title: str, body: list[str]) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{STYLE}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _table(header: list[str], rows: list[list[str]], left: int = 1, row_class=None) -> str:
    """Cells are HTML already (escape before); the first `left` columns are left-aligned."""
    head = "".join(
        f'<th class="l">{h}</th>' if i < left else f"<th>{h}</th>" for i, h in enumerate(header)
    )
    out = [f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>']
    for n, row in enumerate(rows):
        cls = f' class="{row_class[n]}"' if row_class and row_class[n] else ""
        cells = "".join(
            c
            if c.startswith("<td")
            else (f'<td class="l">{c}</td>' if i < left else f"<td>{c}</td>")
            for i, c in enumerate(row)
        )
        out.append(f"<tr{cls}>{cells}</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _note(text: str) -> str:
    return f'<p class="note">{_e(text)}</p>'


MEASURED_START = '<div class="measured">'
MEASURED_END = "</div><!--/measured-->"


def _measured(fragment: str) -> str:
    """Marks what holds measured times or the cost priced from them (different on every run),
    so that a comparison of two runs' pages can leave exactly that out."""
    return f"{MEASURED_START}{fragment}{MEASURED_END}"


# --- plots -------------------------------------------------------------------------------------


def _svg(fig: Any, name: str) -> str:
    """The figure as an inline <svg> element; ids salted by `name` so that several figures on
    one page never share an id, and stable from run to run."""
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buf.getvalue()
    start = text.find("<svg")
    return f'<figure id="plot-{_e(name)}">{text[start:]}</figure>'


def _figure(name: str, width: float = 7.5, height: float = 4.0, ncols: int = 1):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.fonttype"] = "none"
    matplotlib.rcParams["svg.hashsalt"] = f"ragrig-{name}"
    return plt.subplots(1, ncols, figsize=(width, height))


def latency_plot(latency: Mapping[str, Mapping[str, float]]) -> str:
    """Grouped bars: p50/p95/p99 ms per stage (log scale), in pipeline order."""
    stages = sorted(latency, key=stage_key)
    fig, ax = _figure("latency")
    width = 0.27
    for i, q in enumerate(("p50", "p95", "p99")):
        xs = [x + i * width for x in range(len(stages))]
        ys = [latency[s].get(q) for s in stages]
        ax.bar(
            [x for x, y in zip(xs, ys, strict=True) if _number(y) and y > 0],
            [y for y in ys if _number(y) and y > 0],
            width=width,
            label=q,
        )
    ax.set_xticks([x + width for x in range(len(stages))], stages)
    ax.set_yscale("log")
    from matplotlib.ticker import FormatStrFormatter, NullFormatter

    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel("ms per query (log)")
    ax.set_title("latency per stage")
    ax.legend()
    fig.tight_layout()
    return _svg(fig, "latency")


# --- run page ----------------------------------------------------------------------------------


def _get(tree: Mapping[str, Any], *path: str) -> Any:
    node: Any = tree
    for p in path:
        if not isinstance(node, Mapping) or p not in node:
            return None
        node = node[p]
    return node


def headline_rows(metrics: Mapping[str, Any]) -> list[tuple[str, Any, str | None, str]]:
    """(label, value, per-query measure whose mean it is or None, format kind) of the run's
    headline metrics, in display order; a metric the run did not measure is left out."""
    rows: list[tuple[str, Any, str | None, str]] = []
    retrieval = metrics.get("retrieval", {})
    names = sorted(
        retrieval,
        key=lambda m: (
            m.partition("@")[0] != "ndcg",
            m.partition("@")[0],
            int(m.partition("@")[2] or 0),
        ),
    )
    for m in names:
        base, _, k = m.partition("@")
        if base in ("ndcg", "recall"):
            rows.append(
                (
                    f"{'nDCG' if base == 'ndcg' else 'Recall'}@{k}",
                    retrieval[m],
                    f"retrieval/{m}",
                    "score",
                )
            )
    if "rr" in retrieval:
        rows.append(("MRR", retrieval["rr"], "retrieval/rr", "score"))
    card = metrics.get("scorecard")
    for a in AXES:
        v = _get(card or {}, "axes", a, "value")
        if v is None and a == "faithfulness":
            v = _get(metrics, "judge", "faithfulness")
        if v is not None:
            rows.append((a, v, f"axis/{a}", "score"))
    score = _get(card or {}, "faithfulness", "score", "mean")
    if score is not None and _get(card or {}, "faithfulness", "reads") == "decision":
        # the axis is the share judged faithful: the soft score's mean beside it
        rows.append(("faithfulness mean score", score, "faithfulness/score", "score"))
    if card and card.get("weighted") is not None:
        rows.append(("weighted score", card["weighted"], None, "score"))
    cost = _get(metrics, "cost_usd_per_query", "system", "mean")
    if cost is None:
        cost = _get(metrics, "cost_usd_per_query", "mean")
    if cost is not None:
        rows.append(("cost per query (USD)", cost, "cost/system_usd", "usd"))
    return rows


def _measure_values(
    per_query: Any, measure: str, slice_name: str | None = None, value: str | None = None
) -> list[float]:
    sel = per_query[per_query["measure"] == measure]
    if slice_name is not None:
        sel = sel[sel[slice_name].astype(str) == value]
    return [float(v) for v in sel["value"]]


def _ci(per_query: Any, measure: str | None, seed: int, **where: str) -> tuple[float, float] | None:
    from ragrig.metrics.bootstrap import bootstrap_ci

    if per_query is None or measure is None:
        return None
    values = _measure_values(per_query, measure, where.get("slice_name"), where.get("value"))
    return bootstrap_ci(values, seed, N_RESAMPLES, ALPHA) if values else None


def _cards(metrics: Mapping[str, Any], per_query: Any, seed: int) -> str:
    out = ['<div class="cards" id="headline">']
    for label, value, measure, kind in headline_rows(metrics):
        ci = _ci(per_query, measure, seed)
        slug = (
            label.lower().replace(" ", "_").replace("@", "_at_").replace("(", "").replace(")", "")
        )
        card = (
            f'<div class="card" id="m-{_e(slug)}"><div class="label">{_e(label)}</div>'
            f'<div class="value">{FORMATS[kind](value)}</div>'
            f'<div class="ci">{"95% CI " + fmt_interval(ci, kind) if ci else "&nbsp;"}</div></div>'
        )
        out.append(_measured(card) if kind == "usd" else card)
    ppi = _get(metrics, "scorecard", "faithfulness", "ppi")
    if ppi:  # people's labels: the prediction-powered faithful share, with its own interval
        out.append(
            f'<div class="card" id="m-faithful_share_ppi"><div class="label">faithful share, '
            f"{_e(ppi['n_labelled'])} labels (PPI)</div>"
            f'<div class="value">{fmt_score(ppi["estimate"])}</div>'
            f'<div class="ci">{1 - ppi["alpha"]:.0%} CI '
            f"{fmt_interval((ppi['ci_low'], ppi['ci_high']))}</div></div>"
        )
    out.append("</div>")
    return "".join(out)


def _scorecard_html(card: Mapping[str, Any], per_query: Any, seed: int) -> list[str]:
    gate = str(card.get("gate", "not_measured"))
    rows = []
    for a in AXES:
        ax = card["axes"][a]
        result = {"pass": "pass", "below_floor": "FAIL", "not_measured": "NOT MEASURED"}.get(
            ax.get("status"), str(ax.get("status"))
        )
        ci = _ci(per_query, f"axis/{a}", seed) if ax.get("value") is not None else None
        rows.append(
            [
                _e(a),
                fmt_score(ax.get("value")),
                fmt_interval(ci),
                fmt_score(ax.get("floor")),
                _e(ax.get("kind", "")),
                _e(ax.get("n", "")),
                _e(result),
            ]
        )
    weights = card.get("weights", {})
    rows.append(
        [
            "weighted",
            fmt_score(card.get("weighted")),
            "",
            "",
            "",
            "",
            _e(", ".join(f"{a} {weights[a]:.2f}" for a in AXES if a in weights)),
        ]
    )
    failed = card.get("failed") or []
    out = [
        "<h2>Scorecard</h2>",
        f'<p>gate <span class="gate {_e(gate)}" id="gate">{_e(gate)}</span>'
        + (f" ({_e(', '.join(failed))})" if failed else "")
        + f'</p><p id="diagnosis">diagnosis: {_e(card.get("diagnosis", ""))}</p>',
        _table(["axis", "value", "95% CI", "floor", "kind", "n", "result"], rows),
    ]
    counts = card.get("diagnosis_counts")
    if counts:
        out.append(
            _note("answers per diagnosis: " + ", ".join(f"{k} {v}" for k, v in counts.items() if v))
        )
    out += [_note(n) for n in card.get("notes", [])]
    return out


def _slices_html(metrics: Mapping[str, Any], per_query: Any, seed: int) -> list[str]:
    from ragrig.report.summary import slice_measure

    slices = metrics.get("slices") or {}
    if not slices:
        return ["<h2>Slices</h2>", _note("no slice: the queries table gives none")]
    key = slice_measure(dict(metrics))
    out = ["<h2>Slices</h2>"]
    has_pq = per_query is not None
    for name, values in slices.items():
        bins = _get(metrics, "slice_bins", name)
        out.append(f"<h3>{_e(name)}</h3>" + (_note(f"cut points {bins}") if bins else ""))
        rows = []
        for value, e in sorted(values.items(), key=lambda kv: slice_value_key(kv[0])):
            ci = None
            if has_pq and key and name in per_query.columns and e.get(key) is not None:
                ci = _ci(per_query, key, seed, slice_name=name, value=value)
            rows.append(
                [
                    _e(value),
                    _e(e.get("n_queries", "")),
                    fmt_score(e.get(key)) if key else "n/a",
                    fmt_interval(ci),
                    _e(e.get("n_judged", "")),
                    fmt_score(e.get("judge/faithfulness")),
                    fmt_score(e.get("scorecard/weighted")),
                    _e(e.get("scorecard/gate", "")),
                    _e(e.get("scorecard/diagnosis", "")),
                ]
            )
        out.append(
            _table(
                [
                    "value",
                    "queries",
                    _e(key or "retrieval"),
                    "95% CI",
                    "judged",
                    "faithfulness",
                    "weighted",
                    "gate",
                    "diagnosis",
                ],
                rows,
            )
        )
    for name, reason in (metrics.get("slices_dropped") or {}).items():
        out.append(_note(f"slice {name} dropped: {reason}"))
    return out


def _quality_cost_run(per_query: Any, ndcg: str | None) -> str:
    if per_query is None:
        return _note("quality vs cost per query: no per-query table given")
    cost = per_query[per_query["measure"] == "cost/system_usd"].set_index("qid")["value"]
    if cost.empty:
        return _note("quality vs cost per query: no per-query cost measured")
    fig, ax = _figure("quality-cost")
    drawn = 0
    for measure, label, marker in (
        (ndcg, ndcg and ndcg.removeprefix("retrieval/"), "o"),
        ("axis/faithfulness", "faithfulness", "x"),
    ):
        if measure is None:
            continue
        q = per_query[per_query["measure"] == measure].set_index("qid")["value"]
        both = q.to_frame("q").join(cost.rename("c"), how="inner")
        if both.empty:
            continue
        ax.scatter(both["c"], both["q"], marker=marker, alpha=0.6, label=f"{label} (n={len(both)})")
        drawn += 1
    if not drawn:
        import matplotlib.pyplot as plt

        plt.close(fig)
        return _note("quality vs cost per query: no answered query has both a quality and a cost")
    ax.set_xlabel("system cost per query (USD)")
    ax.set_ylabel("per-query quality")
    ax.set_title("quality vs cost, per answered query")
    ax.set_ylim(-0.05, 1.05)
    ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 3))
    ax.legend()
    fig.tight_layout()
    return _svg(fig, "quality-cost")


def run_page_html(
    metrics: Mapping[str, Any],
    *,
    per_query: Any = None,
    params: Mapping[str, Any] | None = None,
    seed: int = 0,
) -> str:
    """The run page as a string. `metrics` is metrics.json's tree; `per_query` the report's long
    table (qid, measure, value and one column per slice) from which the intervals are drawn
    (None: values without intervals)."""
    body = ["<h1>ragrig run scorecard</h1>"]
    if params:
        idx = params.get("index", {})
        parts = {
            "dataset": _get(params, "dataset", "name"),
            "chunk": _get(params, "chunk", "method"),
            "dense": _get(idx, "dense", "method"),
            "sparse": _get(idx, "sparse", "method"),
            "retrieve": _get(params, "retrieve", "method"),
            "rerank": _get(params, "rerank", "method"),
            "generate": _get(params, "generate", "method"),
        }
        body.append(
            '<p class="sub">'
            + " &middot; ".join(f"{k} <b>{_e(v)}</b>" for k, v in parts.items() if v is not None)
            + "</p>"
        )
    c = metrics.get("counts", {})
    if "queries" in c:
        body.append(
            '<p class="sub" id="counts">'
            + _e(
                f"queries {c['queries']}: scored {c.get('scored', c.get('answerable'))}, "
                f"no positive judgment {c.get('no_positive', 'n/a')}, missing runs {c.get('missing_runs', 0)}, "
                f"unjudged {c.get('unjudged', 'n/a')}; answers generated {c.get('generated', 'n/a')}"
            )
            + "</p>"
        )
    body.append("<h2>Headline metrics</h2>")
    body.append(_cards(metrics, per_query, seed))
    body.append(
        _note(
            f"95% CI: percentile bootstrap over queries, {N_RESAMPLES} resamples, seed {seed} "
            "(runtime.seed); the weighted score is a combination of the axis means and has none."
            if per_query is not None
            else "intervals not computed: no per-query table given"
        )
    )
    if metrics.get("scorecard"):
        body += _scorecard_html(metrics["scorecard"], per_query, seed)
    body += _slices_html(metrics, per_query, seed)
    lat = metrics.get("latency_ms") or {}
    body.append("<h2>Latency per stage</h2>")
    if lat:
        stages = sorted(lat, key=stage_key)
        body.append(
            _measured(
                latency_plot(lat)
                + _table(
                    ["stage (ms)", "p50", "p95", "p99"],
                    [
                        [_e(s), *(fmt_ms(lat[s].get(q)) for q in ("p50", "p95", "p99"))]
                        for s in stages
                    ],
                )
            )
        )
    else:
        body.append(_note("no latency measured"))
    body.append("<h2>Quality vs cost per query</h2>")
    ndcg = headline_measure(f"retrieval/{m}" for m in metrics.get("retrieval", {}))
    body.append(_measured(_quality_cost_run(per_query, ndcg)))
    cost = metrics.get("cost_usd_per_query") or {}
    if cost.get("includes"):
        body.append(
            _note(
                f"system cost: {cost['includes'].get('system', '')} (prices as of {cost.get('prices_as_of')})"
            )
        )
    return _page("ragrig run scorecard", body)


def write_run_page(
    metrics: Mapping[str, Any],
    out: Path,
    *,
    per_query: Any = None,
    params: Mapping[str, Any] | None = None,
    seed: int = 0,
) -> Path:
    """Write the run page to `out` (atomically) and return it."""
    atomic_write_text(
        Path(out), run_page_html(metrics, per_query=per_query, params=params, seed=seed)
    )
    return Path(out)


# --- sweep page --------------------------------------------------------------------------------

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
        if _number(r["seconds"]) is None and r["seconds"] is not None:
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
        v = _number(metrics.get(name))
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
    header = ["#", *(_e(k) for k in keys), *(_e(label) for label, *_ in shown), "seconds", "status"]
    width = len(header)
    body, classes = [], []
    for i, r in enumerate(rows):
        cells = [
            f'<td class="l" title="{_e(r["point"])}">{i + 1}</td>',
            *(_e(r["params"].get(k, "")) for k in keys),
        ]
        for label, cands, _, kind in shown:
            p = pick(r["metrics"], cands)
            text = FORMATS[kind](p[1] if p else None)
            cells.append(
                f'<td class="best" title="best {_e(label)}">{text} &#9733;</td>'
                if i in best[label]
                else text
            )
        cells.append("" if r["seconds"] is None else f"{float(r['seconds']):.1f}")
        cells.append(_e(r["status"]))
        body.append(cells)
        classes.append("failed" if r["status"] == "failed" else "")
        if r["status"] == "failed":
            body.append(
                [
                    f'<td class="l" colspan="{width}">point {i + 1} ({_e(r["point"])}) failed:'
                    f'<pre class="err">{_e(r["error"] or "no error recorded")}</pre></td>'
                ]
            )
            classes.append("failed")
    out = ""
    if fixed:
        out += _note(
            "the same in every point: "
            + ", ".join(f"{k}={rows[0]['params'].get(k)}" for k in fixed if k in rows[0]["params"])
        )
    legend = (
        "&#9733; best point per metric (highest for quality, lowest for latency and cost; "
        "ties all marked; failed points never)"
    )
    return (
        out
        + _table(header, body, left=1 + len(keys), row_class=classes)
        + (f'<p class="note">{legend}</p>')
    )


def _group_label(r: Mapping[str, Any], keys: Sequence[str]) -> str:
    return " ".join(f"{k}={r['params'][k]}" for k in keys if k in r["params"]) or "all points"


def _common_metric(rows: Sequence[Mapping[str, Any]], candidates: Sequence[str]) -> str | None:
    """The first candidate at least two ok rows have (one name for a whole plot axis)."""
    for name in candidates:
        have = [
            r for r in rows if r["status"] == "ok" and _number(r["metrics"].get(name)) is not None
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
        vals = [_number(r["metrics"].get(n)) for n in names]
        if r["status"] == "ok" and all(v is not None for v in vals):
            out.append((i + 1, r, vals))
    return out


def _hnsw_plot(rows: list[dict[str, Any]]) -> list[str]:
    keys = [k for full in HNSW_PARAMS if (k := _key_of(rows, full))]
    if not any(_varied(rows, k) for k in keys):
        return [
            _note(
                "recall@10 vs query latency: left out, the points do not vary an HNSW setting ("
                + ", ".join(HNSW_PARAMS)
                + ")"
            )
        ]
    rec_name, lat_name = _common_metric(rows, RECALL), _common_metric(rows, LATENCY)
    pts = _numbered(rows, rec_name, lat_name) if rec_name and lat_name else []
    if len(pts) < 2:
        return [
            _note(
                f"recall@10 vs query latency: left out, fewer than 2 points have both a recall@10 "
                f"({', '.join(RECALL)}) and a query latency ({', '.join(LATENCY)})"
            )
        ]
    xy = [(v[0], v[1]) for _, _, v in pts]  # (recall, latency)
    front = pareto_front(xy)
    others = [k for k in _param_keys(rows) if k not in keys and _varied(rows, k)]
    fig, ax = _figure("hnsw", 7.5, 4.5)
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
    names = "; ".join(f"#{pts[i][0]} {_e(pts[i][1]['point'])}" for i in on_front)
    return [
        _svg(fig, "hnsw"),
        f'<p class="note" id="pareto">Pareto front (highest {_e(rec_name)}, lowest '
        f"{_e(lat_name)}), by latency: {names}</p>",
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
            _note(
                "quality vs cost per query: left out, fewer than 2 points have a cost per query "
                "and nDCG@10 or faithfulness"
            )
        ]
    fig, axes = _figure("sweep-quality-cost", 4.2 * len(series), 3.8, ncols=len(series))
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
    return [_svg(fig, "sweep-quality-cost")]


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
            _note(
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
        return [_note("nDCG@10 vs chunk size: left out, fewer than 2 points have an nDCG@10")]

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
    fig, ax = _figure("chunk")
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
    return [_svg(fig, "chunk")]


def sweep_page_html(rows: list[dict[str, Any]], title: str = "ragrig sweep") -> str:
    rows = validate_rows(rows)
    n_failed = sum(r["status"] == "failed" for r in rows)
    body = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="sub" id="sweep-counts">{len(rows)} points: {len(rows) - n_failed} ok, {n_failed} failed</p>',
        "<h2>Results</h2>",
    ]
    if not rows:
        body.append(_note("no point in this sweep"))
        return _page(title, body)
    body.append(_results_table(rows))
    body.append("<h2>Recall@10 vs query latency (HNSW)</h2>")
    body += _hnsw_plot(rows)
    body.append("<h2>Quality vs cost per query</h2>")
    body += _quality_cost_sweep(rows)
    body.append("<h2>nDCG@10 vs chunk size</h2>")
    body += _chunk_plot(rows)
    return _page(title, body)


def write_sweep_page(rows: list[dict], out: Path) -> Path:
    """Render the rows of a sweep (contract 2) to one self-contained page at `out`."""
    out = Path(out)
    atomic_write_text(out, sweep_page_html(rows))
    return out
