"""The report's scorecard: per-query axis values, the metrics.json `scorecard` section, per-slice
axes and the summary lines (pure: DataFrames in, tables and dicts out).

Per answered query (a row of the generations table):

* faithfulness: the judgment's `faithfulness` when its status is `scored` (the composite when the
  judge writes one, else the claim share); refusals and other statuses have none;
* relevance: `ragrig.metrics.relevance` over the passages given to the generator
  (`context_chunk_ids`, `contexts`), the query's embed-stage vector, the judge's `llm_relevance`
  and the qrels;
* correctness: `ragrig.metrics.correctness` (reference answer, else claim-label verdict, else
  the surrogates); a generation that failed (`status` error) has none.

Columns other stages add later (`llm_*`, `self_consistency`, `faithfulness_parts`) are read when
present and treated as unavailable when absent, so judgments written before them still report.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ragrig.core.errors import ConfigError, DataValidationError
from ragrig.core.schemas import CLAIM_FAILURE_MODES as _CLAIM_MODES
from ragrig.core.schemas import FAILURE_MODES, GENERATION_FAILED
from ragrig.core.text import sample
from ragrig.metrics import correctness as corr
from ragrig.metrics import relevance as rel
from ragrig.metrics.agreement import AGREE, ALL_LOW, DISAGREE, READINGS, technique_agreement
from ragrig.metrics.citations import chunk_documents, context_documents
from ragrig.metrics.names import ALL
from ragrig.metrics.scorecard import (
    AXES,
    DIAGNOSES,
    FloorRule,
    combine,
    evaluate,
    floor_readings,
)

# what a correctness axis value read, per answer
AXIS_READS = ("claim_score", "claim_f1", "refusal_agreement", "token_f1", "verdict", "surrogates")
# the failure modes of claim-level correctness, and "none" for a reading without one
CLAIM_FAILURE_MODES = (*_CLAIM_MODES, "none")
# the claim-level readings reported per answer (correctness/<name>)
CLAIM_MEASURES = (
    "claim_precision",
    "claim_recall",
    "claim_f1",
    "vital_recall",
    "soft_precision",
    "soft_recall",
    "claim_score",
)
# surrogates with an offline measure beside the LLM judge's rating
OFFLINE_SURROGATES = ("coverage", "clarity")
# optional columns and the part they feed
LLM_RELEVANCE = "llm_relevance"
# each surrogate's columns, the first present read: self-consistency by meaning (the judge's,
# ragrig.judge.consistency); external consistency against the corpus (ragrig.judge.external),
# else the LLM judge's reading of general knowledge
SURROGATE_COLUMNS = {
    "self_consistency": ("self_consistency",),
    "coverage": ("llm_coverage",),
    "clarity": ("llm_clarity",),
    "external_consistency": ("external_consistency", "llm_external_consistency"),
}


@dataclass(frozen=True)
class Vectors:
    """Embed-stage vectors: queries and chunks, each with its ids in row order."""

    query_ids: list[str]
    queries: np.ndarray
    chunk_ids: list[str]
    chunks: np.ndarray


@dataclass(frozen=True)
class ScorecardTables:
    long: pd.DataFrame  # qid, measure, value: axis/*, relevance/*, correctness/*
    per_query: pd.DataFrame  # one row per answered query: axes, weighted, gate, diagnosis
    counts: dict[str, Any]  # relevance/correctness bookkeeping for metrics.json
    notes: list[str]


def _value(row: Mapping[str, Any] | None, col: str) -> float | None:
    if row is None or col not in row:
        return None
    v = row[col]
    if v is None or isinstance(v, str) or pd.isna(v):
        return None
    return float(v)


def _positives(qrels: pd.DataFrame) -> dict[str, set[str]]:
    pos = qrels[qrels["relevance"] > 0]
    out: dict[str, set[str]] = {}
    for q, d in zip(pos["qid"], pos["doc_id"], strict=True):
        out.setdefault(q, set()).add(d)
    return out


def _json_list(text: str, what: str, qid: str) -> list:
    try:
        value = json.loads(text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise DataValidationError(
            f"generations: query {qid!r}: {what} is not JSON ({exc})"
        ) from None
    if not isinstance(value, list):
        raise DataValidationError(f"generations: query {qid!r}: {what} is not a JSON list")
    return value


def _claim_rows(claims: pd.DataFrame | None, cfg: Any) -> dict[str, dict[str, Any]]:
    """The judge's claim-level readings by qid; refused when they were read against another
    reference column than the report's."""
    if claims is None or not len(claims):
        return {}
    used = sorted(set(claims["reference_column"].astype(str)))
    if used != [cfg.reference_column]:
        raise ConfigError(
            f"the judge read claim-level correctness against {used}, the report's "
            f"report.scorecard.reference_column is {cfg.reference_column!r}: set "
            "judge.correctness.reference_column to the same column"
        )
    return {r["qid"]: r for r in claims.to_dict("records")}


def _reads_refusal(claim: Mapping[str, Any] | None, cfg: Any) -> bool:
    """A refusal on either side, read by agreement (ragrig.judge.correctness), under the
    claim score."""
    return (
        cfg.claim_level_measure == "claim_score"
        and claim is not None
        and claim["status"] == "refusal"
        and _value(claim, "claim_score") is not None
    )


def reference_axis(
    answer: str, token_f1: float, claim: Mapping[str, Any] | None, cfg: Any
) -> tuple[float, str]:
    """(correctness, what it read) of an answer with a reference: a refusal pair's agreement;
    a long answer's claim-level measure (`cfg.claim_level_measure`) when the judge scored it;
    else token-F1."""
    if _reads_refusal(claim, cfg):
        return float(claim["claim_score"]), "refusal_agreement"
    measure = cfg.claim_level_measure
    long = corr.answer_tokens(answer) >= cfg.claim_level_min_tokens
    if long and claim is not None and claim["status"] == "scored":
        v = _value(claim, measure)
        if v is not None:
            return v, measure
    return token_f1, "token_f1"


def _offline_coverage(
    q: Any, answer: str, refusal: bool, claim: Mapping[str, Any] | None
) -> tuple[float | None, str]:
    """(coverage, method) without an LLM judge: the vital nuggets' recall when the reference
    marks vital nuggets (`nuggets`), else the share of the question's parts the answer
    addresses (`question_parts`; a refusal addresses none); None, "" when neither applies."""
    if claim is not None and claim["vital_nuggets"] > 0:
        return float(claim["vital_recall"]), "nuggets"
    if refusal:
        return 0.0, "question_parts"
    v = corr.coverage_by_parts(str(q["text"]), answer)
    return (v, "question_parts") if v is not None else (None, "")


def scorecard_tables(
    queries: pd.DataFrame,
    qrels: pd.DataFrame,
    run: pd.DataFrame,
    generations: pd.DataFrame,
    judgments: pd.DataFrame,
    cfg: Any,
    vectors: Vectors | None = None,
    claims: pd.DataFrame | None = None,
) -> ScorecardTables:
    """Per-query axis values and their parts. `run` is the run the contexts were taken from
    (after rerank): it maps each context chunk to its document. `claims` is the judge's
    claim-level correctness table (ragrig.judge.correctness), when it wrote one."""
    from ragrig.core.text import tokenize

    if cfg.reference_column is not None and cfg.reference_column not in queries.columns:
        raise ConfigError(
            f"report.scorecard.reference_column: the queries table has no column "
            f"{cfg.reference_column!r} (columns: {sorted(queries.columns)})"
        )
    qinfo = queries.set_index("qid")
    positives = _positives(qrels)
    chunk_doc = chunk_documents(run)
    judged = {r["qid"]: r for r in judgments.to_dict("records")}
    qvec = cvec = None
    if vectors is not None:
        for what, ids, mat in (
            ("queries", vectors.query_ids, vectors.queries),
            ("chunks", vectors.chunk_ids, vectors.chunks),
        ):
            if len(ids) != mat.shape[0]:
                raise DataValidationError(
                    f"embed: {len(ids)} {what} ids for {mat.shape[0]} {what} vectors"
                )
        qvec = dict(zip(vectors.query_ids, range(len(vectors.query_ids)), strict=True))
        cvec = dict(zip(vectors.chunk_ids, range(len(vectors.chunk_ids)), strict=True))
    sim = cfg.similarity_range

    rows: list[tuple[str, str, float]] = []
    per_query = []
    counts: Counter[str] = Counter()
    verdicts: Counter[str] = Counter()
    sources: Counter[str] = Counter()
    rel_parts_used: Counter[str] = Counter()
    sur_parts_used: Counter[str] = Counter()
    failure_modes: Counter[str] = Counter()  # of the answers with a decision; "none": faithful
    undecided = 0  # scored answers whose judgments carry no decision (written before it)
    agreement: Counter[str] = Counter()  # the techniques' reading per scored answer
    flagged: dict[str, list[str]] = {DISAGREE: [], ALL_LOW: []}
    reference_problems: Counter[str] = Counter()
    axis_reads: Counter[str] = Counter()  # what each answer's correctness axis read
    claim_modes: Counter[str] = Counter()  # of the claim-level readings; "none": no failure
    claim_unscored: Counter[str] = Counter()
    coverage_methods: Counter[str] = Counter()
    clarity_methods: Counter[str] = Counter()
    long_token_f1 = 0  # long answers scored by token-F1: the judge had no claim-level reading
    claim_rows = _claim_rows(claims, cfg)

    for g in generations.to_dict("records"):
        qid = g["qid"]
        if qid not in qinfo.index:
            raise DataValidationError(f"generations: query {qid!r} is not in the queries table")
        q = qinfo.loc[qid]
        j = judged.get(qid)
        ctx_ids = _json_list(g["context_chunk_ids"], "context_chunk_ids", qid)
        passages = _json_list(g["contexts"], "contexts", qid)
        docs = context_documents(str(qid), ctx_ids, chunk_doc)

        # relevance
        parts: dict[str, float | None] = dict.fromkeys(rel.PARTS)
        empty = not ctx_ids
        counts["empty_context"] += int(empty)
        if vectors is not None:
            if empty:
                parts["semantic"] = 0.0
            elif qid in qvec and all(c in cvec for c in ctx_ids):
                cos = rel.best_cosine(
                    vectors.queries[qvec[qid]], vectors.chunks[[cvec[c] for c in ctx_ids]]
                )
                parts["semantic"] = rel.map_similarity(cos, sim.irrelevant, sim.relevant)
                rows.append((qid, "relevance/cosine", cos))
            else:
                counts["semantic_missing_vectors"] += 1
        q_tokens = tokenize([str(q["text"])])[0]
        ctx_tokens = [t for toks in tokenize([str(p) for p in passages]) for t in toks]
        parts["keyword"] = rel.keyword_overlap(q_tokens, ctx_tokens)
        parts["llm"] = _value(j, LLM_RELEVANCE)
        pos = positives.get(qid, set())
        if pos:
            precision = rel.context_precision(docs, pos)
            ranked = rel.context_precision_ranked(docs, pos)
            recall = rel.context_recall(docs, pos)
            parts["context"] = ((ranked or 0.0) + (recall or 0.0)) / 2
            for name, v in (
                ("context_precision", precision),
                ("context_precision_ranked", ranked),
                ("context_recall", recall),
            ):
                if v is not None:
                    rows.append((qid, f"relevance/{name}", v))
        relevance, used = combine(parts, cfg.relevance_weights)
        rel_parts_used.update(used.keys())
        for name in ("semantic", "keyword", "llm"):
            if parts[name] is not None:
                rows.append((qid, f"relevance/{name}", parts[name]))

        # correctness
        correctness: float | None = None
        verdict = expected = reads = coverage_method = ""
        if g["status"] in GENERATION_FAILED:
            sources["generation_error"] += 1
        else:
            answer = str(g["answer"])
            ref = problem = None
            nuggets = None
            if cfg.reference_column:
                ref, nuggets = corr.parse_reference(q.get(cfg.reference_column))
                problem = corr.reference_problem(answer, ref)
                if problem is not None:
                    reference_problems[problem] += 1
            cl = claim_rows.get(qid) if problem is None else None
            cl_scored = cl is not None and cl["status"] == "scored"
            cl_refusal = _reads_refusal(cl, cfg)
            if cl_scored:
                for name in CLAIM_MEASURES:
                    if _value(cl, name) is not None:
                        rows.append((qid, f"correctness/{name}", float(cl[name])))
                rows.append((qid, "correctness/contradictions", float(cl["contradictions"])))
                claim_modes[cl["failure_mode"] or "none"] += 1
            elif cl_refusal:
                rows.append((qid, "correctness/refusal_agreement", float(cl["claim_score"])))
                claim_modes[cl["failure_mode"] or "none"] += 1
            elif cl is not None:
                claim_unscored[cl["status"]] += 1
            refusal = j is not None and j.get("answer_kind") == "refusal"
            offline, coverage_method = _offline_coverage(
                q, answer, refusal, cl if cl_scored else None
            )
            clarity_offline = corr.clarity(answer)
            for name, v in (("coverage_offline", offline), ("clarity_offline", clarity_offline)):
                if v is not None:
                    rows.append((qid, f"correctness/{name}", v))
            label = corr.expected_verdict(q.get("claim_label")) if cfg.verdicts else None
            if problem is None and ref is not None:
                tf1 = corr.token_f1(answer, ref)
                rows.append((qid, "correctness/token_f1", tf1))
                rows.append((qid, "correctness/exact_match", corr.exact_match(answer, ref)))
                correctness, reads = reference_axis(answer, tf1, cl, cfg)
                long = corr.answer_tokens(answer) >= cfg.claim_level_min_tokens
                long_token_f1 += long and reads == "token_f1" and claims is not None
                sources["reference"] += 1
            elif label is not None:
                refusal = j is not None and j.get("answer_kind") == "refusal"
                verdict = corr.parse_verdict(answer, refusal=refusal)
                expected = label
                verdicts[verdict] += 1
                correctness, reads = float(verdict == label), "verdict"
                rows.append((qid, "correctness/verdict", correctness))
                rows.append((qid, "correctness/no_verdict", float(verdict == corr.NO_VERDICT)))
                sources["verdict"] += 1
            else:
                sur = {}
                for part, cols in SURROGATE_COLUMNS.items():
                    found = (_value(g, c) if c in g else _value(j, c) for c in cols)
                    v = next((x for x in found if x is not None), None)
                    if v is not None and part in OFFLINE_SURROGATES:
                        rows.append((qid, f"correctness/{part}_llm", v))
                    sur[part] = v
                # without an LLM judge's rating, the offline measure stands in
                if sur["coverage"] is None:
                    sur["coverage"] = offline
                else:
                    coverage_method = "llm"
                if sur["clarity"] is None:
                    sur["clarity"] = clarity_offline
                    clarity_methods["readability" if clarity_offline is not None else ""] += 1
                else:
                    clarity_methods["llm"] += 1
                for part, v in sur.items():
                    if v is not None:
                        rows.append((qid, f"correctness/{part}", v))
                correctness, sused = combine(sur, cfg.correctness_surrogate_weights)
                sur_parts_used.update(sused.keys())
                if correctness is not None:
                    rows.append((qid, "correctness/surrogate", correctness))
                    sources["surrogates"] += 1
                    reads = "surrogates"
                else:
                    sources["no_ground_truth_no_surrogate"] += 1
            if reads:
                axis_reads[reads] += 1
            coverage_methods[coverage_method] += 1

        scored = j is not None and j["status"] == "scored"
        faith = _value(j, "faithfulness") if scored else None
        decision = _value(j, "judged_faithful") if scored and "judged_faithful" in j else None
        if faith is not None:
            rows.append((qid, "faithfulness/score", faith))
        if decision is not None:
            rows.append((qid, "faithfulness/judged_faithful", decision))
            failure_modes[j["failure_mode"] or "none"] += 1
        elif scored:
            undecided += 1
        if scored:  # the faithfulness techniques side by side (ragrig.metrics.agreement)
            llm_ok = j.get("llm_status") == "ok"
            techniques = {
                "claims": _value(j, "answer_support"),
                "llm": _value(j, "llm_faithfulness") if llm_ok else None,
                "entity": _value(j, "entity_overlap"),
            }
            reading = technique_agreement(techniques, cfg.disagreement.spread, cfg.disagreement.low)
            agreement[reading or "fewer_than_two"] += 1
            if reading is not None:
                rows.append((qid, "judge/techniques_disagree", float(reading == DISAGREE)))
                rows.append((qid, "judge/techniques_all_low", float(reading == ALL_LOW)))
                if reading != AGREE:
                    flagged[reading].append(str(qid))
        if cfg.faithfulness_reads == "decision" and decision is not None:
            faith = decision
        axes = {"faithfulness": faith, "relevance": relevance, "correctness": correctness}
        for name, v in axes.items():
            if v is not None:
                rows.append((qid, f"axis/{name}", v))
        card = evaluate(axes, cfg.weights, cfg.floors_dict())
        per_query.append(
            {
                "qid": qid,
                **{a: axes[a] for a in AXES},
                "weighted": card.weighted,
                "gate": card.gate,
                "diagnosis": card.diagnosis_code,
                "verdict": verdict,
                "expected_verdict": expected,
                "correctness_reads": reads,
                "coverage_method": coverage_method,
            }
        )

    long = pd.DataFrame(rows, columns=["qid", "measure", "value"])
    long["value"] = long["value"].astype(float)
    pq = pd.DataFrame(
        per_query,
        columns=[
            "qid",
            *AXES,
            "weighted",
            "gate",
            "diagnosis",
            "verdict",
            "expected_verdict",
            "correctness_reads",
            "coverage_method",
        ],
    )
    n = len(generations)
    summary = {
        "answers": n,
        "relevance": {
            "empty_context": counts["empty_context"],
            "semantic_missing_vectors": counts["semantic_missing_vectors"],
            "answers_with_part": {p: rel_parts_used.get(p, 0) for p in rel.PARTS},
        },
        "correctness": {
            "sources": {
                s: sources[s]
                for s in (
                    "reference",
                    "verdict",
                    "surrogates",
                    "no_ground_truth_no_surrogate",
                    "generation_error",
                )
            },
            "verdicts": {v: verdicts[v] for v in corr.VERDICTS},
            "reads": {r: axis_reads[r] for r in AXIS_READS},
            "claim_level_min_tokens": cfg.claim_level_min_tokens,
            "long_answers_by_token_f1": long_token_f1,
            "reference": {p: reference_problems[p] for p in corr.REFERENCE_PROBLEMS},
            "coverage_method": {m: k for m, k in sorted(coverage_methods.items()) if m},
            "clarity_method": {m: k for m, k in sorted(clarity_methods.items()) if m},
            **(
                {
                    "claim_level": {
                        "scored": sum(claim_modes.values()),
                        "unscored": dict(sorted(claim_unscored.items())),
                        "failure_modes": {m: claim_modes[m] for m in CLAIM_FAILURE_MODES},
                    }
                }
                if claims is not None
                else {}
            ),
        },
        "diagnosis_counts": {code: int((pq["diagnosis"] == code).sum()) for code in DIAGNOSES},
        "faithfulness": {
            "reads": cfg.faithfulness_reads,
            "decided": sum(failure_modes.values()),
            "undecided": undecided,
            "failure_modes": {m: failure_modes[m] for m in FAILURE_MODES},
            "techniques": {
                **{r: agreement[r] for r in (*READINGS, "fewer_than_two")},
                "spread": cfg.disagreement.spread,
                "low": cfg.disagreement.low,
                # the answers to review, a few of each (ids in the per-query table)
                "disagree_qids": flagged[DISAGREE][:10],
                "all_low_qids": flagged[ALL_LOW][:10],
            },
        },
    }
    notes = _notes(judgments, vectors, rel_parts_used, sur_parts_used, cfg, summary)
    return ScorecardTables(long, pq, summary, notes)


def _answers(qids: list[str], n: int) -> str:
    return f"{n} answer{'' if n == 1 else 's'} ({sample(qids, total=n)})"


def _notes(judgments, vectors, rel_used, sur_used, cfg, summary) -> list[str]:
    notes = []
    scored = judgments[judgments["status"] == "scored"]
    if "faithfulness_parts" not in judgments.columns:
        notes.append("faithfulness is the claim share: the judgments carry no composite")
    else:
        sets = Counter(
            ", ".join(sorted(k for k, w in json.loads(s or "{}").items() if w))
            for s in scored["faithfulness_parts"]
        )
        for parts, k in sorted(sets.items()):
            if parts != "claims, entity, llm":
                notes.append(
                    f"faithfulness composite renormalised over {parts or 'nothing'} for {k} answers"
                )
    faith = summary["faithfulness"]
    if faith["reads"] == "decision" and faith["undecided"]:
        notes.append(
            f"faithfulness reads the mean score for {faith['undecided']} answers: their "
            "judgments carry no decision (judged before it existed)"
        )
    tech = faith["techniques"]
    compared = sum(tech[r] for r in READINGS)
    if tech[DISAGREE]:
        notes.append(
            f"the faithfulness techniques (claims, llm, entity) disagree on "
            f"{_answers(tech['disagree_qids'], tech[DISAGREE])} of {compared} "
            f"compared (spread >= {tech['spread']:g}): something is wrong in retrieval; review them"
        )
    if tech[ALL_LOW]:
        notes.append(
            f"every faithfulness technique is below {tech['low']:g} on "
            f"{_answers(tech['all_low_qids'], tech[ALL_LOW])} of {compared}: "
            "discard those answers"
        )
    if vectors is None:
        notes.append("relevance without semantic similarity: no embed-stage vectors given")
    missing = [p for p in rel.PARTS if cfg.relevance_weights[p] > 0 and not rel_used.get(p)]
    if missing:
        notes.append(f"relevance renormalised: no {', '.join(missing)} part available")
    src = summary["correctness"]["sources"]
    if src["surrogates"]:
        absent = [
            p
            for p in corr.SURROGATES
            if cfg.correctness_surrogate_weights[p] > 0 and not sur_used.get(p)
        ]
        if absent:
            notes.append(f"correctness surrogates renormalised: no {', '.join(absent)}")
    if src["no_ground_truth_no_surrogate"]:
        notes.append(
            f"correctness not measured for {src['no_ground_truth_no_surrogate']} answers: "
            "no reference, no claim label, no surrogate"
        )
    c = summary["correctness"]
    problem_text = {
        corr.REFERENCE_ABSENT: "have no reference answer",
        corr.REFERENCE_EMPTY: "have an empty reference answer",
        corr.REFERENCE_OTHER_LANGUAGE: "have a reference answer in another language than the "
        "answer",
    }
    for problem, k in c["reference"].items():
        if k:
            notes.append(
                f"{k} answers {problem_text[problem]}: not scored against it (counted as "
                f"{problem}; a claim label or the surrogates score them when present)"
            )
    if c["long_answers_by_token_f1"]:
        notes.append(
            f"{c['long_answers_by_token_f1']} answers of >= {c['claim_level_min_tokens']} "
            "tokens scored by token-F1: the judge has no claim-level reading of them"
        )
    unscored = (c.get("claim_level") or {}).get("unscored") or {}
    for status, k in unscored.items():
        if status not in corr.REFERENCE_PROBLEMS and status != "skipped":
            notes.append(f"claim-level correctness: {k} answers {status}, token-F1 used")
    nv = summary["correctness"]["verdicts"][corr.NO_VERDICT]
    if nv:
        notes.append(f"{nv} answers give no recognisable verdict: scored incorrect")
    return notes


def _axis_means(agg: pd.DataFrame, slice_name: str, value: str) -> tuple[dict, dict]:
    sel = agg[(agg["slice"] == slice_name) & (agg["slice_value"] == value)]
    values, counts = {}, {}
    for a in AXES:
        row = sel[sel["measure"] == f"axis/{a}"]
        values[a] = float(row["mean"].iloc[0]) if len(row) else None
        counts[a] = int(row["n"].iloc[0]) if len(row) else 0
    return values, counts


def _part_means(agg: pd.DataFrame, prefix: str) -> dict[str, dict[str, float]]:
    sel = agg[(agg["slice"] == ALL) & agg["measure"].str.startswith(prefix)]
    return {
        m[len(prefix) :]: {"mean": float(v), "n": int(k)}
        for m, v, k in zip(sel["measure"], sel["mean"], sel["n"], strict=True)
    }


def labelled_faithfulness(
    long: pd.DataFrame, labels: Mapping[str, Mapping[str, Any]], alpha: float
) -> dict[str, Any]:
    """The prediction-powered faithful share (ragrig.metrics.ppi) of the run: the
    faithfulness axis's per-answer values (what the axis averages) over every answer, corrected
    by people's labels on the labelled ones. A labelled answer with no axis value is counted."""
    from ragrig.metrics.ppi import ppi_mean

    rows = long[long["measure"] == "axis/faithfulness"]
    f = dict(zip(rows["qid"].astype(str), rows["value"].astype(float), strict=True))
    used = [q for q in labels if q in f]
    out = ppi_mean(
        list(f.values()), [f[q] for q in used], [labels[q]["human"] for q in used], alpha
    )
    out["labels"] = len(labels)
    out["labels_without_axis_value"] = len(labels) - len(used)
    out["labelled_human_share"] = sum(labels[q]["human"] for q in used) / len(used)
    return out


def per_answer_axes(long: pd.DataFrame, qids: Any = None) -> dict[str, list[float]]:
    """axis -> the per-answer values it averages (`axis/<name>` rows of the long table, in qid
    order), over `qids` when given (one slice value's queries)."""
    rows = long[long["measure"].str.startswith("axis/")]
    if qids is not None:
        rows = rows[rows["qid"].isin(qids)]
    rows = rows.sort_values(["measure", "qid"], kind="mergesort")
    return {
        a: rows.loc[rows["measure"] == f"axis/{a}", "value"].astype(float).tolist() for a in AXES
    }


def floor_rule(cfg: Any, seed: int, resamples: int, level: float) -> FloorRule:
    """The scorecard's floor rule from report.scorecard.floors_on and the report's bootstrap
    settings (report.bootstrap_resamples, report.interval_level, runtime.seed)."""
    return FloorRule(cfg.floors_on, max(int(resamples), 1), float(level), int(seed))


def scorecard_section(
    agg: pd.DataFrame,
    tables: ScorecardTables,
    cfg: Any,
    labels: Mapping[str, Mapping[str, Any]] | None = None,
    labels_file: str | None = None,
    alpha: float = 0.05,
    rule: FloorRule | None = None,
) -> dict[str, Any]:
    """metrics.json `scorecard`: the whole run's axes, weighted score, gate and diagnosis, each
    floor tested as `rule` says (ragrig.metrics.scorecard.floor_readings). With labels, the
    faithful share's prediction-powered estimate and interval beside the judge's mean, and the
    hard floor tested where `cfg.labels.floor_on` says."""
    rule = rule or FloorRule(cfg.floors_on)
    values, counts = _axis_means(agg, ALL, ALL)
    ppi = None
    gates: dict[str, tuple[float, str]] = {}
    if labels:
        try:
            ppi = labelled_faithfulness(tables.long, labels, alpha)
        except ValueError as exc:
            raise DataValidationError(f"{labels_file}: {exc}") from None
        ppi["file"] = labels_file
        ppi["floor_on"] = cfg.labels.floor_on
        if cfg.labels.floor_on == "lower_bound":
            gates["faithfulness"] = (ppi["ci_low"], "PPI lower bound")
        elif cfg.labels.floor_on == "estimate":
            gates["faithfulness"] = (ppi["estimate"], "PPI estimate")
    labelled = gates["faithfulness"][1] if gates else None
    gates = floor_readings(per_answer_axes(tables.long), rule, gates)
    card = evaluate(values, cfg.weights, cfg.floors_dict(), counts, gates, rule.describe(labelled))
    out = card.to_dict()
    tech = tables.counts["faithfulness"]["techniques"]
    compared = sum(tech[r] for r in READINGS)
    if compared and tech[DISAGREE] / compared >= cfg.disagreement.diagnose_share:
        # the rule: techniques that contradict each other point at retrieval first
        out["diagnosis"] += (
            f"; the faithfulness techniques disagree on {tech[DISAGREE]} of {compared} answers "
            "(something is wrong in retrieval: check it first)"
        )
    out["floors_on"] = rule.to_dict()
    out["notes"] = [*tables.notes, *out["notes"]]
    out["relevance"] = {
        **_part_means(agg, "relevance/"),
        **tables.counts["relevance"],
        "weights": dict(cfg.relevance_weights),
        "similarity_range": cfg.similarity_range.model_dump(),
    }
    out["correctness"] = {
        **_part_means(agg, "correctness/"),
        **tables.counts["correctness"],
        "surrogate_weights": dict(cfg.correctness_surrogate_weights),
    }
    out["faithfulness"] = {**_part_means(agg, "faithfulness/"), **tables.counts["faithfulness"]}
    if ppi is not None:
        out["faithfulness"]["ppi"] = ppi
    out["answers"] = tables.counts["answers"]
    out["diagnosis_counts"] = tables.counts["diagnosis_counts"]
    return out


def slice_scorecard(
    agg: pd.DataFrame,
    slice_name: str,
    value: str,
    cfg: Any,
    per_answer: Mapping[str, list[float]] | None = None,
    rule: FloorRule | None = None,
) -> dict[str, Any]:
    """The `scorecard/...` entries of one slice value: axis means and counts, weighted score,
    gate and diagnosis code (an axis with nothing measured in the slice is absent, n 0); the
    floors tested as `rule` says on the slice's `per_answer` axis values."""
    values, counts = _axis_means(agg, slice_name, value)
    rule = rule or FloorRule(cfg.floors_on)
    gates = floor_readings(per_answer or {}, rule)
    card = evaluate(values, cfg.weights, cfg.floors_dict(), counts, gates, rule.describe())
    entry: dict[str, Any] = {}
    for a in AXES:
        if values[a] is not None:
            entry[f"scorecard/{a}"] = values[a]
        entry[f"scorecard/{a}_n"] = counts[a]
    if card.weighted is not None:
        entry["scorecard/weighted"] = card.weighted
    entry["scorecard/gate"] = card.gate
    entry["scorecard/diagnosis"] = card.diagnosis_code
    return entry


def _num(v: Any) -> str:
    return f"{v:.4f}" if isinstance(v, int | float) and not isinstance(v, bool) else "n/a"


def format_scorecard(section: Mapping[str, Any]) -> list[str]:
    """Console lines: the three rows, the weighted score, the gate and the diagnosis."""
    lines = [
        f"scorecard        {'value':>8}  {'tested':>8}  {'floor':>6}  {'kind':<5} {'n':>5}  result"
    ]
    for a in AXES:
        ax = section["axes"][a]
        result = {"pass": "pass", "below_floor": "FAIL", "not_measured": "NOT MEASURED"}[
            ax["status"]
        ]
        tested = ax.get("gate_value", ax["value"])
        lines.append(
            f"  {a:<14} {_num(ax['value']):>8}  {_num(tested):>8}  {ax['floor']:>6.2f}  "
            f"{ax['kind']:<5} {ax['n']:>5}  {result}"
        )
    w = section.get("weighted")
    weights = ", ".join(f"{a} {section['weights'][a]:.2f}" for a in AXES)
    lines.append(f"  weighted       {_num(w):>8}  ({weights})")
    failed = section.get("failed", [])
    lines.append(f"  gate: {section['gate']}" + (f" ({', '.join(failed)})" if failed else ""))
    if section.get("rule"):
        lines.append(f"  {section['rule']}")
    lines.append(f"  diagnosis: {section['diagnosis']}")
    faith = section.get("faithfulness") or {}
    if "judged_faithful" in faith:
        modes = ", ".join(f"{m} {k}" for m, k in faith["failure_modes"].items() if k)
        score = faith.get("score", {}).get("mean")
        lines.append(
            f"  faithfulness: judged faithful {faith['judged_faithful']['mean']:.4f} of "
            f"{faith['decided']} answers, mean score {_num(score)}; the floor reads the "
            f"{'decision' if faith['reads'] == 'decision' else 'mean score'}"
            + (f"; unfaithful: {modes}" if modes else "")
        )
    corr_line = _correctness_line(section.get("correctness") or {})
    if corr_line:
        lines.append(corr_line)
    ppi = faith.get("ppi")
    if ppi:
        tested = section["axes"]["faithfulness"].get("gate_reads") or "judge's mean"
        lines.append(
            f"  faithfulness with {ppi['n_labelled']} labels: {ppi['estimate']:.4f} "
            f"[{ppi['ci_low']:.4f}, {ppi['ci_high']:.4f}] (PPI, {1 - ppi['alpha']:.0%}; judge "
            f"{ppi['judge_mean']:.4f}, correction {ppi['correction']:+.4f}); the floor reads "
            f"the {tested}"
        )
    for note in section.get("notes", []):
        lines.append(f"  note: {note}")
    return lines


def _correctness_line(c: Mapping[str, Any]) -> str:
    """One console line: what the correctness axis read, with the claim-level figures."""
    reads = c.get("reads") or {}
    if not any(reads.values()):
        return ""
    parts = []
    if "claim_score" in c:
        parts.append(f"claim score {c['claim_score']['mean']:.4f} (n {c['claim_score']['n']})")
    if "claim_f1" in c:
        parts.append(
            f"claim F1 {c['claim_f1']['mean']:.4f} (precision "
            f"{_num((c.get('claim_precision') or {}).get('mean'))}, recall "
            f"{_num((c.get('claim_recall') or {}).get('mean'))}, n {c['claim_f1']['n']})"
        )
        if "vital_recall" in c:
            parts.append(f"vital-nugget recall {c['vital_recall']['mean']:.4f}")
        total = (c.get("contradictions") or {}).get("mean", 0) * (
            c.get("contradictions") or {}
        ).get("n", 0)
        parts.append(f"{round(total)} contradicted claims")
    if "token_f1" in c:
        parts.append(f"token-F1 {c['token_f1']['mean']:.4f} (n {c['token_f1']['n']})")
    used = ", ".join(f"{r} {k}" for r, k in reads.items() if k)
    modes = {
        m: k for m, k in ((c.get("claim_level") or {}).get("failure_modes") or {}).items() if k
    }
    line = f"  correctness reads: {used}"
    if parts:
        line += "; " + "; ".join(parts)
    if modes:
        line += "; failure modes: " + ", ".join(f"{m} {k}" for m, k in modes.items())
    return line


def format_slice_scorecards(slices: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[str]:
    """Per slice value: the three axis means, weighted score, gate and diagnosis code."""
    lines = []
    for name, values in slices.items():
        if not any("scorecard/gate" in e for e in values.values()):
            continue
        lines.append(
            f"scorecard by {name}: {'faithful.':>9} {'relevance':>9} {'correct.':>9} "
            f"{'weighted':>9}  gate       diagnosis"
        )
        for value, e in values.items():
            if "scorecard/gate" not in e:
                continue
            lines.append(
                f"  {value:<16}"
                + "".join(f" {_num(e.get(f'scorecard/{a}')):>9}" for a in AXES)
                + f" {_num(e.get('scorecard/weighted')):>9}  {e['scorecard/gate']:<10} "
                f"{e['scorecard/diagnosis']}"
            )
    return lines
