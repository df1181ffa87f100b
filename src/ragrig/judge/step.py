"""The judge stage's computation."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ragrig.core.schemas import DEFAULT_VETO, FAILURE_MODES, GENERATION_FAILED
from ragrig.judge.base import InvalidVerdict, Judge
from ragrig.judge.citations import check_citations, pair_items


@dataclass
class _Row:
    qid: str
    status: str
    n_claims: int = 0
    n_supported: int = 0
    faithfulness: float | None = None
    claims: str = "[]"
    latency_ms: float = 0.0
    error: str = ""
    answer_kind: str = ""
    entity_overlap: float | None = None
    claim_support: float | None = None
    answer_support: float | None = None
    faithfulness_parts: str = "{}"
    # the answer-level decision (decide): 1.0 faithful, 0.0 not, None unless scored
    judged_faithful: float | None = None
    contradictions: str = "[]"
    failure_mode: str = ""
    llm_status: str = "disabled"
    llm_faithfulness: float | None = None
    llm_relevance: float | None = None
    llm_coverage: float | None = None
    llm_clarity: float | None = None
    llm_external_consistency: float | None = None
    llm_unsupported: str = "[]"
    # the repeated judge (judge.llm.repeats): calls made and succeeded, votes "faithful", the
    # k-of-n verdict, the spread of the faithfulness ratings
    llm_repeats: int = 0
    llm_repeats_ok: int = 0
    llm_votes: int = 0
    llm_verdict: float | None = None
    llm_spread: float | None = None
    llm_cached: bool = False
    llm_error: str = ""
    judge_prompt_tokens: int = 0
    judge_completion_tokens: int = 0
    judge_cpu_s: float = 0.0
    judge_model: str = ""
    # citations checked claim by claim (ragrig.judge.citations; judge.citation_checks)
    citation_pairs: int = 0
    citation_pairs_supported: int = 0
    claims_needing_support: int = 0
    claims_cited_supported: int = 0
    citation_checks: str = "[]"
    # self-consistency read by meaning (ragrig.judge.consistency; judge.consistency)
    self_consistency: float | None = None
    consistency_clusters: int = 0
    consistency_entropy: float | None = None
    consistency_samples: int = 0
    consistency_failed: int = 0
    consistency_identical: bool = False
    consistency_ms: float = 0.0
    # claims checked against the whole corpus (ragrig.judge.external; judge.external)
    external_consistency: float | None = None
    external_claims: int = 0
    external_supported: int = 0
    external_contradicted: int = 0
    external_checks: str = "[]"
    external_ms: float = 0.0


COLUMNS = list(_Row.__dataclass_fields__)
# The answer-level decision without a calibrated threshold (judge.decision_threshold None):
# P(faithful), or the mean claim probability, or the supported share, at one half.
DEFAULT_DECISION_THRESHOLD = 0.5
_MODE_OF_KIND = {
    "negation": "contradiction",
    "number": "wrong_number",
    "entity": "wrong_entity",
    "fabricated": "fabrication",
    "contradicted": "contradiction",  # the LLM claim judge's verdict
}


def decide(
    soft: float | None,
    n_claims: int,
    n_supported: int,
    contradictions: list[tuple[str, str, str]],
    threshold: float,
    veto: Collection[str] = ("negation", "number", "entity", "fabricated"),
) -> tuple[float | None, str]:
    """(judged_faithful, failure_mode) of one answer: unfaithful when a hard check of a kind in
    `veto` contradicts a claim, whatever its soft score; else faithful when its answer-level
    score `soft` is >= `threshold`; None for an answer with no claims. The failure mode of an
    unfaithful answer is its first finding's (any kind), else fabrication or
    overgeneralisation."""
    if n_claims == 0 or soft is None:
        return None, ""
    decisive = [c for c in contradictions if c[1] in veto]
    if decisive:
        return 0.0, _MODE_OF_KIND.get(decisive[0][1], "contradiction")
    if soft >= threshold:
        return 1.0, ""
    if contradictions:
        return 0.0, _MODE_OF_KIND.get(contradictions[0][1], "contradiction")
    return 0.0, "fabrication" if n_supported < n_claims else "overgeneralisation"


FLOAT_COLUMNS = [c for c, f in _Row.__dataclass_fields__.items() if "float" in str(f.type)]
DEFAULT_WEIGHTS = {"claims": 0.4, "llm": 0.4, "entity": 0.2}


def _claim_fields(judge: Judge, question: str, answer: str, contexts: list[str]) -> dict[str, Any]:
    """The claim checker's columns for one answer; its failures become status error/invalid."""
    try:
        verdict = judge.judge(question, answer, contexts)
    except InvalidVerdict as exc:
        return {"status": "invalid", "error": str(exc)}
    except Exception as exc:  # counted as status=error, never dropped
        return {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
    supported = set(verdict.supported)
    claims = [{"claim": c, "supported": c in supported} for c in verdict.extracted]
    for claim, p in zip(claims, verdict.claim_scores or (), strict=False):
        claim["p_supported"] = round(p, 4)
    return {
        "status": verdict.outcome,
        "n_claims": len(verdict.extracted),
        "n_supported": len(verdict.supported),
        "claim_support": verdict.score,
        "answer_support": verdict.soft_score,
        "claims": json.dumps(claims),
        "_contradictions": list(verdict.contradictions),
        "error": verdict.reason,
        "answer_kind": verdict.kind,
        "entity_overlap": verdict.entity_overlap,
    }


# a call that rates faithfulness at or above this votes "faithful" in the k-of-n verdict
VOTE_AT = 0.5
_RATINGS = {
    "llm_faithfulness": "faithfulness",
    "llm_relevance": "context_relevance",
    "llm_coverage": "coverage",
    "llm_clarity": "clarity",
    "llm_external_consistency": "external_consistency",
}


def k_of_n(votes: int, ok: int, k: int, agree: int) -> float | None:
    """The repeated judge's verdict: 1.0 when `votes` of the calls that succeeded reach
    `agree`, 0.0 when they cannot even counting the failed calls as votes, else None."""
    if votes >= agree:
        return 1.0
    if votes + (k - ok) < agree:
        return 0.0
    return None


def _llm_fields(llm: Any, question: str, answer: str, contexts: list[str]) -> dict[str, Any]:
    """The LLM judge's columns for one answer (ragrig.judge.llm: never raises). With
    `llm.repeats` k > 1 it is asked k times: the ratings are the means over the calls that
    succeeded, `llm_votes` of them rate faithfulness >= VOTE_AT, `llm_verdict` is the k-of-n
    verdict and `llm_spread` the population standard deviation of their faithfulness."""
    k = getattr(llm, "repeats", 1)
    outs = (
        [llm.judge(question, answer, contexts)]
        if k == 1
        else llm.judge_repeated(question, answer, contexts, k)
    )
    ok = [o for o in outs if o.verdict is not None]
    first = ok[0] if ok else outs[0]
    fields: dict[str, Any] = {
        "llm_status": first.status,
        "llm_cached": all(o.cached for o in outs),
        "llm_error": next((o.error for o in outs if o.error), ""),
        "judge_prompt_tokens": sum(o.prompt_tokens for o in outs),
        "judge_completion_tokens": sum(o.completion_tokens for o in outs),
        "llm_repeats": len(outs),
        "llm_repeats_ok": len(ok),
    }
    if ok:
        for col, attr in _RATINGS.items():
            fields[col] = sum(getattr(o.verdict, attr) for o in ok) / len(ok)
        faith = [o.verdict.faithfulness for o in ok]
        mean = fields["llm_faithfulness"]
        votes = sum(f >= VOTE_AT for f in faith)
        fields.update(
            llm_unsupported=json.dumps(first.verdict.unsupported_statements, ensure_ascii=False),
            llm_votes=votes,
            llm_verdict=k_of_n(votes, len(ok), len(outs), getattr(llm, "agree", 1)),
            llm_spread=(sum((f - mean) ** 2 for f in faith) / len(faith)) ** 0.5,
        )
    return fields


def decision_record(
    threshold: float | None, judgments: pd.DataFrame, veto: Collection[str] | None = None
) -> dict[str, Any]:
    """The judge manifest's `decision`: the threshold used and where it came from, the answers
    judged, judged faithful, contradicted, and per failure mode."""
    judged = judgments["judged_faithful"].notna()
    modes = judgments.loc[judged, "failure_mode"]
    return {
        "threshold": DEFAULT_DECISION_THRESHOLD if threshold is None else threshold,
        "calibrated": threshold is not None,
        "veto": sorted(DEFAULT_VETO if veto is None else veto),
        "judged": int(judged.sum()),
        "judged_faithful": int((judgments["judged_faithful"] == 1.0).sum()),
        "contradicted": int((judgments.loc[judged, "contradictions"] != "[]").sum()),
        "failure_modes": {m: int((modes == m).sum()) for m in FAILURE_MODES},
    }


def judge_all(
    judge: Judge,
    generations: pd.DataFrame,
    queries: dict[str, str],
    progress: bool = True,
    llm: Any | None = None,
    weights: Mapping[str, float] | None = None,
    threshold: float | None = None,
    veto: Collection[str] | None = None,
    citation_checks: bool = False,
    extra: Mapping[str, Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    """One judgment per generation, against the exact passages the generator saw.

    The claim checker gives `claim_support` (supported / extracted claims) and `answer_support`
    (its answer-level score, Verdict.soft_score: a calibrated P(faithful), the mean claim
    probability, or the supported share), the composite's `claims` part; the LLM judge (`llm`, ragrig.judge.llm, optional)
    its scores with `llm_status`; `faithfulness` is the composite of the available parts
    (ragrig.judge.composite) with the weights used in `faithfulness_parts`, None unless the
    status is scored. Generation errors and blank answers are 'skipped' (no LLM call); a claim
    checker failure is 'error' (any exception, named in `error`) or 'invalid' (a verdict
    breaking the partition rule); all are counted by the report. `extra`: more columns per
    qid (`consistency_fields`, `external_fields`), set on that answer's row.

    The decision (`decide`, at `threshold`: judge.decision_threshold, else
    DEFAULT_DECISION_THRESHOLD): `judged_faithful` 1/0 per scored answer on its `answer_support`,
    0 whenever a hard check of a kind in `veto` (judge.veto, else DEFAULT_VETO) contradicts a
    claim; every finding in `contradictions` (JSON), with the `failure_mode` of an unfaithful
    answer."""
    from ragrig.core.progress import track
    from ragrig.judge.composite import composite

    weights = dict(DEFAULT_WEIGHTS if weights is None else weights)
    model = getattr(llm, "model_name", "") if llm is not None else ""
    rows = []
    # A judge that scores in batches (the verifier) reads every answer's pairs in one run; its
    # time is shared out evenly over the answers' latency and CPU time.
    shared_s = shared_cpu = 0.0
    prefetch = getattr(judge, "prefetch", None)
    if prefetch is not None:
        items = [
            (queries[g.qid], g.answer, json.loads(g.contexts))
            for g in generations.itertuples(index=False)
            if g.status not in GENERATION_FAILED
        ]
        if citation_checks:  # each cited passage against its sentence, in the same run
            items += [pair for item in items for pair in pair_items(*item)]
        t0, c0 = time.perf_counter(), time.process_time()
        # a failure here is not lost: each answer then calls the model alone and records it
        with contextlib.suppress(Exception):
            prefetch(items)
        if items:
            shared_s = (time.perf_counter() - t0) / len(items)
            shared_cpu = (time.process_time() - c0) / len(items)
    answers = generations.itertuples(index=False)
    for g in track(answers, "judge", "answers", len(generations)) if progress else answers:
        if g.status in GENERATION_FAILED:
            rows.append(
                _Row(
                    g.qid,
                    "skipped",
                    error=f"generation {g.status}",
                    llm_status="skipped" if llm is not None else "disabled",
                    judge_model=model,
                )
            )
            continue
        contexts = json.loads(g.contexts)
        question = queries[g.qid]
        t0, c0 = time.perf_counter(), time.process_time()
        fields = _claim_fields(judge, question, g.answer, contexts)
        if citation_checks and fields["status"] not in ("error", "invalid"):
            fields.update(check_citations(judge, question, g.answer, contexts))
        if llm is None:
            pass
        elif not str(g.answer).strip():
            fields["llm_status"] = "skipped"
        else:
            fields.update(_llm_fields(llm, question, g.answer, contexts))
        hard = fields.pop("_contradictions", [])
        fields["contradictions"] = json.dumps(
            [{"claim": c, "kind": k, "detail": d} for c, k, d in hard], ensure_ascii=False
        )
        if fields["status"] == "scored":
            decision, mode = decide(
                fields.get("answer_support"),
                fields["n_claims"],
                fields["n_supported"],
                hard,
                DEFAULT_DECISION_THRESHOLD if threshold is None else threshold,
                DEFAULT_VETO if veto is None else veto,
            )
            fields.update(judged_faithful=decision, failure_mode=mode)
            value, used = composite(
                {
                    "claims": fields.get("answer_support"),
                    "llm": fields.get("llm_faithfulness"),
                    "entity": fields.get("entity_overlap"),
                },
                weights,
            )
            fields.update(faithfulness=value, faithfulness_parts=json.dumps(used, sort_keys=True))
        rows.append(
            _Row(
                g.qid,
                latency_ms=(time.perf_counter() - t0 + shared_s) * 1e3,
                judge_cpu_s=time.process_time() - c0 + shared_cpu,
                judge_model=model,
                **fields,
            )
        )
    if extra:
        for r in rows:
            for k, v in extra.get(r.qid, {}).items():
                setattr(r, k, v)
    df = pd.DataFrame([{c: getattr(r, c) for c in COLUMNS} for r in rows], columns=COLUMNS)
    for col in FLOAT_COLUMNS:
        df[col] = df[col].astype("float64")
    for col in (
        "n_claims",
        "n_supported",
        "judge_prompt_tokens",
        "judge_completion_tokens",
        "citation_pairs",
        "citation_pairs_supported",
        "claims_needing_support",
        "claims_cited_supported",
        "llm_repeats",
        "llm_repeats_ok",
        "llm_votes",
        "consistency_clusters",
        "consistency_samples",
        "consistency_failed",
        "external_claims",
        "external_supported",
        "external_contradicted",
    ):
        df[col] = df[col].astype("int64")
    for col in ("llm_cached", "consistency_identical"):
        df[col] = df[col].astype(bool)
    return df


def consistency_fields(
    generations: pd.DataFrame, readings: Any, threshold: float
) -> dict[str, dict[str, Any]]:
    """Per answered query with samples: its `self_consistency` columns
    (ragrig.judge.consistency), the verifier's time shared out evenly over those answers."""
    from ragrig.judge.consistency import consistency_all

    items, qids = [], []
    for g in generations.itertuples(index=False):
        drawn = json.loads(g.samples) if isinstance(g.samples, str) else []
        if g.status not in GENERATION_FAILED and drawn:
            items.append((str(g.answer), drawn))
            qids.append(g.qid)
    t0 = time.perf_counter()
    done = consistency_all(items, readings, threshold)
    each_ms = (time.perf_counter() - t0) * 1e3 / len(items) if items else 0.0
    return {
        q: {
            "self_consistency": c.agreement,
            "consistency_clusters": c.clusters,
            "consistency_entropy": c.entropy,
            "consistency_samples": c.samples,
            "consistency_failed": c.failed,
            "consistency_identical": c.identical,
            "consistency_ms": each_ms,
        }
        for q, c in zip(qids, done, strict=True)
    }


def external_fields(
    generations: pd.DataFrame, queries: Mapping[str, str], check: Any, min_content_words: int
) -> dict[str, dict[str, Any]]:
    """Per answered query: its `external_consistency` columns (ragrig.judge.external), claims
    split as the overlap judge splits them, the time shared out evenly over the answers."""
    from ragrig.judge.overlap import OverlapJudge

    splitter = OverlapJudge(min_content_words=min_content_words)
    sets, qids = [], []
    for g in generations.itertuples(index=False):
        if g.status not in GENERATION_FAILED and str(g.answer).strip():
            sets.append(splitter.claim_set(queries[g.qid], str(g.answer)))
            qids.append(g.qid)
    t0 = time.perf_counter()
    done = check.check_all(sets)
    each_ms = (time.perf_counter() - t0) * 1e3 / len(sets) if sets else 0.0
    return {
        q: {
            "external_consistency": e.value,
            "external_claims": len(e.claims),
            "external_supported": e.supported,
            "external_contradicted": e.contradicted,
            "external_checks": json.dumps(e.record(), ensure_ascii=False),
            "external_ms": each_ms,
        }
        for q, e in zip(qids, done, strict=True)
    }


def consistency_record(cfg: Any, judgments: pd.DataFrame) -> dict[str, Any] | None:
    """The judge manifest's `consistency`: answers measured, those whose samples all failed,
    those whose samples all repeat the answer, and the verifier's time per answer."""
    if cfg is None:
        return None
    with_samples = judgments[
        (judgments["consistency_samples"] + judgments["consistency_failed"]) > 0
    ]
    measured = with_samples["self_consistency"].notna()
    return {
        "threshold": cfg.threshold,
        "answers_with_samples": len(with_samples),
        "measured": int(measured.sum()),
        "all_samples_failed": int((~measured).sum()),
        "identical_samples": int(with_samples["consistency_identical"].sum()),
        "ms_per_answer": float(with_samples["consistency_ms"].mean()) if len(with_samples) else 0.0,
    }


def external_record(cfg: Any, judgments: pd.DataFrame, note: str | None) -> dict[str, Any] | None:
    """The judge manifest's `external`: what it read, claims checked, supported, contradicted,
    and the time per answer."""
    if cfg is None:
        return None
    read = judgments[judgments["external_claims"] > 0]
    return {
        "reads": note,
        "answers": len(read),
        "claims": int(read["external_claims"].sum()),
        "supported": int(read["external_supported"].sum()),
        "contradicted": int(read["external_contradicted"].sum()),
        "ms_per_answer": float(read["external_ms"].mean()) if len(read) else 0.0,
    }
