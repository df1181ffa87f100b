"""Config schema of the retrieve stage (validated from its params.yaml section)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ragrig.core.config import NonEmptyStr, Section


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


class TunedFusion(Section):
    """A fusion setting chosen on one corpus (ragrig.retrieve.tuning): used on that corpus only."""

    corpus_sha256: str = Field(
        pattern=r"^[0-9a-f]{64}$",
        description="content fingerprint of the corpus it was tuned on (the retrieve stage "
        "prints a corpus's: ragrig.retrieve.tuning.corpus_fingerprint)",
    )
    value: float = Field(gt=0, description="the tuned rrf_k or alpha")
    source: NonEmptyStr = Field(description="how it was chosen, with the figures")


_TUNED = Field(
    default_factory=list,
    description="settings tuned on named corpora; one is used only on the corpus whose "
    "fingerprint it records, and only while the setting itself is null",
)


class RetrieveHybridRrf(_RetrieveBase, _DenseSearch):
    method: Literal["hybrid_rrf"] = "hybrid_rrf"
    rrf_k: int | None = Field(
        None, gt=0, description="null: the value tuned on this corpus, else 60 (untuned)"
    )
    tuned: list[TunedFusion] = _TUNED

    @model_validator(mode="after")
    def _integral(self) -> RetrieveHybridRrf:
        bad = [t.value for t in self.tuned if t.value != int(t.value)]
        if bad:
            raise ValueError(f"retrieve.tuned: rrf_k values must be whole numbers, got {bad}")
        return self


class RetrieveHybridConvex(_RetrieveBase, _DenseSearch):
    method: Literal["hybrid_convex"] = "hybrid_convex"
    alpha: float | None = Field(
        None,
        ge=0,
        le=1,
        description="weight of the dense lane; null: the value tuned on this corpus, else 0.5",
    )
    normalization: Literal["minmax", "zscore"] = "minmax"
    tuned: list[TunedFusion] = _TUNED

    @model_validator(mode="after")
    def _weights(self) -> RetrieveHybridConvex:
        bad = [t.value for t in self.tuned if not 0 <= t.value <= 1]
        if bad:
            raise ValueError(f"retrieve.tuned: alpha values must be in [0, 1], got {bad}")
        return self


class RetrieveRunFile(Section):
    """The team's own rankings, read from `system.run_file` (ragrig.retrieve.run_file)."""

    method: Literal["run_file"] = "run_file"
    format: Literal["auto", "trec", "jsonl", "parquet"] = Field(
        "auto",
        description="auto: by the file's suffix (.run/.trec/.txt TREC, .jsonl, .parquet)",
    )
    depth: int = Field(100, gt=0, description="documents kept per query (by score)")


RetrieveConfig = Annotated[
    RetrieveDense | RetrieveBm25 | RetrieveHybridRrf | RetrieveHybridConvex | RetrieveRunFile,
    Field(discriminator="method"),
]


class Preference(Section):
    """How one relevance preference (locale, recency, version) of a query's filter is applied."""

    mode: Literal["hard", "soft", "none"] = Field(
        "hard",
        description="hard: a predicate before search (FAISS IDSelector, BM25 mask); soft: a "
        "bonus on the min-max normalised final score of a matching document; none: ignored",
    )
    boost: float = Field(0.1, ge=0, description="soft: the bonus (final scores scaled to [0, 1])")
    rule: Literal["query", "gold", "hash"] = Field(
        "query",
        description="a query whose metadata.filter lacks the field: query (no filter on it), "
        "gold (the value of its first gold document, `mismatch` of the queries given another "
        "value by their id's hash: a user asking outside their own locale), hash (a value "
        "drawn by the query id's hash)",
    )
    mismatch: float = Field(0.0, ge=0, le=1, description="rule=gold: share given another value")


class FilterConfig(Section):
    """Metadata filters in retrieval (docs/metrics.md "Filters"). Empty: no filter at all."""

    assign: dict[NonEmptyStr, list[NonEmptyStr]] = Field(
        default_factory=dict,
        description="document field -> values, one drawn by the doc id's hash for each "
        "document whose corpus metadata lacks the field (corpora with no metadata)",
    )
    eligibility: dict[NonEmptyStr, NonEmptyStr | list[NonEmptyStr]] = Field(
        default_factory=dict,
        description="the caller's eligibility (tenant, permissions): a hard invariant, never "
        "relaxed; a retrieved ineligible document is a counted violation",
    )
    enforce_eligibility: bool = Field(
        True, description="false: eligibility is not applied (only its violations counted)"
    )
    preferences: dict[NonEmptyStr, Preference] = Field(default_factory=dict)
    compare: bool = Field(
        True, description="also retrieve each preference hard and soft, for the report's rule"
    )

    @property
    def enabled(self) -> bool:
        return bool(self.eligibility or self.preferences)
