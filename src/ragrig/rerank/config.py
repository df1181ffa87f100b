"""Config schema of the rerank stage (validated from its params.yaml section)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ragrig.core.config import Section

# Where dvc.yaml puts the train_rerank stage's output (relative to the project root).
TRAINED_OUTPUT = "data/train_rerank"


class RerankIdentity(Section):
    method: Literal["identity"] = "identity"


class RerankCrossEncoder(Section):
    method: Literal["cross_encoder"] = "cross_encoder"
    model: str = Field(description="a local model folder or a hub id")
    depth: int = Field(20, gt=0, description="top documents rescored; the rest keep their order")
    batch_size: int = Field(16, gt=0)
    max_length: int = Field(256, gt=0)


class RerankTrained(Section):
    """The cross-encoder the train_rerank stage fine-tunes on the dataset's train split."""

    method: Literal["trained"] = "trained"
    model: str = Field(
        TRAINED_OUTPUT, description="a train_rerank output folder (manifest.json + model/)"
    )
    depth: int = Field(20, gt=0, description="top documents rescored; the rest keep their order")
    batch_size: int = Field(16, gt=0)
    max_length: int | None = Field(
        None, gt=0, description="tokens of query + passage; None: the length it was trained with"
    )


RerankConfig = Annotated[
    RerankIdentity | RerankCrossEncoder | RerankTrained, Field(discriminator="method")
]
