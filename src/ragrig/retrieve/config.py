"""Config schema of the retrieve stage (validated from its params.yaml section)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ragrig.core.config import Section


class _RetrieveBase(Section):
    depth: int = Field(100, gt=0, description="documents kept per query (after chunk-to-doc max)")
    chunk_depth: int = Field(200, gt=0, description="chunks fetched per lane before aggregation")
    ann_recall_k: int = Field(10, gt=0, description="k of ANN recall against exact search")


class _DenseSearch(Section):
    ef_search: int = Field(128, gt=0, description="HNSW efSearch")
    nprobe: int = Field(8, gt=0, description="IVF nprobe")


class RetrieveDense(_RetrieveBase, _DenseSearch):
    method: Literal["dense"] = "dense"


class RetrieveBm25(_RetrieveBase):
    method: Literal["bm25"] = "bm25"


class RetrieveHybridRrf(_RetrieveBase, _DenseSearch):
    method: Literal["hybrid_rrf"] = "hybrid_rrf"
    rrf_k: int = Field(60, gt=0)


class RetrieveHybridConvex(_RetrieveBase, _DenseSearch):
    method: Literal["hybrid_convex"] = "hybrid_convex"
    alpha: float = Field(0.5, ge=0, le=1, description="weight of the dense lane")
    normalization: Literal["minmax", "zscore"] = "minmax"


RetrieveConfig = Annotated[
    RetrieveDense | RetrieveBm25 | RetrieveHybridRrf | RetrieveHybridConvex,
    Field(discriminator="method"),
]
