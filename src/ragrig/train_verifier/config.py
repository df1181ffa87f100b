"""Config schema of the train_verifier stage (validated from its params.yaml section)."""

from __future__ import annotations

from pydantic import Field

from ragrig.core.config import Section, Seed


class TrainVerifierConfig(Section):
    enabled: bool = Field(
        False,
        description="train the verifier (judge.method=verifier needs it); off: the stage writes "
        "only a manifest saying so, in seconds",
    )
    base_model: str = Field(
        "packaged:all-MiniLM-L6-v2",
        description="weights the cross-encoder starts from (packaged:<name>, a folder or hub id)",
    )
    epochs: float = Field(1.0, gt=0, description="passes over the training pairs")
    learning_rate: float = Field(5e-5, gt=0)
    batch_size: int = Field(16, gt=0)
    max_length: int = Field(128, ge=16, le=512, description="tokens of claim + evidence")
    warmup_ratio: float = Field(0.1, ge=0, lt=1)
    negatives_per_claim: int = Field(
        3, ge=0, description="non-rationale windows of the same abstract, labelled NOT_ADDRESSED"
    )
    other_doc_negatives: int = Field(
        1, ge=0, description="windows of another claim's abstract, labelled NOT_ADDRESSED"
    )
    perturbations: bool = Field(
        True, description="negated / changed-number / swapped-entity / ... claims as negatives"
    )
    max_pairs: int | None = Field(
        6000, gt=0, description="cap on training pairs (seeded sample, stratified by kind)"
    )
    balance_labels: bool = Field(
        False,
        description="cap max_pairs with the labels taking turns (and each label's kinds), "
        "instead of a plain sample (~47% NOT_ADDRESSED on SciFact)",
    )
    max_claims: int | None = Field(
        None, gt=0, description="use only the first N training claims (None: all)"
    )
    seed: Seed = 13
