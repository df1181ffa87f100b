"""conf/traces.yaml: how `ragrig traces` samples, windows, alerts and tests for drift."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from ragrig.core.config import Section, Seed

Axis = Literal["faithfulness", "relevance", "correctness"]


class DriftConfig(Section):
    """Each window against the reference window (the first with `min_per_window` judged)."""

    queries: bool = Field(
        True, description="query drift: MMD of query embeddings (the embed section's model)"
    )
    max_queries: int = Field(
        200, ge=10, le=5000, description="queries embedded per window (the smallest hashes)"
    )
    permutations: int = Field(200, ge=50, le=10000, description="of the MMD permutation test")
    alpha: float = Field(0.01, gt=0, lt=1, description="a p-value below it is drift")


class RegenerationBand(Section):
    """The control band of the regeneration rate: a binomial band around the rate of the
    reference windows, at each window's own traffic."""

    reference_windows: int = Field(
        6, ge=1, le=1000, description="the first windows with min_per_window lines: the baseline"
    )
    false_alarms_per_day: float = Field(
        0.05,
        gt=0,
        lt=24,
        description="expected false alarms in a day of windows: each window's two-sided "
        "level is this over the windows in a day",
    )


class GuardrailsConfig(Section):
    """The five guardrails (ragrig.traces.guardrails); the faithfulness one is `floors`'. A
    bound set to null is not checked."""

    latency_p95_ms: float | None = Field(
        2000.0, gt=0, description="SLO: a window's p95 latency above it alerts"
    )
    stage_latency_p95_ms: dict[str, Annotated[float, Field(gt=0)]] = Field(
        default_factory=dict,
        description="SLO per stage of the log's stage_latency_ms (e.g. {generate: 1500})",
    )
    filter_false_exclusion: float | None = Field(
        0.05,
        ge=0,
        lt=1,
        description="reviewed interactions whose every gold document the filter removed: a "
        "window whose Wilson lower bound is above it alerts",
    )
    min_reviewed: int = Field(
        20, ge=2, description="reviewed interactions (gold and a logged filter) a window needs"
    )
    regeneration: RegenerationBand | None = RegenerationBand()
    cost_per_query_usd: float | None = Field(
        0.01, ge=0, description="a window's mean cost per interaction above it alerts"
    )
    slice_min: int = Field(
        20, ge=1, description="values a slice needs to be named among an alert's slices"
    )


class SignalsConfig(Section):
    """Feedback signals against the judged axes (ragrig.traces.signals)."""

    doubt_patterns: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=lambda: [
            r"\bare you (sure|certain)\b",
            r"\b(is|was) (that|this|it) (right|correct|true)\b",
            r"\bthat('s| is) (wrong|not right|incorrect|not true)\b",
            r"\bi don'?t think so\b",
            r"\breally\?",
            r"\bdouble[- ]check\b",
        ],
        description="a follow-up question matching one (case-insensitive) doubts the answer it "
        "follows",
    )
    min_pairs: int = Field(
        30, ge=4, description="judged interactions with the signal a correlation needs"
    )

    @field_validator("doubt_patterns")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        import re

        for p in patterns:
            try:
                re.compile(p)
            except re.error as exc:
                raise ValueError(
                    f"doubt pattern {p!r} is not a regular expression: {exc}"
                ) from None
        return patterns


class QueueConfig(Section):
    """The review queue (ragrig.traces.queue): what is routed to people, and how much."""

    confidence_margin: float | None = Field(
        0.1,
        ge=0,
        lt=1,
        description="a judged answer whose faithfulness score lies within this of the decision "
        "threshold (or that the judge left undecided) is queued as low confidence; null: none",
    )
    min_consistency: float | None = Field(
        0.6,
        ge=0,
        le=1,
        description="a judged answer whose self-consistency (logged samples) is below it is "
        "queued; null: none",
    )
    thumbs_down: bool = Field(
        True, description="every thumbs-down in the log is queued, sampled for the judge or not"
    )
    random_rate: float = Field(
        0.002,
        ge=0,
        le=1,
        description="the blind sample: interactions queued by a hash of their id (its own seed), "
        "whatever the judge said; reviewed, they are monitoring data, never release data",
    )
    seed: Seed = 29
    max_per_reason: int = Field(
        500, ge=1, le=1000000, description="items kept per reason (the smallest id hashes)"
    )


class TracesConfig(Section):
    sample_rate: float = Field(
        0.05, gt=0, le=1, description="share of interactions judged, by a hash of their id"
    )
    seed: Seed = 13
    window_minutes: int = Field(60, ge=1, le=525600, description="length of a time window")
    floors: dict[Axis, Annotated[float, Field(ge=0, le=1)]] = Field(
        default_factory=lambda: {"faithfulness": 0.85, "relevance": 0.75, "correctness": 0.70},
        description="an alert when a window's interval lower bound is below its axis's floor",
    )
    min_per_window: int = Field(
        30, ge=2, le=100000, description="judged interactions a window needs to alert"
    )
    level: float = Field(0.95, gt=0, lt=1, description="two-sided coverage of each interval")
    resamples: int = Field(1000, ge=100, le=100000, description="bootstrap resamples")
    batch: int = Field(256, ge=1, le=100000, description="interactions judged together")
    drift: DriftConfig = DriftConfig()
    guardrails: GuardrailsConfig = GuardrailsConfig()
    signals: SignalsConfig = SignalsConfig()
    queue: QueueConfig = QueueConfig()
    semantic_relevance: bool = Field(
        True,
        description="relevance's semantic part: question and contexts embedded by the embed "
        "section's model (false: keyword and context parts only, no model loaded)",
    )
    embed_batch_size: int | None = Field(
        8,
        ge=1,
        le=4096,
        description="texts per embedder call for relevance's semantic part and query drift "
        "(null: the embed section's batch_size). The vectors do not depend on it; small "
        "batches pad less and stay in cache (docs/benchmarks.md §21)",
    )
    runtime: Literal["onnx", "torch"] = Field(
        "onnx",
        description="how the embedder and the verifier run: onnx (their fp32 graphs through "
        "onnxruntime, exported once per machine by ragrig prepare; no torch imported, the same "
        "scores as torch's fp32 to ~1e-6); torch (the params' precision: faster where the CPU "
        "has native bf16 units, ~300 MB more resident)",
    )
    bound_heap: bool = Field(
        True,
        description="fix glibc's mmap threshold at heap_threshold_mib (ragrig.runtime.malloc): "
        "resident memory stays near what is used over a long log, at some speed",
    )
    heap_threshold_mib: int = Field(
        8,
        ge=1,
        le=1024,
        description="bound_heap's threshold: blocks above it are mapped and returned at once. "
        "8 measured best with runtime onnx, 1 with runtime torch (docs/benchmarks.md §21)",
    )
    mlflow: bool = Field(True, description="one MLflow run per window, with its traces")
    max_traces_per_window: int = Field(
        100, ge=0, le=100000, description="judged interactions logged as MLflow traces"
    )
    experiment: Annotated[str, Field(min_length=1)] = "ragrig-traces"
