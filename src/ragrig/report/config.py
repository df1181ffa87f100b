"""Config schema of the report stage (validated from its params.yaml section)."""

from __future__ import annotations

from pydantic import Field

from ragrig.config import Section


class Price(Section):
    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


class MlflowConfig(Section):
    enabled: bool = True
    tracking_uri: str | None = Field(
        None, description="null: $RAGRIG_MLFLOW_URI, else sqlite:///<project>/mlflow.db"
    )
    experiment: str = "ragrig"


class ReportConfig(Section):
    k_values: list[int] = Field(default_factory=lambda: [10, 100])
    slices: list[str] = Field(default_factory=lambda: ["claim_label", "n_gold", "query_length"])
    query_length_bins: list[int] = Field(
        default_factory=lambda: [10, 16], description="word-count cut points of query_length"
    )
    latency_quantiles: list[float] = Field(default_factory=lambda: [0.5, 0.95, 0.99])
    prices_as_of: str = "2026-11-01"
    prices: dict[str, Price] = Field(default_factory=dict)
    mlflow: MlflowConfig = MlflowConfig()
