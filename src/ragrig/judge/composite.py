"""The faithfulness composite: a weighted mean of the parts an answer has.

Parts: `claims` (answer_support: the claim checker's answer-level score, Verdict.soft_score), `llm` (the
LLM judge's faithfulness, only when its call is ok) and `entity` (share of the answer's names
and numbers found in the context, None when it has none). A missing part is left out and the
weights of the others are renormalised to sum to 1: it never counts as 0 and never as NaN.
"""

from __future__ import annotations

from collections.abc import Mapping

PARTS = ("claims", "llm", "entity")


def composite(
    parts: Mapping[str, float | None], weights: Mapping[str, float]
) -> tuple[float | None, dict[str, float]]:
    """(weighted mean over the available parts, the weights used, renormalised to sum 1).

    A part is available when its value is not None and its configured weight is > 0;
    (None, {}) when no part is. Unknown part names are a ValueError."""
    unknown = sorted(set(parts) - set(PARTS)) + sorted(set(weights) - set(PARTS))
    if unknown:
        raise ValueError(f"unknown faithfulness part(s) {unknown}; known: {list(PARTS)}")
    avail = {k: float(v) for k, v in parts.items() if v is not None and weights.get(k, 0.0) > 0}
    total = sum(weights[k] for k in avail)
    if not avail or total <= 0:
        return None, {}
    used = {k: weights[k] / total for k in PARTS if k in avail}
    return sum(used[k] * avail[k] for k in used), used


def renormalised(used: Mapping[str, float], weights: Mapping[str, float]) -> bool:
    """True when a part with a positive configured weight was missing from `used`."""
    return any(w > 0 and k not in used for k, w in weights.items())
