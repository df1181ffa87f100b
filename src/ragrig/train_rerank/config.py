"""Config schema of the train_rerank stage (validated from its params.yaml section)."""

from __future__ import annotations

from pydantic import Field

from ragrig.core.config import Section, Seed
from ragrig.training.split import MiningConfig


class TrainRerankConfig(Section):
    enabled: bool = Field(
        False,
        description="train the reranker (rerank=trained needs it); off: the stage writes only a "
        "manifest saying so, in seconds",
    )
    base_model: str = Field(
        "packaged:all-MiniLM-L6-v2",
        description="weights the cross-encoder starts from (packaged:<name>, a folder or hub id)",
    )
    split: str = Field("train", description="qrels/<split>.tsv the pairs come from")
    epochs: float = Field(1.0, gt=0, description="passes over the training pairs")
    learning_rate: float = Field(5e-5, gt=0)
    batch_size: int = Field(16, gt=0)
    max_length: int = Field(256, ge=16, le=512, description="tokens of query + passage")
    warmup_ratio: float = Field(0.1, ge=0, lt=1)
    negatives_per_query: int = Field(
        4, ge=1, description="BM25 hits that are not judged relevant, labelled 0, per query"
    )
    mining: MiningConfig = MiningConfig()
    max_pairs: int | None = Field(
        None, gt=0, description="cap on training pairs (seeded sample; None: all)"
    )
    seed: Seed = 13
