"""Config schema of the index stage (validated from its params.yaml section)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ragrig.config import Section


class DenseFlat(Section):
    method: Literal["flat"] = "flat"


class DenseHnsw(Section):
    method: Literal["hnsw"] = "hnsw"
    m: int = Field(32, gt=1)
    ef_construction: int = Field(200, gt=0)


class DenseIvf(Section):
    method: Literal["ivf"] = "ivf"
    nlist: int = Field(64, gt=0)
    train_seed: int = 1234


class _Bm25(Section):
    k1: float = Field(0.9, gt=0)
    b: float = Field(0.4, ge=0, le=1)
    stemmer: Literal["english", "none"] = "english"
    stopwords: Literal["english", "none"] = "english"


class SparseBm25s(_Bm25):
    method: Literal["bm25s"] = "bm25s"


class SparseRankBm25(_Bm25):
    method: Literal["rank_bm25"] = "rank_bm25"
    epsilon: float = 0.25


DenseIndexConfig = Annotated[DenseFlat | DenseHnsw | DenseIvf, Field(discriminator="method")]
SparseIndexConfig = Annotated[SparseBm25s | SparseRankBm25, Field(discriminator="method")]


class IndexConfig(Section):
    dense: DenseIndexConfig
    sparse: SparseIndexConfig
