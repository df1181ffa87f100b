"""Config schema of the report stage (validated from its params.yaml section)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from ragrig.core.config import NonEmptyStr, Section
from ragrig.core.urls import AWS_ENV, no_credentials, url_type
from ragrig.metrics.names import RESERVED_SLICE_NAMES
from ragrig.tracking.stores import refuse_uri_credentials


class Price(Section):
    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


# every URL of the store refuses credentials (ragrig.core.urls): they go in the environment
TrackingURI = url_type(
    lambda uri: refuse_uri_credentials(uri, "report.mlflow.tracking_uri"), optional=True
)
ArtifactLocation = no_credentials("report.mlflow.artifact_location", AWS_ENV, optional=True)
S3EndpointURL = no_credentials("report.mlflow.s3_endpoint_url", AWS_ENV, optional=True)


class MlflowConfig(Section):
    """Where the report's run is logged (conf/report/mlflow/: `local` sqlite, `team` PostgreSQL
    and S3). Not a dependency of any stage: changing the store reruns nothing."""

    enabled: bool = True
    tracking_uri: TrackingURI = Field(
        None,
        description="null: $RAGRIG_MLFLOW_URI, else sqlite:///<project>/mlflow.db; "
        "postgresql://user@host:port/db (password from the environment, never here), "
        "http://host:port (an mlflow server)",
    )
    experiment: str = "ragrig"
    artifact_location: ArtifactLocation = Field(
        None,
        description="where a new experiment keeps its artifacts, e.g. s3://bucket/prefix; "
        "null: <project>/mlartifacts for sqlite, the server's default otherwise",
    )
    s3_endpoint_url: S3EndpointURL = Field(
        None,
        description="S3-compatible endpoint of the artifacts (MLFLOW_S3_ENDPOINT_URL, which "
        "wins when set); null: $MLFLOW_S3_ENDPOINT_URL or AWS",
    )
    password_env: str | None = Field(
        None,
        description="environment variable holding the PostgreSQL password; null: libpq's "
        "own (PGPASSWORD, ~/.pgpass or PGPASSFILE)",
    )
    connect_timeout_s: int = Field(
        5, gt=0, description="preflight: seconds to reach the store before giving up"
    )
    lock_timeout_s: float = Field(
        30,
        gt=0,
        description="seconds a sqlite store that another process holds locked is waited for "
        "(retried with backoff) before the run is left unlogged, saying so",
    )
    traces: bool = Field(
        True,
        description="log each answer as an MLflow trace of the run (question and passages "
        "in, answer out) with the judge's decision as `faithful` feedback; a person's own "
        "`faithful` feedback in the UI is read back by `ragrig label --from-mlflow`",
    )


class SliceConfig(Section):
    """One slice: a column of the queries table, bucketed by value or by numeric cut points."""

    name: str = Field(min_length=1)
    column: str = Field(min_length=1, description="column of the queries table")
    kind: Literal["categorical", "numeric"] = "categorical"
    bins: list[Annotated[float, Field(allow_inf_nan=False)]] | None = Field(
        None,
        description="numeric: increasing cut points (lower bound included); "
        "null: quantile bins chosen from the data (report.quantile_bins)",
    )
    labels: list[NonEmptyStr] | None = Field(
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


class ScorecardFloor(Section):
    min: float = Field(ge=0.0, le=1.0)
    kind: Literal["hard", "soft"]


class LabelsConfig(Section):
    """People's faithfulness labels of this run's answers (`ragrig label`, ragrig.dataset.labels)."""

    file: str = Field(
        "labels/faithfulness.jsonl",
        description="the labels file (JSONL or CSV), relative to the project root; absent: no "
        "labels, the axis is the judge's alone. Under labels/, which the report stage depends "
        "on: a new or edited file reruns the report only",
    )
    floor_on: Literal["lower_bound", "estimate", "judge"] = Field(
        "lower_bound",
        description="with labels, what the faithfulness floor is tested on: the lower bound "
        "of the prediction-powered interval of the faithful share (report.interval_level), its "
        "estimate, or the judge's mean as without labels",
    )


class Disagreement(Section):
    """When the faithfulness techniques (claims, llm, entity) disagree on an answer
    (ragrig.metrics.agreement): their spread, the level below which all are low, and the share
    of disagreeing answers from which the run's diagnosis names retrieval."""

    spread: float = Field(
        0.5, gt=0, le=1, description="highest - lowest part at which they disagree"
    )
    low: float = Field(0.5, gt=0, le=1, description="every part below it: discard the answer")
    diagnose_share: float = Field(
        0.1,
        gt=0,
        le=1,
        description="share of compared answers disagreeing that the diagnosis names",
    )


class SimilarityRange(Section):
    """Cosines mapped to relevance 0 (at or below `irrelevant`) .. 1 (at or above `relevant`)."""

    irrelevant: float = Field(0.1, ge=-1.0, le=1.0)
    relevant: float = Field(0.6, ge=-1.0, le=1.0)

    @model_validator(mode="after")
    def _order(self) -> SimilarityRange:
        if self.relevant <= self.irrelevant:
            raise ValueError(
                f"similarity_range: relevant ({self.relevant}) must exceed irrelevant "
                f"({self.irrelevant})"
            )
        return self


# a relative weight of the scorecard: 0 leaves its part out
Weight = Annotated[float, Field(ge=0)]


def _weights(names: tuple[str, ...], values: dict[str, float], where: str) -> dict[str, float]:
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ValueError(f"{where}: unknown parts {unknown}; parts are {list(names)}")
    missing = sorted(set(names) - set(values))
    if missing:
        raise ValueError(f"{where}: missing parts {missing} (weight 0 leaves a part out)")
    if any(v < 0 for v in values.values()) or sum(values.values()) <= 0:
        raise ValueError(f"{where}: weights must be >= 0 and not all 0: {values}")
    return values


class ScorecardConfig(Section):
    """The three-axis scorecard (METRICS.md "The production scorecard"). Weights are relative:
    each set is divided by the sum of the parts available."""

    weights: dict[str, Weight] = Field(
        default_factory=lambda: {"faithfulness": 0.5, "relevance": 0.25, "correctness": 0.25}
    )
    floors: dict[str, ScorecardFloor] = Field(
        default_factory=lambda: {
            "faithfulness": ScorecardFloor(min=0.85, kind="hard"),
            "relevance": ScorecardFloor(min=0.75, kind="soft"),
            "correctness": ScorecardFloor(min=0.70, kind="soft"),
        }
    )
    relevance_weights: dict[str, Weight] = Field(
        default_factory=lambda: {"semantic": 0.25, "keyword": 0.15, "llm": 0.3, "context": 0.3}
    )
    similarity_range: SimilarityRange = SimilarityRange()
    faithfulness_reads: Literal["decision", "score"] = Field(
        "decision",
        description="what the faithfulness axis (and its hard floor) reads per answer: the "
        "judge's decision (judged_faithful 1/0: no contradicted claim and a score at its "
        "calibrated threshold; the axis is then the share judged faithful) or the soft score "
        "(the composite; the axis is then its mean). Both are reported either way.",
    )
    floors_on: Literal["lower_bound", "estimate"] = Field(
        "lower_bound",
        description="what every floor is tested on, for the report and `ragrig gate` alike: "
        "the lower bound of the axis's seeded bootstrap interval over its answers "
        "(report.bootstrap_resamples, report.interval_level, runtime.seed), or the estimate "
        "(the axis's mean). With people's labels, faithfulness reads labels.floor_on",
    )
    labels: LabelsConfig = LabelsConfig()
    disagreement: Disagreement = Disagreement()
    correctness_surrogate_weights: dict[str, Weight] = Field(
        default_factory=lambda: {
            "self_consistency": 0.3,
            "coverage": 0.25,
            "clarity": 0.2,
            "external_consistency": 0.25,
        }
    )
    verdicts: bool = Field(
        True,
        description="score the answer's verdict against the queries' claim_label (SciFact); "
        "false when the generator is not asked for a verdict",
    )
    reference_column: str | None = Field(
        None,
        description="queries-table column holding reference answers (token-F1, EM; plain "
        'text or a JSON list of {"text": ..., "vital": true|false} nuggets)',
    )
    claim_level_min_tokens: int = Field(
        8,
        ge=1,
        description="answers of at least this many words (after SQuAD normalisation) read the "
        "judge's claim-level reading against the reference (judge.correctness, "
        "claim_level_measure) as their correctness; shorter ones, token-F1",
    )
    claim_level_measure: Literal["claim_score", "claim_f1"] = Field(
        "claim_score",
        description="what a long answer's correctness reads from the judge's claim-level "
        "table: claim_score (the F1 of the mean P(support) of answer and reference claims; a "
        "refusal on either side read by agreement, whatever the length) or claim_f1 (the F1 "
        "of the supported and covered shares at judge.correctness.support_threshold)",
    )

    @model_validator(mode="after")
    def _check(self) -> ScorecardConfig:
        from ragrig.metrics.correctness import SURROGATES
        from ragrig.metrics.relevance import PARTS
        from ragrig.metrics.scorecard import AXES

        _weights(AXES, self.weights, "scorecard.weights")
        missing = sorted(set(AXES) - set(self.floors))
        unknown = sorted(set(self.floors) - set(AXES))
        if missing or unknown:
            raise ValueError(
                f"scorecard.floors: needs exactly {list(AXES)} (missing {missing}, "
                f"unknown {unknown})"
            )
        _weights(PARTS, self.relevance_weights, "scorecard.relevance_weights")
        _weights(
            SURROGATES,
            self.correctness_surrogate_weights,
            "scorecard.correctness_surrogate_weights",
        )
        return self

    def floors_dict(self) -> dict[str, dict[str, Any]]:
        return {a: {"min": f.min, "kind": f.kind} for a, f in self.floors.items()}


class FilterRule(Section):
    """The pre-registered rule that decides hard or soft for a relevance preference (docs/
    metrics.md "Filters"): hard only if the lower bound of the precision gain's paired interval
    is >= min_gain, the false-exclusion rate <= max_exclusion and hard recall - soft recall >=
    -max_recall_loss. Fixed before the run, never fitted to its outcome."""

    k: int = Field(10, ge=1, description="precision and recall at this depth")
    min_gain: float = Field(0.0, ge=-1, le=1)
    max_exclusion: float = Field(0.05, ge=0, le=1)
    max_recall_loss: float = Field(0.02, ge=0, le=1)


class CoverageSection(Section):
    """`report.coverage`: the coverage matrix of the run's queries in the report (docs/metrics.md
    "Coverage of the query set"); off while `intent` is null."""

    intent: str | None = Field(
        None, description="the queries-table column of the intent (e.g. meta_kind); null: off"
    )
    doc_type: str | None = Field(
        None, description="the documents-table column of the document type; null: one column"
    )
    axis: Literal["faithfulness", "relevance", "correctness"] = "faithfulness"
    half_width: float = Field(0.1, gt=0, lt=1, description="the decision's tolerance")
    ontology: dict[str, NonEmptyStr | None] | None = Field(
        None, description="intent -> parent (null at a root): rows are its branches"
    )
    branch_depth: int = Field(1, ge=1)


class ReportConfig(Section):
    k_values: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=lambda: [10, 100],
        min_length=1,
        description="cut-offs of nDCG@k and recall@k (the headline measures)",
    )
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
    latency_quantiles: list[Annotated[float, Field(gt=0, lt=1)]] = Field(
        default_factory=lambda: [0.5, 0.95, 0.99],
        description="quantiles of each stage's per-query latency, strictly between 0 and 1",
    )
    bootstrap_resamples: int = Field(
        1000,
        ge=0,
        description="resamples of the seeded (runtime.seed) bootstrap giving each slice "
        "value's and the whole set's interval of a retrieval or judge mean; 0: no intervals",
    )
    interval_level: float = Field(0.95, gt=0, lt=1, description="coverage of those intervals")
    prices_as_of: str = "2026-11-01"
    prices: dict[str, Price] = Field(default_factory=dict)
    core_hour_usd: float = Field(
        0.045,
        ge=0,
        description="USD per CPU core-hour (as of prices_as_of): prices local compute, the "
        "generation's CPU seconds, the query stages' and the judge's (ragrig.report.cost)",
    )
    mlflow: MlflowConfig = MlflowConfig()
    scorecard: ScorecardConfig = ScorecardConfig()
    filters: FilterRule = FilterRule()
    coverage: CoverageSection = CoverageSection()

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
