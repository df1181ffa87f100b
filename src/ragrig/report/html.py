"""Self-contained HTML scorecards: one run (`reports/index.html`) and one sweep (every point).

Nothing is fetched when a page opens: the style sheet is inline, plots are inline SVG drawn by
matplotlib (text kept as text), and there is no script. Numbers are printed with the console
summary's formats (scores to 4 decimals, latencies in ms to 2, costs in USD to 4 significant
digits), so a value on the page can be found in metrics.json by eye.

Run page (`write_run_page`): headline metrics with 95% percentile-bootstrap intervals over
queries (seeded, `ragrig.metrics.bootstrap`), the three-axis scorecard with its gate and
diagnosis, the per-slice table with counts, p50/p95/p99 latency per stage, and per-query
quality against cost; the sections it is given after the scorecard (the report stage's link to
the answers page, ragrig.report.answers_page).

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

from ragrig.core.io import atomic_write_text
from ragrig.metrics.aggregate import headline_measure, slice_value_key, stage_key
from ragrig.report.summary import files_lines

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
.warn{color:#8a4b00;background:#fff4e0;padding:4px 8px;border-radius:4px}
pre.err{white-space:pre-wrap;margin:4px 0 0;font-size:.85em;text-align:left}
figure{margin:8px 0}.scroll{overflow-x:auto}.measured{display:contents}svg{max-width:100%;height:auto}
"""


# --- formatting --------------------------------------------------------------------------------


def number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


def fmt_score(v: Any) -> str:
    """Scores and rates: 4 decimals, as the console summary; 'n/a' when not measured."""
    x = number(v)
    return "n/a" if x is None else f"{x:.4f}"


def fmt_ms(v: Any) -> str:
    x = number(v)
    return "n/a" if x is None else f"{x:.2f}"


def fmt_usd(v: Any) -> str:
    x = number(v)
    return "n/a" if x is None else f"{x:.4g}"


FORMATS = {"score": fmt_score, "ms": fmt_ms, "usd": fmt_usd}


def fmt_interval(ci: tuple[float, float] | None, kind: str = "score") -> str:
    if ci is None:
        return ""
    f = FORMATS[kind]
    return f"[{f(ci[0])}, {f(ci[1])}]"


def esc(v: Any) -> str:
    return html.escape(str(v), quote=True)


def page(title: str, body: list[str], style: str = "") -> str:
    """A whole page: `style` is added to the shared style sheet."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title><style>{STYLE}{style}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def table(header: list[str], rows: list[list[str]], left: int = 1, row_class=None) -> str:
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


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


MEASURED_START = '<div class="measured">'
MEASURED_END = "</div><!--/measured-->"


def _measured(fragment: str) -> str:
    """Marks what holds measured times or the cost priced from them (different on every run),
    so that a comparison of two runs' pages can leave exactly that out."""
    return f"{MEASURED_START}{fragment}{MEASURED_END}"


# --- plots -------------------------------------------------------------------------------------


def svg(fig: Any, name: str) -> str:
    """The figure as an inline <svg> element; ids salted by `name` so that several figures on
    one page never share an id, and stable from run to run."""
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buf.getvalue()
    start = text.find("<svg")
    return f'<figure id="plot-{esc(name)}">{text[start:]}</figure>'


def figure(name: str, width: float = 7.5, height: float = 4.0, ncols: int = 1):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.fonttype"] = "none"
    matplotlib.rcParams["svg.hashsalt"] = f"ragrig-{name}"
    return plt.subplots(1, ncols, figsize=(width, height))


def latency_plot(latency: Mapping[str, Mapping[str, float]]) -> str:
    """Grouped bars: p50/p95/p99 ms per stage (log scale), in pipeline order."""
    stages = sorted(latency, key=stage_key)
    fig, ax = figure("latency")
    width = 0.27
    for i, q in enumerate(("p50", "p95", "p99")):
        xs = [x + i * width for x in range(len(stages))]
        ys = [latency[s].get(q) for s in stages]
        ax.bar(
            [x for x, y in zip(xs, ys, strict=True) if number(y) and y > 0],
            [y for y in ys if number(y) and y > 0],
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
    return svg(fig, "latency")


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
            f'<div class="card" id="m-{esc(slug)}"><div class="label">{esc(label)}</div>'
            f'<div class="value">{FORMATS[kind](value)}</div>'
            f'<div class="ci">{"95% CI " + fmt_interval(ci, kind) if ci else "&nbsp;"}</div></div>'
        )
        out.append(_measured(card) if kind == "usd" else card)
    ppi = _get(metrics, "scorecard", "faithfulness", "ppi")
    if ppi:  # people's labels: the prediction-powered faithful share, with its own interval
        out.append(
            f'<div class="card" id="m-faithful_share_ppi"><div class="label">faithful share, '
            f"{esc(ppi['n_labelled'])} labels (PPI)</div>"
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
                esc(a),
                fmt_score(ax.get("value")),
                fmt_interval(ci),
                fmt_score(ax.get("gate_value", ax.get("value")))
                + (f" ({esc(ax['gate_reads'])})" if ax.get("gate_reads") else ""),
                fmt_score(ax.get("floor")),
                esc(ax.get("kind", "")),
                esc(ax.get("n", "")),
                esc(result),
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
            "",
            esc(", ".join(f"{a} {weights[a]:.2f}" for a in AXES if a in weights)),
        ]
    )
    failed = card.get("failed") or []
    out = [
        "<h2>Scorecard</h2>",
        f'<p>gate <span class="gate {esc(gate)}" id="gate">{esc(gate)}</span>'
        + (f" ({esc(', '.join(failed))})" if failed else "")
        + f'</p><p id="diagnosis">diagnosis: {esc(card.get("diagnosis", ""))}</p>',
        table(["axis", "value", "95% CI", "tested", "floor", "kind", "n", "result"], rows),
    ]
    if card.get("rule"):
        out.append(f'<p id="floor-rule">{esc(card["rule"])}</p>')
    counts = card.get("diagnosis_counts")
    if counts:
        out.append(
            note("answers per diagnosis: " + ", ".join(f"{k} {v}" for k, v in counts.items() if v))
        )
    out += [note(n) for n in card.get("notes", [])]
    return out


def _slices_html(metrics: Mapping[str, Any], per_query: Any, seed: int) -> list[str]:
    from ragrig.report.summary import slice_measure

    slices = metrics.get("slices") or {}
    if not slices:
        return ["<h2>Slices</h2>", note("no slice: the queries table gives none")]
    key = slice_measure(dict(metrics))
    out = ["<h2>Slices</h2>"]
    has_pq = per_query is not None
    for name, values in slices.items():
        bins = _get(metrics, "slice_bins", name)
        out.append(f"<h3>{esc(name)}</h3>" + (note(f"cut points {bins}") if bins else ""))
        rows = []
        for value, e in sorted(values.items(), key=lambda kv: slice_value_key(kv[0])):
            ci = None
            if has_pq and key and name in per_query.columns and e.get(key) is not None:
                ci = _ci(per_query, key, seed, slice_name=name, value=value)
            rows.append(
                [
                    esc(value),
                    esc(e.get("n_queries", "")),
                    fmt_score(e.get(key)) if key else "n/a",
                    fmt_interval(ci),
                    esc(e.get("n_judged", "")),
                    fmt_score(e.get("judge/faithfulness")),
                    fmt_score(e.get("scorecard/weighted")),
                    esc(e.get("scorecard/gate", "")),
                    esc(e.get("scorecard/diagnosis", "")),
                ]
            )
        out.append(
            table(
                [
                    "value",
                    "queries",
                    esc(key or "retrieval"),
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
        out.append(note(f"slice {name} dropped: {reason}"))
    return out


def _quality_cost_run(per_query: Any, ndcg: str | None) -> str:
    if per_query is None:
        return note("quality vs cost per query: no per-query table given")
    cost = per_query[per_query["measure"] == "cost/system_usd"].set_index("qid")["value"]
    if cost.empty:
        return note("quality vs cost per query: no per-query cost measured")
    fig, ax = figure("quality-cost")
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
        return note("quality vs cost per query: no answered query has both a quality and a cost")
    ax.set_xlabel("system cost per query (USD)")
    ax.set_ylabel("per-query quality")
    ax.set_title("quality vs cost, per answered query")
    ax.set_ylim(-0.05, 1.05)
    ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 3))
    ax.legend()
    fig.tight_layout()
    return svg(fig, "quality-cost")


def coverage_html(record: dict[str, Any]) -> list[str]:
    """The run page's coverage section: counts per cell, empty ones marked, the short cells."""
    cols = record["doc_types"]
    cells = {(c["intent"], c["doc_type"]): c for c in record["cells"]}

    def cell(r: str, c: str) -> str:
        x = cells[(r, c)]
        if not x["queries"]:
            return '<span class="warn">0</span>'
        hw = "" if x.get("half_width") is None else f" ±{x['half_width']:.3f}"
        return esc(f"{x['queries']}{hw}") + (
            f' <span class="warn">(needs {x["needed"]})</span>' if x["missing"] else ""
        )

    body = [f'<h2 id="coverage">Coverage of the query set ({esc(record["intent"])})</h2>']
    body.append(
        table(
            ["intent \\ document type", *(esc(c) for c in cols)],
            [[esc(r), *(cell(r, c) for c in cols)] for r in record["intents"]],
        )
    )
    short = [c for c in record["cells"] if c["missing"]]
    body.append(
        note(
            f"queries per cell, ± the half-width of the {record['axis']} interval at "
            f"{record['level']:.0%}; a decision's half-width of {record['half_width']:g} needs "
            f"the number in brackets: {len(short)} of {len(record['cells'])} cells short, "
            f"{sum(c['missing'] for c in short)} queries missing; empty cells "
            f"{len(record['empty'])}"
            + (
                f"; rows with no query: {', '.join(record['empty_rows'])}"
                if record.get("empty_rows")
                else ""
            )
        )  # fmt: skip
    )
    return body


def run_page_html(
    metrics: Mapping[str, Any],
    *,
    per_query: Any = None,
    params: Mapping[str, Any] | None = None,
    seed: int = 0,
    sections: Sequence[str] = (),
) -> str:
    """The run page as a string. `metrics` is metrics.json's tree; `per_query` the report's long
    table (qid, measure, value and one column per slice) from which the intervals are drawn
    (None: values without intervals); `sections`: HTML put after the scorecard (the link to
    the answers page, ragrig.report.answers_page)."""
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
            + " &middot; ".join(f"{k} <b>{esc(v)}</b>" for k, v in parts.items() if v is not None)
            + "</p>"
        )
    c = metrics.get("counts", {})
    if "queries" in c:
        body.append(
            '<p class="sub" id="counts">'
            + esc(
                f"queries {c['queries']}: scored {c.get('scored', c.get('answerable'))}, "
                f"no positive judgment {c.get('no_positive', 'n/a')}, missing runs {c.get('missing_runs', 0)}, "
                f"unjudged {c.get('unjudged', 'n/a')}; answers generated {c.get('generated', 'n/a')}"
            )
            + "</p>"
        )
    files = files_lines(dict(metrics))
    if files:  # a documents folder: its files not parsed, counted beside the queries
        body.append('<p class="sub" id="files">' + esc(files[0]) + "</p>")
        body += [note(line.strip()) for line in files[1:]]
    body.append("<h2>Headline metrics</h2>")
    body.append(_cards(metrics, per_query, seed))
    fusion = metrics.get("fusion")
    if fusion and fusion["below_best_lane"]:
        from ragrig.report.summary import fusion_warning

        body.append(
            f'<p class="warn" id="fusion-warning">{esc(fusion_warning(fusion).strip())}</p>'
        )
    body.append(
        note(
            f"95% CI: percentile bootstrap over queries, {N_RESAMPLES} resamples, seed {seed} "
            "(runtime.seed); the weighted score is a combination of the axis means and has none."
            if per_query is not None
            else "intervals not computed: no per-query table given"
        )
    )
    if metrics.get("scorecard"):
        body += _scorecard_html(metrics["scorecard"], per_query, seed)
    body += sections
    body += _slices_html(metrics, per_query, seed)
    if metrics.get("coverage"):
        body += coverage_html(metrics["coverage"])
    lat = metrics.get("latency_ms") or {}
    body.append("<h2>Latency per stage</h2>")
    if lat:
        stages = sorted(lat, key=stage_key)
        body.append(
            _measured(
                latency_plot(lat)
                + table(
                    ["stage (ms)", "p50", "p95", "p99"],
                    [
                        [esc(s), *(fmt_ms(lat[s].get(q)) for q in ("p50", "p95", "p99"))]
                        for s in stages
                    ],
                )
            )
        )
    else:
        body.append(note("no latency measured"))
    body.append("<h2>Quality vs cost per query</h2>")
    ndcg = headline_measure(f"retrieval/{m}" for m in metrics.get("retrieval", {}))
    body.append(_measured(_quality_cost_run(per_query, ndcg)))
    cost = metrics.get("cost_usd_per_query") or {}
    if cost.get("includes"):
        body.append(
            note(
                f"system cost: {cost['includes'].get('system', '')} (prices as of {cost.get('prices_as_of')})"
            )
        )
    return page("ragrig run scorecard", body)


def write_run_page(
    metrics: Mapping[str, Any],
    out: Path,
    *,
    per_query: Any = None,
    params: Mapping[str, Any] | None = None,
    seed: int = 0,
    sections: Sequence[str] = (),
) -> Path:
    """Write the run page to `out` (atomically) and return it."""
    atomic_write_text(
        Path(out),
        run_page_html(metrics, per_query=per_query, params=params, seed=seed, sections=sections),
    )
    return Path(out)
