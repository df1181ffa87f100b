"""A readable console summary of metrics.json."""

from __future__ import annotations

from typing import Any

from ragrig.metrics.aggregate import headline_measure, slice_value_key, stage_key
from ragrig.report.scorecard import format_scorecard, format_slice_scorecards

NA = "n/a"  # a value with nothing measurable: never printed as 0
FILE_STATUSES = ("parsed", "failed", "skipped", "timed_out")  # ragrig.parse.docling.STATUSES
SHOWN_FILES = 3  # files named per status not parsed (all are in data/parse/parse_report.json)


def _fmt(v: Any) -> str:
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def _cell(v: Any, width: int = 10, sign: bool = False) -> str:
    if not isinstance(v, int | float) or isinstance(v, bool):
        return f"{NA:>{width}}"
    return f"{v:>+{width}.4f}" if sign else f"{v:>{width}.4f}"


def slice_measure(metrics: dict[str, Any]) -> str | None:
    """The retrieval measure shown per slice value, chosen from the whole-set values (never
    from one slice value, which may have nothing measurable), else from every slice value."""
    whole = [f"retrieval/{m}" for m in metrics.get("retrieval", {})]
    every = (
        m
        for values in metrics.get("slices", {}).values()
        for entry in values.values()
        for m in entry
    )
    return headline_measure(whole) or headline_measure(every)


def composite_line(j: dict[str, Any]) -> str:
    """One line: the composite's configured weights, the parts answers used, renormalisation,
    and the LLM judge's call statuses."""
    w = j.get("weights")
    weights = " / ".join(f"{k} {v:g}" for k, v in w.items()) if w else "not recorded"
    used = ", ".join(f"{k} {n}" for k, n in j["weights_used"].items()) or "none"
    status = {k: n for k, n in j["llm_status"].items() if n}
    llm = (
        "no LLM judge"
        if set(status) <= {"disabled"}
        else f"LLM judge {j.get('llm_model')}: {status}, {j.get('llm_cached', 0)} cached"
    )
    return (
        f"faithfulness composite: weights {weights}; parts used {used}; "
        f"{j['renormalised']} answers with weights renormalised over their available parts; {llm}"
    )


def files_lines(metrics: dict[str, Any]) -> list[str]:
    """A documents folder's files (parse=docling): the count per status with its causes, then
    for each status but parsed the first few files with their reasons and how many more."""
    files = metrics.get("counts", {}).get("files")
    if not files:
        return []
    not_parsed = metrics.get("files_not_parsed", {})
    parts = []
    for status in FILE_STATUSES:
        n = files.get(status, 0)
        causes = not_parsed.get(status, {}).get("causes", {})
        detail = f" ({', '.join(f'{k} {v}' for k, v in causes.items())})" if n and causes else ""
        parts.append(f"{status.replace('_', ' ')} {n}{detail}")
    lines = [f"files {sum(files.values())}: " + ", ".join(parts)]
    for status in FILE_STATUSES[1:]:
        entry = not_parsed.get(status) or {}
        shown = entry.get("examples", [])[:SHOWN_FILES]
        if not shown:
            continue
        more = entry.get("count", len(shown)) - len(shown)
        lines.append(
            f"  {status.replace('_', ' ')}: "
            + "; ".join(f"{f['path']} ({f['reason']})" for f in shown)
            + (f"; and {more} more (data/parse/parse_report.json)" if more > 0 else "")
        )
    return lines


def _share(entry: dict[str, Any], num: str, den: str) -> str:
    v = entry.get("value")
    return f"{_fmt(v) if v is not None else 'n/a'} ({entry.get(num, 0)}/{entry.get(den, 0)})"


def ingestion_lines(ing: dict[str, Any] | None) -> list[str]:
    """The chunk stage's ingestion metrics (data/chunk/ingestion.json) in three lines."""
    if not ing:
        return []
    a, b, c = ing["attribution"], ing["boundary_violations"], ing["coherence"]
    nd = ing["near_duplicates"]
    kinds = ", ".join(f"{k} {n}" for k, n in b["by_kind"].items())
    coh = c.get("value")
    lab = nd["labelled"]
    return [
        f"ingestion: attribution {_share(a, 'verified', 'chunks')}; boundary violations "
        f"{_share(b, 'violating_chunks', 'chunks')} ({kinds}); coherence "
        + (
            f"{coh:+.4f} (within {c['within']:.4f} over {c['within_pairs']} pairs, across "
            f"{c['across']:.4f} over {c['across_pairs']})"
            if coh is not None
            else f"n/a ({c.get('within_pairs', 0)} within, {c.get('across_pairs', 0)} across pairs)"
        ),
        f"near-duplicates: documents {_share(nd['documents'], 'items_in_groups', 'items')}, "
        f"chunks {_share(nd['chunks'], 'items_in_groups', 'items')}; labelled sample: "
        f"{lab['false_merges']}/{lab['distinct']} false merges, "
        f"{lab['missed_merges']}/{lab['duplicates']} missed merges",
    ]


def format_summary(metrics: dict[str, Any], params: dict[str, Any] | None = None) -> str:
    lines = []
    if params:
        idx = params.get("index", {})
        lines.append(
            f"ragrig  dataset={params.get('dataset', {}).get('name')}  chunk={params.get('chunk', {}).get('method')}  "
            f"dense={idx.get('dense', {}).get('method')}  sparse={idx.get('sparse', {}).get('method')}  "
            f"retrieve={params.get('retrieve', {}).get('method')}  rerank={params.get('rerank', {}).get('method')}  "
            f"generate={params.get('generate', {}).get('method')}"
        )
    c = metrics["counts"]
    if "scored" in c:
        lines.append(
            f"queries {c['queries']}: scored {c['scored']}, "
            f"no positive judgment {c['no_positive']}, missing runs {c['missing_runs']}"
            + (
                f" ({c.get('missing_runs_scored', 0)} of them scored as empty rankings)"
                if c["missing_runs"]
                else ""
            )
            + f"; unjudged (no qrels in the split, not scored) {c['unjudged']}"
        )
    else:  # a metrics.json written before these counts existed
        lines.append(
            f"queries {c['queries']} (answerable {c['answerable']}, no gold {c['no_gold']}, "
            f"missing runs {c['missing_runs']})"
        )
    lines += files_lines(metrics)
    lines.append("")
    lines.append(
        "retrieval (document level)      " + "  ".join(f"{m:>10}" for m in metrics["retrieval"])
    )
    lines.append(f"  {'final':<30}" + "  ".join(_cell(v) for v in metrics["retrieval"].values()))
    for lane, vals in metrics.get("lanes", {}).items():
        lines.append(
            f"  {'lane ' + lane:<30}" + "  ".join(_cell(vals.get(m)) for m in metrics["retrieval"])
        )
    if metrics.get("rerank"):
        lines.append(
            f"  {'rerank delta':<30}"
            + "  ".join(
                _cell(metrics["rerank"].get("delta_" + m), sign=True) for m in metrics["retrieval"]
            )
        )
    unjudged = metrics.get("judgments") or {}
    if unjudged:
        lines.append(
            "  unjudged in the top k (no judgment at all; Recall@k reads them as not relevant): "
            + ", ".join(f"@{m.split('@')[1]} {v:.4f}" for m, v in unjudged.items())
        )
    fusion = metrics.get("fusion")
    if fusion and fusion["below_best_lane"]:
        lines.append(fusion_warning(fusion))
    if "ann" in metrics:
        a = metrics["ann"]
        rec = {k: v for k, v in a.items() if k.startswith("recall")}
        lines.append(
            "ANN vs exact: "
            + ", ".join(f"{k} {v:.4f}" for k, v in rec.items())
            + (
                f"; {a['approx_ms']:.3f} ms/query vs exact {a['exact_ms']:.3f} ms/query"
                if "approx_ms" in a
                else ""
            )
        )
    lines += ingestion_lines(metrics.get("ingestion"))
    lines.append("")
    j, g = metrics["judge"], metrics["counts"]
    faith = j.get("faithfulness")
    lines.append(
        f"generation: {g['generated']} answers, status {g['generation_status']}; "
        f"judgments {g['judgment_status']}"
    )
    lines.append(
        f"faithfulness (composite): {_fmt(faith) if faith is not None else 'n/a'} over {j['n_scored']} scored answers"
        f"; {j['no_claims']} answers with no checkable claim (counted apart)"
    )
    if "scorecard" in metrics:
        lines.append("")
        lines.extend(format_scorecard(metrics["scorecard"]))
        by_slice = format_slice_scorecards(metrics.get("slices", {}))
        if by_slice:
            lines.append("")
            lines.extend(by_slice)
    if "weights_used" in j:
        lines.append(composite_line(j))
    rep = j.get("llm_repeated")
    if rep:
        share = rep["judged_faithful"]
        lines.append(
            f"LLM judge asked {rep['repeats']} times per answer ({rep['answers']} answers, "
            f"{rep['calls_failed']} calls failed): k-of-n judged faithful "
            f"{'n/a' if share is None else f'{share:.4f}'}, {rep['undecided']} undecided; calls "
            f"split on {rep['split']} answers; the judge's own spread (sd of its faithfulness "
            f"ratings within an answer) {rep['judge_sd']:.4f}"
        )
    lines.append("")
    lines.append("latency ms      " + "  ".join(f"{q:>9}" for q in ("p50", "p95", "p99")))
    for stage_name, qs in sorted(metrics["latency_ms"].items(), key=lambda kv: stage_key(kv[0])):
        lines.append(
            f"  {stage_name:<13} "
            + "  ".join(f"{qs.get(q, float('nan')):>9.2f}" for q in ("p50", "p95", "p99"))
        )
    from ragrig.report.answer_summary import summary_lines

    lines += summary_lines(metrics)  # cost (system, judge), citations, refusals, consistency
    key = slice_measure(metrics)
    for name, values in metrics.get("slices", {}).items():
        lines.append("")
        bins = metrics.get("slice_bins", {}).get(name)
        lines.append(
            f"slice {name}: n, {key or 'no retrieval measure'}, judge/faithfulness"
            + (f"  (cut points {bins})" if bins else "")
        )
        for value, entry in sorted(values.items(), key=lambda kv: slice_value_key(kv[0])):
            v = entry.get(key) if key else None
            f = entry.get("judge/faithfulness")
            lines.append(
                f"  {value:<18} n={entry['n_queries']:<5} {_cell(v, 6).strip():<8} "
                + (f"{f:.4f} (n={entry['n_judged']})" if f is not None else NA)
            )
    dropped = metrics.get("slices_dropped", {})
    if dropped:
        lines.append("")
    for name, reason in dropped.items():
        lines.append(f"slice {name} dropped: {reason}")
    return "\n".join(lines)


def fusion_warning(fusion: dict) -> str:
    """The line that flags a fused ranking below its better lane (metrics.json `fusion`)."""
    return (
        f"  warning: the fused ranking's {fusion['measure']} {fusion['fused']:.4f} (before "
        f"reranking) is below its {fusion['best_lane']} lane's {fusion['best_lane_value']:.4f}: "
        'the fusion setting does not suit this corpus (docs/metrics.md "Fusion settings")'
    )
