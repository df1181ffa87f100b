"""Config schema of the judge stage (validated from its params.yaml section)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ragrig.config import Section


class JudgeOverlap(Section):
    method: Literal["overlap"] = "overlap"
    support_threshold: float = Field(
        0.6,
        gt=0,
        le=1,
        description="share of a claim's content words found in one context sentence",
    )
    min_content_words: int = Field(
        2, gt=0, description="fewer content words: not a checkable claim"
    )
    decision_threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="answer level: an answer whose score is >= this is judged faithful; chosen "
        "by `ragrig calibrate` on MTRAG's calibration half (None: not calibrated)",
    )


JudgeConfig = Annotated[JudgeOverlap, Field(discriminator="method")]
