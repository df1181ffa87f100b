"""Config schema of the generate stage (validated from its params.yaml section)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ragrig.config import Section
from ragrig.generate.prompt import SYSTEM_PROMPT


class _GenerateBase(Section):
    max_queries: int | None = Field(
        50, gt=0, description="deterministic sample size (seeded hash of qid); null = all"
    )
    n_passages: int = Field(3, gt=0, description="passages placed in the context")
    max_passage_chars: int = Field(1200, gt=0)


class GenerateExtractive(_GenerateBase):
    method: Literal["extractive"] = "extractive"
    max_sentences: int = Field(2, gt=0)
    min_overlap: float = Field(0.2, ge=0, le=1, description="below this, the baseline refuses")


class GenerateLlamaCpp(_GenerateBase):
    method: Literal["llama_cpp"] = "llama_cpp"
    model: str = Field(
        "packaged:SmolLM2-135M-Instruct", description="'packaged:<name>' or a path to a GGUF file"
    )
    n_ctx: int = Field(2048, gt=0)
    max_tokens: int = Field(128, gt=0)
    temperature: float = Field(0.0, ge=0)
    system_prompt: str = SYSTEM_PROMPT


class GenerateOpenAIHttp(_GenerateBase):
    """Any OpenAI-compatible chat-completions endpoint; needs the network unless it is local."""

    method: Literal["openai_http"] = "openai_http"
    base_url: str = Field(description="e.g. https://api.example.com/v1 or http://127.0.0.1:8080/v1")
    model: str
    api_key_env: str | None = Field(None, description="environment variable holding the API key")
    max_tokens: int = Field(128, gt=0)
    temperature: float = Field(0.0, ge=0)
    timeout_s: float = Field(60.0, gt=0)
    system_prompt: str = SYSTEM_PROMPT


GenerateConfig = Annotated[
    GenerateExtractive | GenerateLlamaCpp | GenerateOpenAIHttp, Field(discriminator="method")
]
