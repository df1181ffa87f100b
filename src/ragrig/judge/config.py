"""Config schema of the judge stage (validated from its params.yaml section).

Every claim checker (`method`) shares `JudgeBase`: the weights of the faithfulness composite and
the optional LLM judge (`llm`, null by default)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from ragrig.core.config import NonEmptyStr, RetryWait, Section, Seed
from ragrig.core.schemas import DEFAULT_VETO
from ragrig.core.urls import no_credentials

DEFAULT_MAX_TOKENS = 384


# The hard checks of ragrig.judge.overlap (Verdict.contradictions); DEFAULT_VETO: those that
# decide an answer by default
# `contradicted`: the LLM claim judge's verdict (ragrig.judge.llm_claims)
HardCheck = Literal["negation", "number", "entity", "fabricated", "contradicted"]


def _veto_field() -> Any:
    """`veto` of every judge section: the hard checks that decide an answer."""
    return Field(
        default_factory=lambda: list(DEFAULT_VETO),
        description="the hard checks whose finding makes an answer unfaithful whatever its "
        "score (ragrig.judge.decide): negation, number, entity, fabricated; every finding is "
        "listed in `contradictions` either way. On MTRAG's 477 rated answers at the calibrated "
        "threshold, balanced accuracy is 0.851 with none, 0.847 with number, 0.851 with "
        "fabricated, 0.820 with entity, 0.792 with negation (docs/benchmarks.md §19)",
    )


def _citation_checks_field() -> Any:
    """`citation_checks` of every judge section."""
    return Field(
        True,
        description="check each cited passage against the sentence citing it with this judge "
        "(claim-level citation precision and recall; docs/metrics.md)",
    )


# the verifier's numeric path (ragrig.judge.verifier_model.Verifier): onnx / onnx_int8 run it
# through onnxruntime (ragrig.weights.onnx_export)
Quantize = Literal["auto", "none", "bf16", "int8", "onnx", "onnx_int8"]


class ConsistencyConfig(Section):
    """ragrig.judge.consistency: an answer and its self-consistency samples (generate.
    consistency_samples) clustered by mutual entailment under the verifier; nothing is read,
    and no model loaded, when the generations carry no samples."""

    model: str = Field("shipped", description="the verifier (as judge=verifier's `model`)")
    threshold: float = Field(
        0.5,
        gt=0,
        le=1,
        description="two texts share a cluster when each, as evidence, gives the other "
        "P(support) >= this",
    )
    # 192: the confirmation's setting, so that both share one loaded model
    max_length: int = Field(192, ge=16, le=512, description="tokens of the two texts together")
    batch_size: int = Field(32, gt=0)
    threads: int = Field(2, gt=0)
    quantize: Quantize = "auto"


class ExternalConfig(Section):
    """ragrig.judge.external: each claim of an answer retrieved against the whole corpus (the
    index stage's BM25 index over the chunk stage's chunks) and read by the verifier."""

    model: str = Field("shipped", description="the verifier (as judge=verifier's `model`)")
    k: int = Field(5, gt=0, le=100, description="chunks retrieved per claim")
    window: int = Field(2, ge=1, le=5, description="evidence windows: up to this many sentences")
    windows_per_claim: int = Field(3, ge=1, le=20)
    support_threshold: float = Field(
        0.5, gt=0, le=1, description="a claim is supported when max P(support) >= this"
    )
    contradict_threshold: float = Field(
        0.5,
        gt=0,
        le=1,
        description="a claim not supported is contradicted (flagged) when max P(contradict) "
        ">= this",
    )
    checks: list[Literal["number", "entity", "negation"]] = Field(
        default_factory=lambda: ["number", "entity"],
        description="lexical checks against the retrieved chunks that flag a claim whatever "
        "the verifier reads: a number or name absent from chunks holding the claim's other "
        "words, a negation conflict",
    )
    min_content_words: int = Field(
        2, gt=0, description="fewer content words: not a claim of its own"
    )
    max_length: int = Field(192, ge=16, le=512)
    batch_size: int = Field(32, gt=0)
    threads: int = Field(2, gt=0)
    quantize: Quantize = "auto"


def _consistency_field() -> Any:
    """`consistency` of every judge section."""
    return Field(
        default_factory=ConsistencyConfig,
        description="self-consistency read by meaning (the correctness surrogate); None: off",
    )


def _external_field() -> Any:
    """`external` of every judge section."""
    return Field(
        None,
        description="external consistency: claims checked against the whole corpus (the "
        "correctness surrogate); None: off (it reads every claim of every answer)",
    )


class FaithfulnessWeights(Section):
    """Weights of the faithfulness composite (non-negative, claims > 0, so the sum is > 0);
    renormalised over the parts an answer has (ragrig.judge.composite)."""

    claims: float = Field(0.4, ge=0, description="claim-by-claim support (the claim checker)")
    llm: float = Field(0.4, ge=0, description="the LLM judge's faithfulness (when llm is set)")
    entity: float = Field(0.2, ge=0, description="share of the answer's names/numbers in context")

    @model_validator(mode="after")
    def _positive_sum(self) -> FaithfulnessWeights:
        # claim support is the one part every scored answer has: without it, an answer whose
        # LLM call failed and that names no entity would have no faithfulness at all
        if self.claims <= 0:
            raise ValueError(
                "judge.weights.claims must be > 0: claim support is the only part every "
                "scored answer has (llm and entity may be missing and are then renormalised away)"
            )
        return self


class _LLMJudgeBase(Section):
    timeout_s: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="overall deadline of one call (connecting, headers, the whole body); a call "
        "past it is `timeout`",
    )
    retries: int = Field(
        2, ge=0, le=10, description="extra attempts after HTTP 5xx, 429 or a failed connection"
    )
    backoff_s: float = Field(
        1.0, ge=0, description="wait before retry i (from 0): backoff_s * 2**i seconds"
    )
    cache_dir: str | None = Field(
        None,
        description="calls cached by content hash here; null: <project>/.cache/judge "
        "(gitignored, outside DVC outputs, shared by experiments)",
    )
    max_tokens: int = Field(DEFAULT_MAX_TOKENS, gt=0)
    temperature: float = Field(0.0, ge=0)
    seed: Seed = 0
    repeats: int = Field(
        1,
        ge=1,
        le=20,
        description="calls per answer, call i seeded seed + i (each cached): for a judge that "
        "cannot be pinned to temperature 0; the ratings are the mean of the calls that "
        "succeeded, the verdict k-of-n (`agree`) and the spread is reported",
    )
    agree: int | None = Field(
        None,
        ge=1,
        description="votes (a call rating faithfulness >= 0.5) the k-of-n verdict needs to be "
        "faithful; null: a majority of `repeats`",
    )

    @model_validator(mode="after")
    def _agree_within_repeats(self) -> _LLMJudgeBase:
        if self.agree is not None and self.agree > self.repeats:
            raise ValueError(f"judge.llm.agree ({self.agree}) exceeds repeats ({self.repeats})")
        return self


BaseURL = no_credentials(
    "judge.llm.base_url",
    "put the API key in the environment variable judge.llm.api_key_env names",
)


class LLMJudgeOpenAIHttp(_LLMJudgeBase):
    """Any OpenAI-compatible chat-completions endpoint (a hosted API, vLLM, llama.cpp server)."""

    backend: Literal["openai_http"] = "openai_http"
    base_url: BaseURL = Field(
        description="e.g. https://api.example.com/v1 or http://127.0.0.1:8080/v1"
    )
    model: str
    api_key_env: str | None = Field(None, description="environment variable holding the API key")
    max_retry_wait_s: RetryWait = 60.0
    max_response_bytes: int = Field(
        1_000_000, gt=0, le=1_000_000_000, description="a larger response body is refused"
    )


class LLMJudgeLlamaCpp(_LLMJudgeBase):
    """A GGUF model in-process through xllamacpp, output constrained by the JSON schema."""

    backend: Literal["llama_cpp"] = "llama_cpp"
    model: str = Field(
        "packaged:SmolLM2-135M-Instruct", description="'packaged:<name>' or a path to a GGUF file"
    )
    n_ctx: int = Field(4096, gt=0)
    threads: int = Field(
        1,
        gt=0,
        description="llama.cpp threads; 1 by default: its threads spin while they wait, and on "
        "a busy 2-core machine one thread was ~6x faster than two (7 s vs 42 s per call)",
    )


LLMJudgeConfig = Annotated[LLMJudgeOpenAIHttp | LLMJudgeLlamaCpp, Field(discriminator="backend")]


class CorrectnessConfig(Section):
    """Correctness against a reference answer, claim by claim (ragrig.judge.correctness): the
    verifier reads each answer claim against the reference and each reference claim against
    the answer; the report reads the table (data/judge/correctness.parquet) for long answers."""

    reference_column: NonEmptyStr = Field(
        description="queries-table column of reference answers: plain text, or a JSON list of "
        '{"text": ..., "vital": true|false} nuggets; must be report.scorecard.reference_column'
    )
    model: str | None = Field(
        "shipped",
        description="the verifier (as judge=verifier's `model`; None: data/train_verifier)",
    )
    support_threshold: float = Field(
        0.5, gt=0, le=1, description="a claim is supported when max P(support) >= this"
    )
    contradict_threshold: float = Field(
        0.5,
        gt=0,
        le=1,
        description="an unsupported answer claim with max P(contradict) >= this is an error",
    )
    window: int = Field(2, ge=1, le=5, description="windows of up to this many sentences")
    windows_per_claim: int = Field(2, ge=1, le=20)
    min_content_words: int = Field(
        2, gt=0, description="fewer content words: not a claim of its own (a short answer)"
    )
    max_length: int = Field(192, ge=16, le=512, description="tokens of claim + evidence")
    batch_size: int = Field(32, gt=0)
    threads: int = Field(2, gt=0)
    quantize: Quantize = "auto"


def _correctness_field() -> Any:
    """`correctness` of every judge section."""
    return Field(
        None,
        description="claim-level correctness against a reference answer (null: off; the "
        "report then scores every answer by token-F1)",
    )


class JudgeBase(Section):
    """What every claim checker shares: the composite's weights and the optional LLM judge."""

    weights: FaithfulnessWeights = FaithfulnessWeights()
    llm: LLMJudgeConfig | None = Field(
        None,
        description="the LLM judge (null: none; its weight is then renormalised away and the "
        "report says so)",
    )
    decision_threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="answer level: an answer whose score is >= this is judged faithful; chosen "
        "by `ragrig calibrate` on MTRAG's calibration half (None: not calibrated)",
    )
    veto: list[HardCheck] = _veto_field()
    citation_checks: bool = _citation_checks_field()
    correctness: CorrectnessConfig | None = _correctness_field()
    consistency: ConsistencyConfig | None = _consistency_field()
    external: ExternalConfig | None = _external_field()


class AnswerModelConfig(Section):
    """ragrig.judge.extractive.AnswerModel: P(faithful) from the answer's extractive measures;
    written by `ragrig calibrate` (fitted on MTRAG's calibration half only)."""

    # a model over no measure would be a constant; the weights are any finite real
    features: list[NonEmptyStr] = Field(min_length=1)
    coef: list[Annotated[float, Field(allow_inf_nan=False)]]
    intercept: float = Field(allow_inf_nan=False)

    @model_validator(mode="after")
    def _consistent(self) -> AnswerModelConfig:
        from ragrig.judge.extractive import AnswerModel

        AnswerModel.from_config(self)  # unknown features, length mismatch, non-finite: errors
        return self


class VerifierConfirmConfig(Section):
    """ragrig.judge.confirm: lexical findings the verifier confirms become `contradicted`."""

    model: str = Field("shipped", description="the verifier (as judge=verifier's `model`)")
    kinds: list[Literal["negation", "entity"]] = Field(
        default_factory=lambda: ["negation", "entity"],
        description="the lexical findings read by the verifier",
    )
    below: float = Field(
        0.05,
        gt=0,
        le=1,
        description="a finding is confirmed when the claim's max P(support) over its windows "
        "is below this",
    )
    window: int = Field(3, ge=1, le=5, description="evidence windows: up to this many sentences")
    windows_per_claim: int = Field(3, ge=1, le=20)
    max_length: int = Field(192, ge=16, le=512)
    negation_margin: float | None = Field(
        None,
        gt=0,
        le=1,
        description="a claim with a negation cue is contradicted when its affirmative's "
        "P(support) exceeds its own by this (ragrig.judge.confirm); None: no negation contrast",
    )
    negation_needs_finding: bool = Field(
        True,
        description="the negation contrast reads only claims with a lexical negation finding; "
        "false: every claim with a negation cue (more negations caught, more faithful answers "
        "rejected: docs/benchmarks.md section 28)",
    )
    entity_margin: float | None = Field(
        None,
        gt=0,
        le=1,
        description="a claim with an entity finding and P(support) below entity_below is "
        "contradicted when another name of its windows in place of the missing one raises "
        "P(support) by this; None: no entity contrast",
    )
    entity_below: float = Field(0.3, gt=0, le=1)
    max_substitutes: int = Field(12, ge=1, le=100, description="names tried per missing name")
    batch_size: int = Field(32, gt=0)
    threads: int = Field(2, gt=0)
    quantize: Quantize = "auto"


class JudgeOverlap(JudgeBase):
    method: Literal["overlap"] = "overlap"
    answer_model: AnswerModelConfig | None = Field(
        None,
        description="answer level: a logistic model over the answer's extractive measures "
        "(ragrig.judge.extractive) whose P(faithful) is the answer's claim-checker score; "
        "fitted by `ragrig calibrate` (None: the supported share of claims)",
    )
    support_threshold: float = Field(
        0.6,
        gt=0,
        le=1,
        description="share of a claim's content words found in one context sentence",
    )
    min_content_words: int = Field(
        2, gt=0, description="fewer content words: not a claim of its own (a short answer)"
    )
    entity_check: bool = Field(
        True,
        description="a claim whose names or numbers are absent from the context is unsupported",
    )
    negation_check: bool = Field(
        True,
        description="a negated claim needs a supporting sentence that negates the same word",
    )
    window: int = Field(
        2, ge=1, le=5, description="evidence: runs of up to this many adjacent context sentences"
    )
    confirm: VerifierConfirmConfig | None = Field(
        None,
        description="the verifier reads the claims with a negation or entity finding; a "
        "confirmed one becomes a `contradicted` finding (ragrig.judge.confirm); None: off",
    )


class JudgeVerifier(JudgeBase):
    """The trained verifier reads each claim against evidence windows; the composite's weights,
    the optional LLM judge and the other shared settings as every claim checker has them."""

    method: Literal["verifier"] = "verifier"
    model: str | None = Field(
        "shipped",
        description="the verifier: shipped (the model inside ragrig, trained on public "
        "claim-verification sets), a train_verifier output folder or a model folder (None: the "
        "train_verifier stage's output, data/train_verifier)",
    )
    support_threshold: float = Field(
        0.5, gt=0, le=1, description="a claim is supported when max P(support) >= this"
    )
    windows_per_claim: int = Field(
        2, ge=1, le=20, description="evidence windows read per claim (lexical pre-selection)"
    )
    window: int = Field(
        2, ge=1, le=5, description="evidence windows: runs of up to this many adjacent sentences"
    )
    entity_check: bool = Field(
        True,
        description="a claim whose names or numbers are absent from the context is unsupported",
    )
    min_content_words: int = Field(
        2, gt=0, description="fewer content words: not a claim of its own (a short answer)"
    )
    max_length: int = Field(128, ge=16, le=512, description="tokens of claim + evidence")
    batch_size: int = Field(32, gt=0)
    threads: int = Field(2, gt=0, description="torch threads of the verifier")
    quantize: Quantize = Field(
        "auto",
        description="auto: bf16 where the CPU has native bf16 matrix units (AMX or "
        "AVX512_BF16), else none (ragrig.weights.precision); none: fp32; bf16: matrix products in "
        "bfloat16 under torch's CPU autocast; int8: the verifier's Linear layers dynamically "
        "quantized (both faster on CPU, scores close to fp32, not identical); onnx: the fp32 model "
        "through onnxruntime (the same scores to ~1e-6, no torch imported; faster than none on "
        "an AVX2-only CPU); onnx_int8: its int8 copy (faster, not identical)",
    )
    contradict_threshold: float | None = Field(
        None,
        gt=0,
        le=1,
        description="a claim not supported whose max P(contradict) over its windows is >= this "
        "is contradicted: a finding of kind `contradicted` (decides the answer when `veto` "
        "names it); None: the verifier's contradictions are not read",
    )
    aggregate: Literal["mean", "min"] = Field(
        "mean",
        description="the answer-level score: the mean or the lowest claim P(support) (min: "
        "one unsupported claim is enough to lower it)",
    )
    decision_threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="answer level: an answer whose claim P(support), aggregated, is >= this "
        "is judged faithful; chosen by `ragrig calibrate` on MTRAG's calibration half",
    )


class JudgeLLMClaims(JudgeBase):
    """Claims extracted as for the overlap judge, each verified by an LLM (supported /
    contradicted / not addressed; ragrig.judge.llm_claims)."""

    method: Literal["llm_claims"] = "llm_claims"
    verifier: LLMJudgeConfig = Field(
        default_factory=lambda: LLMJudgeLlamaCpp(max_tokens=16),
        description="the model reading each claim: an OpenAI-compatible endpoint or a GGUF in "
        "process (default: the packaged SmolLM2, which runs offline but reads claims poorly)",
    )
    min_content_words: int = Field(
        2, gt=0, description="fewer content words: not a claim of its own (a short answer)"
    )
    entity_check: bool = Field(
        True,
        description="also the lexical hard checks: a claim whose names or numbers are absent "
        "from the context is unsupported",
    )
    veto: list[HardCheck] = Field(
        default_factory=lambda: ["contradicted", *DEFAULT_VETO],
        description="the findings that make an answer unfaithful whatever its score: the LLM's "
        "`contradicted` verdict and the lexical checks (ragrig.judge.decide)",
    )


JudgeConfig = Annotated[
    JudgeOverlap | JudgeVerifier | JudgeLLMClaims, Field(discriminator="method")
]


def onnx_verifiers(section: Any) -> Any:
    """`section` (a judge section or one of its parts) with every verifier through
    onnxruntime: each `quantize` that resolves to fp32 or bf16 becomes onnx, int8 onnx_int8
    (`ragrig traces` with runtime onnx). Other fields unchanged."""
    from ragrig.weights.precision import resolve_precision

    if not isinstance(section, Section):
        return section
    update: dict[str, Any] = {}
    for name in type(section).model_fields:
        value = getattr(section, name)
        if name == "quantize" and isinstance(value, str):
            q = resolve_precision(value, fp32="none")
            update[name] = {"none": "onnx", "bf16": "onnx", "int8": "onnx_int8"}.get(q, q)
        elif isinstance(value, Section):
            update[name] = onnx_verifiers(value)
    return section.model_copy(update=update)
