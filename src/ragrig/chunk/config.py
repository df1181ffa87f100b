"""Config schema of the chunk stage (validated from its params.yaml section)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ragrig.core.config import NonEmptyStr, Section

PACKAGED_MINILM = "packaged:all-MiniLM-L6-v2"


class ChunkBase(Section):
    # documents (a seeded sample, in doc_id order) whose chunks the coherence metric embeds
    # sentence by sentence (data/chunk/ingestion.json); 0 skips it
    coherence_documents: int = Field(50, ge=0)


class ChunkDocument(ChunkBase):
    method: Literal["document"] = "document"


class _Windowed(ChunkBase):
    # Not `size`: DVC's run-cache key drops parameters named `size`/`nfiles` (treeverse/dvc#10296).
    max_tokens: int = Field(256, gt=0, description="window length in tokens")
    overlap: int = Field(32, ge=0)
    tokenizer: str = Field(PACKAGED_MINILM, description="tokenizer used to count tokens")

    @model_validator(mode="after")
    def _overlap_below_size(self) -> _Windowed:
        if self.overlap >= self.max_tokens:
            raise ValueError(
                f"overlap ({self.overlap}) must be smaller than max_tokens ({self.max_tokens})"
            )
        return self


class ChunkRecursive(_Windowed):
    method: Literal["recursive"] = "recursive"
    # strongest first; [] cuts at plain token boundaries (an empty separator is in every gap)
    separators: list[NonEmptyStr] = Field(default_factory=lambda: ["\n\n", "\n", ". ", " "])


class ChunkHybrid(_Windowed):
    """docling's HybridChunker over parse=docling's documents (ragrig.chunk.hybrid)."""

    method: Literal["hybrid"] = "hybrid"
    overlap: int = Field(0, ge=0)
    merge_peers: bool = True


class ChunkSemantic(ChunkBase):
    """Cut between sentences whose embeddings are least similar (ragrig.chunk.semantic)."""

    method: Literal["semantic"] = "semantic"
    model: str = Field(PACKAGED_MINILM, description="sentence-transformers model of sentences")
    tokenizer: str = Field(PACKAGED_MINILM, description="tokenizer used to count tokens")
    # cut where the adjacent-sentence cosine is below `threshold`, or (threshold null) below the
    # document's `percentile`-th percentile of its adjacent-sentence cosines
    threshold: float | None = Field(None, ge=-1.0, le=1.0)
    percentile: float = Field(25.0, ge=0.0, le=100.0)
    min_tokens: int = Field(32, ge=0)
    max_tokens: int = Field(256, gt=0)
    language: str = "en"
    batch_size: int = Field(64, gt=0)

    @model_validator(mode="after")
    def _min_below_max(self) -> ChunkSemantic:
        if self.min_tokens > self.max_tokens:
            raise ValueError(
                f"min_tokens ({self.min_tokens}) must not exceed max_tokens ({self.max_tokens})"
            )
        return self


ChunkConfig = Annotated[
    ChunkDocument | ChunkRecursive | ChunkHybrid | ChunkSemantic, Field(discriminator="method")
]
