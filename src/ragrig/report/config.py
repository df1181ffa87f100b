"""Config schema of the report stage (validated from its params.yaml section)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from ragrig.config import Section
from ragrig.metrics.names import RESERVED_SLICE_NAMES


class Price(Section):
    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


class MlflowConfig(Section):
    enabled: bool = True
    tracking_uri: str | None = Field(
        None, description="null: $RAGRIG_MLFLOW_URI, else sqlite:///<project>/mlflow.db"
    )
    experiment: str = "ragrig"


class SliceConfig(Section):
    """One slice: a column of the queries table, bucketed by value or by numeric cut points."""

    name: str = Field(min_length=1)
    column: str = Field(min_length=1, description="column of the queries table")
    kind: Literal["categorical", "numeric"] = "categorical"
    bins: list[float] | None = Field(
        None,
        description="numeric: increasing cut points (lower bound included); "
        "null: quantile bins chosen from the data (report.quantile_bins)",
    )
    labels: list[str] | None = Field(
        None, description="numeric with bins: one label per bucket (len(bins) + 1)"
    )

    @model_validator(mode="after")
    def _check(self) -> SliceConfig:
        where = f"slice {self.name!r}"
        if self.kind == "categorical" and (self.bins is not None or self.labels is not None):
            raise ValueError(f"{where}: bins/labels need kind: numeric")
        if self.bins is not None:
            if not self.bins:
                raise ValueError(f"{where}: bins is empty (null chooses quantile bins)")
            if any(b >= c for b, c in zip(self.bins, self.bins[1:], strict=False)):
                raise ValueError(f"{where}: bins {self.bins} are not strictly increasing")
        if self.labels is not None:
            if self.bins is None:
                raise ValueError(f"{where}: labels need explicit bins")
            if len(self.labels) != len(self.bins) + 1 or len(set(self.labels)) != len(self.labels):
                raise ValueError(
                    f"{where}: needs {len(self.bins) + 1} distinct labels for bins "
                    f"{self.bins}, got {self.labels}"
                )
        return self


def _default_slices() -> list[SliceConfig]:
    return [
        SliceConfig(name="claim_label", column="claim_label"),
        SliceConfig(
            name="n_gold",
            column="n_gold",
            kind="numeric",
            bins=[1, 2, 3],
            labels=["0", "1", "2", "3+"],
        ),
        SliceConfig(name="query_length", column="n_words", kind="numeric", bins=[10, 16]),
    ]


class ReportConfig(Section):
    k_values: list[int] = Field(default_factory=lambda: [10, 100])
    slices: list[SliceConfig] = Field(default_factory=_default_slices)
    metadata_prefix: str | None = Field(
        "meta_",
        description="queries-table columns with this prefix (one per query metadata field) "
        "become slices too; null: none",
    )
    quantile_bins: int = Field(3, ge=2, description="buckets of a numeric slice without bins")
    max_categories: int = Field(
        20, ge=2, description="a categorical slice with more values is dropped (with a note)"
    )
    latency_quantiles: list[float] = Field(default_factory=lambda: [0.5, 0.95, 0.99])
    prices_as_of: str = "2026-11-01"
    prices: dict[str, Price] = Field(default_factory=dict)
    core_hour_usd: float = Field(
        0.045,
        ge=0,
        description="USD per CPU core-hour (as of prices_as_of): prices local compute, the "
        "generation's CPU seconds, the query stages' and the judge's (ragrig.report.cost)",
    )
    mlflow: MlflowConfig = MlflowConfig()

    @model_validator(mode="after")
    def _unique_slice_names(self) -> ReportConfig:
        names = [s.name for s in self.slices]
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            raise ValueError(f"slice names must be unique; repeated: {dups}")
        reserved = sorted(set(names) & RESERVED_SLICE_NAMES)
        if reserved:
            raise ValueError(f"slice names {reserved} are reserved; rename them")
        return self


def missing_prices(generate_cfg_model: str, prices: Mapping[str, Any]) -> list[str]:
    """Models the report cannot price: [] when `prices` (report.prices) has the generator's
    model name (the `model` column of generations.parquet: 'extractive' for the extractive
    baseline, else generate.model), else [that name]. For validation at compose time."""
    return [] if generate_cfg_model in prices else [generate_cfg_model]


def price_hint(model: str, prices_as_of: str) -> str:
    """The one-line fix for a model without a price."""
    return (
        f"no price for model {model!r}: add {model!r} under report.prices in "
        f"conf/report/default.yaml (input_per_mtok, output_per_mtok: USD per million tokens, "
        f"as of {prices_as_of}; 0.0 for a local model)"
    )
