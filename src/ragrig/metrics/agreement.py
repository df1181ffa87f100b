"""When the faithfulness techniques disagree (pure).

The composite reads up to three techniques per answer: sentence-by-sentence verification (the
claim checker's answer-level score), the LLM judge's rating and entity overlap. The rule they
follow: when the techniques contradict each other, something is wrong upstream, most often in
retrieval (a context that supports some of the answer's words but not its claims); when all of
them are low, the answer is to be discarded. One answer's reading is

* `disagree`: the highest and lowest of its parts are at least `spread` apart;
* `all_low`: every part is below `low` (and they do not disagree);
* `agree`: neither;
* None: fewer than two parts (nothing to compare), counted apart.
"""

from __future__ import annotations

from collections.abc import Mapping

AGREE, DISAGREE, ALL_LOW = "agree", "disagree", "all_low"
READINGS = (AGREE, DISAGREE, ALL_LOW)


def technique_agreement(
    parts: Mapping[str, float | None], spread: float = 0.5, low: float = 0.5
) -> str | None:
    """`disagree`, `all_low`, `agree`, or None with fewer than two parts (a missing part is
    None and left out, never read as 0)."""
    if not 0 < spread <= 1 or not 0 < low <= 1:
        raise ValueError(f"agreement needs 0 < spread <= 1 and 0 < low <= 1, got {spread}, {low}")
    values = [float(v) for v in parts.values() if v is not None]
    if len(values) < 2:
        return None
    if max(values) - min(values) >= spread:
        return DISAGREE
    if max(values) < low:
        return ALL_LOW
    return AGREE
