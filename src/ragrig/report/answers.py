"""The report's answer measures beside faithfulness: cost per query (system and judge apart),
citation precision/recall, refusal correctness, self-consistency and external consistency.

`answer_measures` returns the per-query long rows (`cost/`, `citation/`, `refusal/`,
`correctness/self_consistency_lexical`) and the metrics.json entries (`cost_usd_per_query`,
`citations`, `refusal`, `self_consistency`, `external_consistency`). Self-consistency as the
correctness axis reads it is the judge's, by meaning (judgments `self_consistency`,
ragrig.judge.consistency); the lexical agreement of the samples (verdicts, else token-F1) is kept
beside it, for answers judged without it and as a check on it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from ragrig.metrics.answers import (
    EVIDENCE_ROWS,
    evidence_row,
    is_refusal,
    refusal_by_evidence,
    refusal_summary,
    self_consistency,
)
from ragrig.metrics.citations import (
    citation_long,
    citation_summary,
    gold_documents,
    gold_in_context,
    score_citations,
)
from ragrig.report.cost import cost_long, cost_summary, per_query_costs

COLUMNS = ["qid", "measure", "value"]
# Answers whose samples mostly disagree with them, listed for review (lowest agreement first)
LOW_AGREEMENT = 0.5
REVIEW_LIMIT = 20


def refusal_measures(
    queries: pd.DataFrame,
    generations: pd.DataFrame,
    judgments: pd.DataFrame,
    gold: Mapping[str, frozenset[str]] | None = None,
    in_context: Mapping[str, bool] | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Per query `refusal/refused` (1/0) and `refusal/correct` (1 when the answer refused
    exactly when the claim is unanswerable; labelled claims only), and the summary
    (ragrig.metrics.answers.refusal_summary). Answers are those the judge read (status
    scored or no_claims); the others are counted under `not_judged`.

    With `gold` and `in_context` (qid -> a gold document reached the context), the refusals are
    also judged against the evidence given (`refusal/correct_given_context`, summary
    `by_evidence`): an answerable claim whose gold passage retrieval missed should be refused,
    so "retrieval missed it" and "nothing answers it" are separate rows."""
    label = dict(
        zip(queries["qid"], queries.get("claim_label", pd.Series(dtype=str)), strict=False)
    )
    answer = dict(zip(generations["qid"], generations["answer"], strict=True))
    kinds = (
        judgments["answer_kind"] if "answer_kind" in judgments.columns else [""] * len(judgments)
    )
    rows, pairs, evidence, not_judged = [], [], [], 0
    for qid, status, kind in zip(judgments["qid"], judgments["status"], kinds, strict=True):
        if status not in ("scored", "no_claims"):
            not_judged += 1
            continue
        lab = str(label.get(qid, "unknown"))
        refused = is_refusal(kind, answer.get(qid, ""))
        pairs.append((lab, refused))
        rows.append((qid, "refusal/refused", float(refused)))
        if lab in ("SUPPORT", "CONTRADICT", "NOT_ENOUGH_INFO"):
            rows.append((qid, "refusal/correct", float(refused == (lab == "NOT_ENOUGH_INFO"))))
        if gold is not None and in_context is not None:
            row = evidence_row(lab, bool(gold.get(qid)), bool(in_context.get(qid)))
            evidence.append((row, refused))
            if row is not None:
                right = float(refused == (EVIDENCE_ROWS[row] == "refuse"))
                rows.append((qid, "refusal/correct_given_context", right))
    summary = refusal_summary(pairs)
    summary["not_judged"] = not_judged
    if gold is not None and in_context is not None:
        summary["by_evidence"] = refusal_by_evidence(evidence)
    return pd.DataFrame(rows, columns=COLUMNS), summary


def claim_citation_measures(judgments: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Citations checked claim by claim (ragrig.judge.citations), over the answers the judge
    read (status scored or no_claims): per query `citation/claim_precision` (cited passages that
    support their sentence / cited passages, where it cites) and `citation/claim_recall` (its
    completeness: sentences needing support that cite a supporting passage / such sentences);
    pooled precision and recall with their denominators, and the mean completeness. None where
    a denominator is empty, never 0."""
    if "citation_pairs" not in judgments.columns:
        return pd.DataFrame(columns=COLUMNS), None
    read = judgments[judgments["status"].isin(["scored", "no_claims"])]
    rows = []
    for r in read.itertuples(index=False):
        if r.citation_pairs:
            rows.append(
                (r.qid, "citation/claim_precision", r.citation_pairs_supported / r.citation_pairs)
            )
        if r.claims_needing_support:
            rows.append(
                (
                    r.qid,
                    "citation/claim_recall",
                    r.claims_cited_supported / r.claims_needing_support,
                )
            )
    pairs, supported = (
        int(read["citation_pairs"].sum()),
        int(read["citation_pairs_supported"].sum()),
    )
    need, covered = (
        int(read["claims_needing_support"].sum()),
        int(read["claims_cited_supported"].sum()),
    )
    complete = [v for _, m, v in rows if m == "citation/claim_recall"]
    return pd.DataFrame(rows, columns=COLUMNS), {
        "precision": supported / pairs if pairs else None,
        "recall": covered / need if need else None,
        "mean_completeness": sum(complete) / len(complete) if complete else None,
        "cited_passages": pairs,
        "cited_passages_supporting": supported,
        "claims_needing_support": need,
        "claims_cited_with_support": covered,
        "answers": len(read),
        "answers_citing": int((read["citation_pairs"] > 0).sum()),
    }


def consistency_measures(generations: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Per query `correctness/self_consistency` for answered queries with samples."""
    if "samples" not in generations.columns:
        return pd.DataFrame(columns=COLUMNS), {"n": 0, "mean": None, "samples_per_answer": 0}
    rows, n_samples = [], []
    for qid, status, ans, samples in zip(
        generations["qid"],
        generations["status"],
        generations["answer"],
        generations["samples"],
        strict=True,
    ):
        drawn = json.loads(samples)
        if status != "ok" or not drawn:
            continue
        value = self_consistency(ans, drawn)
        n_samples.append(sum(s is not None for s in drawn))
        if value is not None:
            rows.append((qid, "correctness/self_consistency_lexical", value))
    values = [v for _, _, v in rows]
    return pd.DataFrame(rows, columns=COLUMNS), {
        "n": len(values),
        "mean": sum(values) / len(values) if values else None,
        "samples_per_answer": max(n_samples) if n_samples else 0,
        "failed_samples": sum(s is None for x in generations["samples"] for s in json.loads(x)),
    }


def semantic_consistency_summary(judgments: pd.DataFrame) -> dict[str, Any] | None:
    """metrics.json `self_consistency` by meaning, from the judgments' columns (None when the
    judge wrote none): answers measured, mean agreement, clusters and entropy, answers whose
    samples all failed or all repeat the answer, the verifier's time per answer, and the answers
    with agreement below LOW_AGREEMENT (at most REVIEW_LIMIT, lowest first)."""
    if "self_consistency" not in judgments.columns:
        return None
    drawn = judgments[(judgments["consistency_samples"] + judgments["consistency_failed"]) > 0]
    done = drawn[drawn["self_consistency"].notna()]
    low = done[done["self_consistency"] < LOW_AGREEMENT].sort_values(["self_consistency", "qid"])

    def mean(col: str) -> float | None:
        return float(done[col].mean()) if len(done) else None

    return {
        "reads": "meaning",
        "n": len(done),
        "mean": mean("self_consistency"),
        "mean_clusters": mean("consistency_clusters"),
        "mean_entropy": mean("consistency_entropy"),
        "samples_per_answer": int(drawn["consistency_samples"].max()) if len(drawn) else 0,
        "all_samples_failed": len(drawn) - len(done),
        "identical_samples": int(done["consistency_identical"].sum()),
        "verifier_ms_per_answer": mean("consistency_ms"),
        "low_agreement": len(low),
        "review": [
            {"qid": q, "agreement": round(float(a), 4), "clusters": int(c)}
            for q, a, c in zip(
                low["qid"][:REVIEW_LIMIT],
                low["self_consistency"][:REVIEW_LIMIT],
                low["consistency_clusters"][:REVIEW_LIMIT],
                strict=True,
            )
        ],
    }


def external_summary(judgments: pd.DataFrame) -> dict[str, Any] | None:
    """metrics.json `external_consistency`: answers and claims checked against the corpus, the
    mean supported share, and the flagged claims (at most REVIEW_LIMIT, with their kind and
    documents). None when the judge did not check."""
    if "external_claims" not in judgments.columns or not (judgments["external_claims"] > 0).any():
        return None
    read = judgments[judgments["external_claims"] > 0]
    flagged = [
        {"qid": q, "claim": c["claim"], "kind": c["kind"], "doc_ids": c["doc_ids"]}
        for q, checks in zip(read["qid"], read["external_checks"], strict=True)
        for c in json.loads(checks)
        if c["contradicted"]
    ]
    return {
        "n": len(read),
        "mean": float(read["external_consistency"].mean()),
        "claims": int(read["external_claims"].sum()),
        "supported": int(read["external_supported"].sum()),
        "contradicted": int(read["external_contradicted"].sum()),
        "ms_per_answer": float(read["external_ms"].mean()),
        "flagged": flagged[:REVIEW_LIMIT],
    }


def answer_measures(inp: Any, cfg: Any) -> tuple[list[pd.DataFrame], dict[str, Any]]:
    """Long rows and metrics.json entries of cost, citations, refusals, self-consistency."""
    costs, notes = per_query_costs(inp.generations, inp.judgments, inp.latency, cfg)
    scores, counts = score_citations(
        inp.generations, inp.contexts_run, gold_documents(inp.queries, inp.qrels)
    )
    gold = gold_documents(inp.queries, inp.qrels)
    seen = gold_in_context(inp.generations, inp.contexts_run, gold)
    refusal_long, refusal = refusal_measures(
        inp.queries, inp.generations, inp.judgments, gold, seen
    )
    sc_long, sc = consistency_measures(inp.generations)
    claim_long, claim_level = claim_citation_measures(inp.judgments)
    parts = [cost_long(costs), citation_long(scores), claim_long, refusal_long, sc_long]
    citations = citation_summary(scores, counts)  # document level: cited documents vs gold
    if claim_level is not None:
        citations["claim_level"] = claim_level
    metrics = {
        "cost_usd_per_query": cost_summary(costs, notes, cfg),
        "citations": citations,
        "refusal": refusal,
        "self_consistency": sc,
    }
    semantic = semantic_consistency_summary(inp.judgments)
    if semantic is not None:  # the axis's: by meaning; the lexical one beside it
        metrics["self_consistency"] = {**semantic, "lexical": sc}
    external = external_summary(inp.judgments)
    if external is not None:
        metrics["external_consistency"] = external
    return [p for p in parts if len(p)], metrics
