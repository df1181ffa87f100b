"""Config schema of the generate stage (validated from its params.yaml section)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from ragrig.core.config import NonEmptyStr, RetryWait, Section
from ragrig.core.urls import no_credentials
from ragrig.generate.prompt import PROMPTS


class PositionProbe(Section):
    """The lost-in-the-middle probe (ragrig.generate.position): off by default."""

    enabled: bool = False
    context_size: int | None = Field(
        None,
        ge=3,
        le=20,
        description="passages: the gold and distractors (null: n_passages, the pipeline's)",
    )
    max_queries: int | None = Field(
        None, gt=0, description="probe at most this many of the sampled queries (null: all)"
    )


class _GenerateBase(Section):
    max_queries: int | None = Field(
        50, gt=0, description="deterministic sample size (seeded hash of qid); null = all"
    )
    n_passages: int = Field(3, gt=0, description="passages placed in the context")
    passage_order: Literal["ranked", "reorder"] = Field(
        "ranked",
        description="ranked: best first; reorder: the strongest at both ends, the weakest in "
        "the middle (the lost-in-the-middle mitigation)",
    )
    position_probe: PositionProbe = PositionProbe()
    max_passage_chars: int = Field(1200, gt=0)
    max_answer_chars: int = Field(
        20_000,
        gt=0,
        le=10_000_000,
        description="an answer longer than this is cut here and counted as truncated",
    )

    @property
    def probe_context_size(self) -> int:
        """The probe's passages per context: its own `context_size`, else `n_passages`."""
        return self.position_probe.context_size or self.n_passages

    @model_validator(mode="after")
    def _probe_has_a_middle(self):
        if self.position_probe.enabled and self.probe_context_size < 3:
            raise ValueError(
                f"position_probe.context_size is null, so the probe would use n_passages "
                f"({self.n_passages}) and have no middle: set position_probe.context_size >= 3"
            )
        return self


class _ChatBase(_GenerateBase):
    """What every chat backend shares: the prompt and the self-consistency samples."""

    prompt: Literal["answer", "claim_verdict"] = Field(
        "answer",
        description="answer: answer a question (QA datasets); claim_verdict: the query is a "
        "claim, the answer begins with SUPPORTED / CONTRADICTED / NOT ENOUGH INFORMATION "
        "(SciFact)",
    )
    system_prompt: str = Field(
        description="omitted or null: the built-in instruction of `prompt` "
        "(ragrig.generate.prompt.PROMPTS)"
    )
    consistency_samples: int = Field(
        0, ge=0, description="extra answers sampled per query for self-consistency (0: none)"
    )
    consistency_temperature: float = Field(
        0.7, gt=0, description="temperature of those samples (sample i is seeded seed + i)"
    )
    consistency_max_tokens: Annotated[int, Field(ge=1)] | Literal["answer"] | None = Field(
        None,
        description="each sample's token budget: a number, `answer` (the greedy answer's own "
        "length in tokens), or null (the generator's max_tokens); never above max_tokens",
    )

    @model_validator(mode="before")
    @classmethod
    def _default_system_prompt(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("system_prompt") is None:
            prompt = data.get("prompt", "answer")
            if prompt in PROMPTS:  # an unknown prompt is reported by the field's own check
                data = {**data, "system_prompt": PROMPTS[prompt][0]}
        return data


class GenerateExtractive(_GenerateBase):
    """Picks context sentences: it has no prompt and gives no verdict (a SciFact answer of it
    is an extract or a refusal, never SUPPORTED / CONTRADICTED), and it is deterministic, so
    it takes no self-consistency samples."""

    method: Literal["extractive"] = "extractive"
    max_sentences: int = Field(2, gt=0)
    min_overlap: float = Field(0.2, ge=0, le=1, description="below this, the baseline refuses")


class _LocalGguf(_ChatBase):
    """What the in-process GGUF backends share: the model file, context, decoding, stops."""

    model: str = Field(
        "packaged:SmolLM2-135M-Instruct", description="'packaged:<name>' or a path to a GGUF file"
    )
    n_ctx: int = Field(2048, gt=0, description="prompt plus answer tokens, at most")
    max_tokens: int = Field(128, gt=0)
    temperature: float = Field(0.0, ge=0)
    constrain_verdict: bool = Field(
        True,
        description="prompt claim_verdict: the answer begins with one of the three verdicts "
        "(llama_cpp: the grammar ragrig.generate.prompt.VERDICT_GRAMMAR; torch_gguf: greedy "
        "over their token sequences); false: free text",
    )
    stop: list[NonEmptyStr] = Field(
        default_factory=list,
        description="the answer ends before the first of these strings (not included)",
    )

    @field_validator("stop", mode="before")
    @classmethod
    def _stops_not_blank(cls, value: Any) -> Any:
        # before the items' own min_length check, to say why an empty one is refused
        if isinstance(value, list | tuple) and any(s == "" for s in value):
            raise ValueError("generate.stop: an empty stop string would end every answer at once")
        return value


class GenerateLlamaCpp(_LocalGguf):
    method: Literal["llama_cpp"] = "llama_cpp"
    n_batch: int = Field(2048, gt=0, description="llama.cpp logical batch (prompt tokens/call)")
    n_ubatch: int = Field(
        512, gt=0, description="llama.cpp physical batch (prompt tokens per compute step)"
    )
    flash_attn: bool | None = Field(
        None, description="llama.cpp flash attention on or off; null: llama.cpp decides"
    )


class GenerateTorchGguf(_LocalGguf):
    """The same GGUF model de-quantized into torch: the prompt evaluated in bf16 (AMX / AVX-512
    matrix products where the CPU has them), the answer decoded in fp32
    (ragrig.generate.torch_gguf)."""

    method: Literal["torch_gguf"] = "torch_gguf"
    prefill_precision: Literal["auto", "bf16", "fp32"] = Field(
        "auto",
        description="the prompt's forward pass: bf16 autocast or fp32; auto: bf16 where the CPU "
        "has native bf16 matrix units (AMX or AVX512_BF16), else fp32 (ragrig.weights.precision)",
    )
    decode_batch: int = Field(
        16,
        gt=0,
        description="answers decoded together, one token of each per step (each prompt is "
        "still evaluated alone); 1: each answer decoded alone",
    )
    reuse_prefix: bool = Field(
        True,
        description="evaluate the tokens every prompt begins with (the chat template's system "
        "turn and the user turn's opening) once and start each prompt's pass from their keys "
        "and values; false: every prompt evaluated from its first token",
    )


BaseURL = no_credentials(
    "generate.base_url",
    "put the API key in the environment variable generate.api_key_env names",
)


class GenerateOpenAIHttp(_ChatBase):
    """Any OpenAI-compatible chat-completions endpoint; needs the network unless it is local."""

    method: Literal["openai_http"] = "openai_http"
    base_url: BaseURL = Field(
        description="e.g. https://api.example.com/v1 or http://127.0.0.1:8080/v1"
    )
    model: str
    api_key_env: str | None = Field(None, description="environment variable holding the API key")
    max_tokens: int = Field(128, gt=0)
    temperature: float = Field(0.0, ge=0)
    timeout_s: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="overall deadline of one call: connecting, headers and the whole body; a "
        "call past it is status timeout",
    )
    retries: int = Field(
        2, ge=0, le=10, description="HTTP 5xx, 429 or a failed connection: tries after the first"
    )
    backoff_s: float = Field(1.0, ge=0, le=600, description="first retry wait, doubled each try")
    max_retry_wait_s: RetryWait = 60.0
    max_response_bytes: int = Field(
        4_000_000, gt=0, le=1_000_000_000, description="a larger response body is refused"
    )


class GenerateAnswersFile(Section):
    """The team's own answers, read from `system.answers_file` (ragrig.generate.external)."""

    method: Literal["answers_file"] = "answers_file"
    model: NonEmptyStr = Field(
        "team-system", description="the system's name: its price in report.prices"
    )
    max_passage_chars: int = Field(
        1200, gt=0, description="a passage given by id only: its chunk's text cut here"
    )


RagUrl = no_credentials(
    "generate.url", "put the API key in the environment variable generate.api_key_env names"
)


class GenerateRagHttp(Section):
    """The team's deployed RAG endpoint, one call per sampled query (ragrig.generate.rag_http)."""

    method: Literal["rag_http"] = "rag_http"
    url: RagUrl = Field(description="the endpoint, e.g. http://127.0.0.1:8000/ask")
    model: NonEmptyStr = Field(
        "team-system", description="the system's name: its price in report.prices"
    )
    max_queries: int | None = Field(
        50, gt=0, description="deterministic sample size (seeded hash of qid); null = all"
    )
    request: NonEmptyStr = Field(
        '{"question": "{query}"}',
        description="the JSON body (a JSON object, as text); {query} and {qid} replaced in its "
        "strings",
    )
    concurrency: int = Field(
        1, ge=1, le=64, description="calls in flight at once (answers kept in query order)"
    )
    answer_path: NonEmptyStr = Field("answer", description="dotted path of the answer text")
    passages_path: str | None = Field(
        "contexts", description="dotted path of the passages used (ids, or objects); null: none"
    )
    passage_id_key: NonEmptyStr = "id"
    passage_text_key: str | None = Field(
        "text", description="key of the text the system used; null: the chunk's text"
    )
    citations_path: str | None = Field(
        None, description="dotted path of the cited passage numbers; null: read [n] marks"
    )
    prompt_tokens_path: str | None = None
    completion_tokens_path: str | None = None
    api_key_env: str | None = Field(None, description="environment variable holding the API key")
    max_passage_chars: int = Field(
        1200, gt=0, description="a passage given by id only: its chunk's text cut here"
    )
    timeout_s: float = Field(60.0, gt=0, le=3600, description="overall deadline of one call")
    retries: int = Field(2, ge=0, le=10, description="HTTP 5xx, 429, failed connection: retries")
    backoff_s: float = Field(1.0, ge=0, le=600, description="first retry wait, doubled each try")
    max_retry_wait_s: RetryWait = 60.0
    max_response_bytes: int = Field(4_000_000, gt=0, le=1_000_000_000)

    @field_validator("request")
    @classmethod
    def _a_json_object(cls, value: str) -> str:
        import json

        try:
            body = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"generate.request is not JSON ({exc})") from None
        if not isinstance(body, dict):
            raise ValueError("generate.request is not a JSON object")
        return value


GenerateConfig = Annotated[
    GenerateExtractive
    | GenerateLlamaCpp
    | GenerateTorchGguf
    | GenerateOpenAIHttp
    | GenerateAnswersFile
    | GenerateRagHttp,
    Field(discriminator="method"),
]
