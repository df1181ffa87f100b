"""Config schema of the index stage (validated from its params.yaml section)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ragrig.core.config import Section, Seed


class DenseFlat(Section):
    method: Literal["flat"] = "flat"


class DenseHnsw(Section):
    method: Literal["hnsw"] = "hnsw"
    m: int = Field(32, gt=1)
    ef_construction: int = Field(200, gt=0)


class DenseIvf(Section):
    method: Literal["ivf"] = "ivf"
    nlist: int = Field(64, gt=0)
    train_seed: Seed = 1234


class DenseIvfPq(Section):
    """IVF with product-quantised codes: `pq_m` bytes per vector at 8 bits (plus the ids), for
    corpora of millions; optionally re-scored from scalar-quantised (sq8) or full vectors."""

    method: Literal["ivf_pq"] = "ivf_pq"
    nlist: int = Field(1024, gt=0)
    pq_m: int = Field(48, gt=0, description="sub-quantisers; must divide the dimension")
    pq_bits: int = Field(8, ge=4, le=12)
    refine: Literal["none", "sq8", "flat"] = Field(
        "none", description="re-score the IVF-PQ candidates with sq8 or exact vectors"
    )
    k_factor: int = Field(4, ge=1, description="candidates re-scored = k_factor x k (refine)")
    train_sample: int = Field(100_000, gt=0, description="vectors (seeded sample) to train on")
    train_seed: Seed = 1234


class DenseHnswSq(Section):
    """HNSW over scalar-quantised vectors (8-bit: a quarter of float32's bytes, or fp16)."""

    method: Literal["hnsw_sq"] = "hnsw_sq"
    m: int = Field(32, gt=1)
    ef_construction: int = Field(200, gt=0)
    quantizer: Literal["sq8", "sq4", "fp16"] = "sq8"
    train_sample: int = Field(100_000, gt=0, description="vectors (seeded sample) to train on")
    train_seed: Seed = 1234
    build_threads: int = Field(
        1, gt=0, description="1 keeps the graph reproducible; more builds faster, not identically"
    )


class _Bm25(Section):
    k1: float = Field(0.9, gt=0)
    b: float = Field(0.4, ge=0, le=1)
    stemmer: Literal["english", "none"] = "english"
    stopwords: Literal["english", "none"] = "english"


class SparseBm25s(_Bm25):
    method: Literal["bm25s"] = "bm25s"


class SparseRankBm25(_Bm25):
    method: Literal["rank_bm25"] = "rank_bm25"
    epsilon: float = Field(
        0.25, ge=0, description="a negative IDF is replaced by this share of the mean IDF"
    )


DenseIndexConfig = Annotated[
    DenseFlat | DenseHnsw | DenseIvf | DenseIvfPq | DenseHnswSq, Field(discriminator="method")
]
SparseIndexConfig = Annotated[SparseBm25s | SparseRankBm25, Field(discriminator="method")]


class IndexConfig(Section):
    dense: DenseIndexConfig
    sparse: SparseIndexConfig
