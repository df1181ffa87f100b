"""Config schema of the rerank stage (validated from its params.yaml section)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ragrig.config import Section


class RerankIdentity(Section):
    method: Literal["identity"] = "identity"


class RerankCrossEncoder(Section):
    method: Literal["cross_encoder"] = "cross_encoder"
    model: str = Field(description="a local model folder or a hub id")
    depth: int = Field(20, gt=0, description="top documents rescored; the rest keep their order")
    batch_size: int = Field(16, gt=0)
    max_length: int = Field(256, gt=0)


RerankConfig = Annotated[RerankIdentity | RerankCrossEncoder, Field(discriminator="method")]
