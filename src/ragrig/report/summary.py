"""A readable console summary of metrics.json."""

from __future__ import annotations

from typing import Any

from ragrig.metrics.aggregate import slice_value_key, stage_key


def _fmt(v: Any) -> str:
    return f"{v:.4f}" if isinstance(v, float) else str(v)


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
    lines.append(
        f"queries {c['queries']} (answerable {c['answerable']}, no gold {c['no_gold']}, missing runs {c['missing_runs']})"
    )
    lines.append("")
    lines.append(
        "retrieval (document level)      " + "  ".join(f"{m:>10}" for m in metrics["retrieval"])
    )
    lines.append(
        f"  {'final':<30}" + "  ".join(f"{v:>10.4f}" for v in metrics["retrieval"].values())
    )
    for lane, vals in metrics.get("lanes", {}).items():
        lines.append(
            f"  {'lane ' + lane:<30}"
            + "  ".join(f"{vals.get(m, 0.0):>10.4f}" for m in metrics["retrieval"])
        )
    if metrics.get("rerank"):
        lines.append(
            f"  {'rerank delta':<30}"
            + "  ".join(
                f"{metrics['rerank'].get('delta_' + m, 0.0):>+10.4f}" for m in metrics["retrieval"]
            )
        )
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
    lines.append("")
    j, g = metrics["judge"], metrics["counts"]
    faith = j.get("faithfulness")
    lines.append(
        f"generation: {g['generated']} answers, status {g['generation_status']}; "
        f"judgments {g['judgment_status']}"
    )
    lines.append(
        f"faithfulness (overlap judge): {_fmt(faith) if faith is not None else 'n/a'} over {j['n_scored']} scored answers"
        f"; {j['no_claims']} answers with no checkable claim (counted apart)"
    )
    lines.append("")
    lines.append("latency ms      " + "  ".join(f"{q:>9}" for q in ("p50", "p95", "p99")))
    for stage_name, qs in sorted(metrics["latency_ms"].items(), key=lambda kv: stage_key(kv[0])):
        lines.append(
            f"  {stage_name:<13} "
            + "  ".join(f"{qs.get(q, float('nan')):>9.2f}" for q in ("p50", "p95", "p99"))
        )
    cost = metrics["cost_usd_per_query"]
    lines.append(f"cost per query: ${cost['mean']:.6f} mean (prices as of {cost['prices_as_of']})")
    for name, values in metrics.get("slices", {}).items():
        lines.append("")
        key = next(
            (k for k in next(iter(values.values()), {}) if k.startswith("retrieval/ndcg@")), None
        )
        lines.append(f"slice {name}: n, {key}, judge/faithfulness")
        for value, entry in sorted(values.items(), key=lambda kv: slice_value_key(kv[0])):
            f = entry.get("judge/faithfulness")
            lines.append(
                f"  {value:<18} n={entry['n_queries']:<5} {entry.get(key, 0.0):.4f}   "
                + (f"{f:.4f} (n={entry['n_judged']})" if f is not None else "n/a")
            )
    return "\n".join(lines)
