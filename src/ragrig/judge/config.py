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
        2, gt=0, description="fewer content words: not a claim of its own (a short answer)"
    )
    entity_check: bool = Field(
        True,
        description="a claim whose names or numbers are absent from the context is unsupported",
    )
    negation_check: bool = Field(
        True,
        description="a negated claim needs a supporting sentence that is negated too",
    )
    window: int = Field(
        1, ge=1, le=5, description="evidence: runs of up to this many adjacent context sentences"
    )
    decision_threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="answer level: an answer whose score is >= this is judged faithful; chosen "
        "by `ragrig calibrate` on MTRAG's calibration half (None: not calibrated)",
    )


class JudgeVerifier(Section):
    method: Literal["verifier"] = "verifier"
    model: str | None = Field(
        None,
        description="trained verifier: a train_verifier output folder or a model folder (None: "
        "the train_verifier stage's output, data/train_verifier)",
    )
    support_threshold: float = Field(
        0.5, gt=0, le=1, description="a claim is supported when max P(support) >= this"
    )
    windows_per_claim: int = Field(
        2, ge=1, le=20, description="evidence windows read per claim (lexical pre-selection)"
    )
    window: int = Field(
        2, ge=1, le=5, description="evidence windows: runs of up to this many adjacent sentences"
    )
    entity_check: bool = Field(
        True,
        description="a claim whose names or numbers are absent from the context is unsupported",
    )
    min_content_words: int = Field(
        2, gt=0, description="fewer content words: not a claim of its own (a short answer)"
    )
    max_length: int = Field(128, ge=16, le=512, description="tokens of claim + evidence")
    batch_size: int = Field(32, gt=0)
    threads: int = Field(2, gt=0, description="torch threads of the verifier")
    decision_threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="answer level: an answer whose mean claim P(support) is >= this is judged "
        "faithful; chosen by `ragrig calibrate` on MTRAG's calibration half",
    )


JudgeConfig = Annotated[JudgeOverlap | JudgeVerifier, Field(discriminator="method")]
