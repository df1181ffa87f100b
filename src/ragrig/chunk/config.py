"""Config schema of the chunk stage (validated from its params.yaml section)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ragrig.config import Section


class ChunkDocument(Section):
    method: Literal["document"] = "document"


class ChunkRecursive(Section):
    method: Literal["recursive"] = "recursive"
    # Not `size`: DVC's run-cache key drops parameters named `size`/`nfiles` (treeverse/dvc#10296).
    max_tokens: int = Field(256, gt=0, description="window length in tokens")
    overlap: int = Field(32, ge=0)
    tokenizer: str = Field(
        "packaged:all-MiniLM-L6-v2", description="tokenizer used to count tokens"
    )
    separators: list[str] = Field(default_factory=lambda: ["\n\n", "\n", ". ", " "])

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkRecursive:
        if self.overlap >= self.max_tokens:
            raise ValueError(
                f"overlap ({self.overlap}) must be smaller than max_tokens ({self.max_tokens})"
            )
        return self


ChunkConfig = Annotated[ChunkDocument | ChunkRecursive, Field(discriminator="method")]
