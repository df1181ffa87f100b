"""The judge's faithfulness composite and LLM judge in the report: per-query measures and the
metrics.json lines that say which weights were used and how the LLM judge's calls went."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pandas as pd

from ragrig.core.errors import DataValidationError
from ragrig.core.schemas import LLM_JUDGE_STATUSES

PARTS = ("claims", "llm", "entity")  # as in ragrig.judge.composite
LLM_MEASURES = {
    "llm_faithfulness": "judge/llm_faithfulness",
    "llm_relevance": "judge/llm_relevance",
    "llm_coverage": "judge/llm_coverage",
    "llm_clarity": "judge/llm_clarity",
    "llm_external_consistency": "judge/llm_external_consistency",
}


def has_composite(j: pd.DataFrame) -> bool:
    """Judgments written with the composite's columns (older ones have only faithfulness)."""
    return "faithfulness_parts" in j.columns and "llm_status" in j.columns


def judge_measures(j: pd.DataFrame) -> list[pd.DataFrame]:
    """Long-table parts: judge/claim_support and judge/answer_support of scored answers,
    judge/llm_* of answers whose LLM call is ok (others have no value: never a 0)."""
    if not has_composite(j):
        return []
    parts = []
    for col in ("claim_support", "answer_support"):
        if col not in j.columns:  # judgments written before answer_support existed
            continue
        scored = j[(j["status"] == "scored") & j[col].notna()]
        parts.append(
            pd.DataFrame(
                {
                    "qid": scored["qid"],
                    "measure": f"judge/{col}",
                    "value": scored[col].astype(float),
                }
            )
        )
    ok = j[j["llm_status"] == "ok"]
    for col, name in LLM_MEASURES.items():
        sel = ok[ok[col].notna()]
        parts.append(pd.DataFrame({"qid": sel["qid"], "measure": name, "value": sel[col]}))
    if "llm_repeats" in j.columns:  # the repeated judge: its k-of-n verdict and spread
        rep = ok[ok["llm_repeats"] > 1]
        for col in ("llm_verdict", "llm_spread"):
            sel = rep[rep[col].notna()]
            parts.append(
                pd.DataFrame({"qid": sel["qid"], "measure": f"judge/{col}", "value": sel[col]})
            )
    return [p for p in parts if len(p)]


def repeated_judge_summary(j: pd.DataFrame) -> dict[str, Any] | None:
    """With judge.llm.repeats > 1: calls per answer, answers whose calls split (some vote
    faithful, some not), undecided k-of-n verdicts, and the judge's own variance (the mean over
    answers of the variance of its faithfulness ratings), apart from the system's."""
    if "llm_repeats" not in j.columns:
        return None
    rep = j[(j["llm_status"] == "ok") & (j["llm_repeats"] > 1)]
    if rep.empty:
        return None
    split = (rep["llm_votes"] > 0) & (rep["llm_votes"] < rep["llm_repeats_ok"])
    variance = float((rep["llm_spread"].astype(float) ** 2).mean())
    return {
        "repeats": int(rep["llm_repeats"].max()),
        "answers": int(len(rep)),
        "calls_failed": int((rep["llm_repeats"] - rep["llm_repeats_ok"]).sum()),
        "split": int(split.sum()),
        "undecided": int(rep["llm_verdict"].isna().sum()),
        "judged_faithful": float(rep["llm_verdict"].dropna().mean())
        if rep["llm_verdict"].notna().any()
        else None,
        "judge_variance": variance,
        "judge_sd": variance**0.5,
    }


def composite_summary(j: pd.DataFrame, configured: Mapping[str, float] | None) -> dict[str, Any]:
    """Configured weights, how many scored answers used which parts (e.g. "claims+entity"), how
    many had their weights renormalised (a part with a positive weight missing), and the LLM
    judge's status counts; {} for judgments without the composite's columns."""
    if not has_composite(j):
        return {}
    scored = j[j["status"] == "scored"]
    expected = [p for p in PARTS if configured is None or configured.get(p, 0) > 0]
    used: Counter[str] = Counter()
    renormalised = 0
    for text in scored["faithfulness_parts"]:
        keys = [p for p in PARTS if p in json.loads(text)]
        used["+".join(keys) or "none"] += 1
        renormalised += any(p not in keys for p in expected)
    status = {s: int((j["llm_status"] == s).sum()) for s in LLM_JUDGE_STATUSES}
    unknown = sorted(set(j["llm_status"]) - set(LLM_JUDGE_STATUSES))
    if unknown:
        raise DataValidationError(
            f"judgments: unknown llm_status {unknown}; known {LLM_JUDGE_STATUSES}"
        )
    models = sorted({m for m in j["judge_model"] if m})
    return {
        "weights": dict(configured) if configured is not None else None,
        "weights_used": dict(sorted(used.items())),
        "renormalised": int(renormalised),
        "llm_status": status,
        "llm_cached": int(j["llm_cached"].sum()),
        "llm_model": models[0] if len(models) == 1 else (models or None),
        "prompt_tokens": int(j["judge_prompt_tokens"].sum()),
        "completion_tokens": int(j["judge_completion_tokens"].sum()),
        "cpu_s": float(j["judge_cpu_s"].sum()),
        "llm_repeated": repeated_judge_summary(j),
    }
