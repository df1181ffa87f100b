"""Config schema of the train_embed stage (validated from its params.yaml section)."""

from __future__ import annotations

from pydantic import Field

from ragrig.core.config import Section, Seed
from ragrig.training.split import MiningConfig


class TrainEmbedConfig(Section):
    enabled: bool = Field(
        False,
        description="train the bi-encoder (embed=trained needs it); off: the stage writes only a "
        "manifest saying so, in seconds",
    )
    base_model: str = Field(
        "packaged:all-MiniLM-L6-v2",
        description="the sentence-transformer it starts from (packaged:<name>, a folder or hub id)",
    )
    split: str = Field("train", description="qrels/<split>.tsv the examples come from")
    epochs: float = Field(1.0, gt=0, description="passes over the training examples")
    learning_rate: float = Field(3e-5, gt=0)
    batch_size: int = Field(
        32,
        ge=2,
        description="examples per batch: each query's in-batch negatives number 2 x (this - 1)",
    )
    max_seq_length: int = Field(256, ge=16, le=512, description="tokens kept of each text")
    warmup_ratio: float = Field(0.1, ge=0, lt=1)
    hard_negatives_per_query: int = Field(
        1, ge=0, description="BM25 hits not judged relevant, per (query, positive) example"
    )
    scale: float = Field(20.0, gt=0, description="MultipleNegativesRankingLoss cosine scale")
    mining: MiningConfig = MiningConfig()
    max_pairs: int | None = Field(
        None, gt=0, description="cap on (query, positive) examples (seeded sample; None: all)"
    )
    seed: Seed = 13
