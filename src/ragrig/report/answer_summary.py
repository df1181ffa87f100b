"""Console lines of the answer measures (ragrig.report.answers) in metrics.json: cost per query
(system and judge apart), citations, refusals, self-consistency. No pandas: the summary of a
metrics.json is printed without the report's dependencies."""

from __future__ import annotations

from typing import Any


def _usd(stats: dict[str, Any], key: str) -> str:
    v = stats.get(key) if isinstance(stats, dict) else None
    return f"${v:.6f}" if isinstance(v, int | float) else "n/a"


def _rate(v: Any) -> str:
    return f"{v:.4f}" if isinstance(v, int | float) else "n/a"


def summary_lines(metrics: dict[str, Any]) -> list[str]:
    """Console lines of cost (system and judge $/query p50/p99), citations, refusals and
    self-consistency; a metrics.json from before these entries gives its old cost line."""
    cost = metrics.get("cost_usd_per_query", {})
    if "system" not in cost:  # written before system and judge were apart
        return [
            f"cost per query: {_usd(cost, 'mean')} mean (prices as of {cost.get('prices_as_of')})"
        ]
    s, j = cost["system"], cost["judge"]
    lines = [
        f"cost per query (prices as of {cost['prices_as_of']}, ${cost['core_hour_usd']}/core-hour): "
        f"system p50 {_usd(s, 'p50')} p99 {_usd(s, 'p99')}; "
        f"judge p50 {_usd(j, 'p50')} p99 {_usd(j, 'p99')}"
    ]
    lines += [f"  cost note: {n}" for n in cost.get("notes", [])]
    c = metrics.get("citations")
    if c:
        lines.append(
            f"citations vs gold documents (document level): precision {_rate(c['precision'])} "
            f"({c['n_citations']} citations), recall {_rate(c['recall'])} "
            f"({c['n_gold_in_context']} gold documents in contexts); answers without "
            f"citations {c['no_citations']}, without gold in context {c['no_gold_in_context']}, "
            f"without gold {c['no_gold']}"
        )
    cl = (c or {}).get("claim_level")
    if cl:
        lines.append(
            f"citations claim by claim: precision {_rate(cl['precision'])} "
            f"({cl['cited_passages_supporting']} of {cl['cited_passages']} citations "
            f"support the sentence citing them), recall {_rate(cl['recall'])} "
            f"({cl['claims_cited_with_support']} of {cl['claims_needing_support']} sentences "
            f"cite a supporting passage), completeness per answer "
            f"{_rate(cl['mean_completeness'])}"
        )
    r = metrics.get("refusal")
    if r:
        lines.append(
            f"refusals: {r['refusals']} on labelled claims, {r['correct_refusals']} correct "
            f"(precision {_rate(r['precision'])}); answerable refused {r['refused_answerable']}"
            f"/{r['answerable']} (rate {_rate(r['rate'])}); unanswerable refused "
            f"{r['correct_refusals']}/{r['unanswerable']}; unlabelled {r['unlabelled']}"
        )
        ev = r.get("by_evidence")
        if ev:
            names = {
                "answerable_evidence_seen": "answerable, gold in context",
                "answerable_evidence_missed": "answerable, retrieval missed the gold",
                "unanswerable": "unanswerable",
            }
            lines.append(
                "refusals vs the evidence given: "
                + "; ".join(
                    f"{label}: refused {ev[k]['refusals']}/{ev[k]['answers']} (should "
                    f"{ev[k]['right']}: right {_rate(ev[k]['correct'])})"
                    for k, label in names.items()
                )
            )
    sc = metrics.get("self_consistency")
    if sc and sc.get("reads") == "meaning":
        lines += consistency_lines(sc)
    elif sc and sc.get("n"):
        lines.append(
            f"self-consistency: {_rate(sc['mean'])} over {sc['n']} answers "
            f"({sc['samples_per_answer']} samples each, {sc['failed_samples']} failed)"
        )
    ext = metrics.get("external_consistency")
    if ext:
        lines.append(
            f"external consistency: {_rate(ext['mean'])} over {ext['n']} answers; of "
            f"{ext['claims']} claims checked against the corpus {ext['supported']} supported, "
            f"{ext['contradicted']} contradicted ({ext['ms_per_answer']:.0f} ms per answer)"
        )
        for f in ext["flagged"]:
            lines.append(
                f"  contradicted by the corpus ({f['kind']}; {', '.join(f['doc_ids'][:3])}): "
                f"{f['qid']}: {f['claim'][:100]}"
            )
    return lines


def consistency_lines(sc: dict) -> list[str]:
    """The self-consistency lines: by meaning, its bad inputs, the answers to review."""
    out = []
    if sc["n"]:
        out.append(
            f"self-consistency (by meaning): agreement {_rate(sc['mean'])} over {sc['n']} "
            f"answers ({sc['samples_per_answer']} samples each), {sc['mean_clusters']:.2f} "
            f"clusters, semantic entropy {sc['mean_entropy']:.3f} nats, "
            f"{sc['verifier_ms_per_answer']:.0f} ms per answer"
        )
    if sc["all_samples_failed"]:
        out.append(
            f"self-consistency not measured for {sc['all_samples_failed']} answers: every "
            "sample failed"
        )
    if sc["identical_samples"]:
        out.append(
            f"self-consistency: {sc['identical_samples']} answers have samples identical to "
            "the answer (does the generator ignore temperature and seed?)"
        )
    if sc["low_agreement"]:
        listed = ", ".join(
            f"{r['qid']} ({r['agreement']:.2f}, {r['clusters']} clusters)" for r in sc["review"]
        )
        out.append(
            f"self-consistency: {sc['low_agreement']} answers agree with under half their "
            f"samples; review: {listed}"
        )
    return out
