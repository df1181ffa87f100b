"""Chat generator for any OpenAI-compatible HTTP endpoint (a hosted API, vLLM, llama.cpp server).

The API key is read from the environment variable the config names, never from params.yaml.
Each call is bounded by ragrig.llm.http (an overall deadline, a body ceiling, no redirect to
another host); HTTP 5xx, a failed connection and 429 are retried `retries` times with
exponential backoff, a 429's Retry-After honoured when it fits in `max_retry_wait_s`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ragrig.generate.base import Generation
from ragrig.generate.prompt import chat_messages, read_completion
from ragrig.llm.http import Reply, api_headers, http_failure, post_with_retries


class OpenAIHttpGenerator:
    def __init__(
        self,
        base_url: str,
        model: str,
        system_prompt: str,
        api_key_env: str | None = None,
        max_tokens: int = 128,
        temperature: float = 0.0,
        seed: int = 0,
        timeout_s: float = 60.0,
        prompt: str = "answer",
        retries: int = 2,
        backoff_s: float = 1.0,
        max_retry_wait_s: float = 60.0,
        max_response_bytes: int = 4_000_000,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model_name = model
        self.system_prompt = system_prompt
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.timeout_s = timeout_s
        self.prompt = prompt
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_retry_wait_s = max_retry_wait_s
        self.max_response_bytes = max_response_bytes
        self.sleep = sleep
        self.calls = 0  # requests sent, retries included
        # secrets: values removed from every answer, sample and error generate_all stores
        self.headers, self.secrets = api_headers(api_key_env, "generate.api_key_env")

    @classmethod
    def from_config(cls, cfg: Any, seed: int = 0, threads: int = 1) -> OpenAIHttpGenerator:
        return cls(
            cfg.base_url,
            cfg.model,
            cfg.system_prompt,
            cfg.api_key_env,
            cfg.max_tokens,
            cfg.temperature,
            seed,
            cfg.timeout_s,
            cfg.prompt,
            cfg.retries,
            cfg.backoff_s,
            cfg.max_retry_wait_s,
            cfg.max_response_bytes,
        )

    def _post(self, body: dict[str, Any]) -> Reply:
        def count() -> None:
            self.calls += 1

        return post_with_retries(
            self.url,
            body,
            self.headers,
            self.timeout_s,
            self.secrets,
            self.max_response_bytes,
            self.retries,
            self.backoff_s,
            self.max_retry_wait_s,
            self.sleep,
            count,
        )

    def generate(
        self,
        question: str,
        passages: list[str],
        temperature: float | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
    ) -> Generation:
        """The answer; `temperature`, `seed` and a smaller `max_tokens` replace the configured
        ones for one call (a self-consistency sample)."""
        body = {
            "model": self.model_name,
            "messages": chat_messages(self.system_prompt, question, passages, self.prompt),
            "max_tokens": self.max_tokens
            if max_tokens is None
            else min(max_tokens, self.max_tokens),
            "temperature": self.temperature if temperature is None else temperature,
            "seed": self.seed if seed is None else seed,
        }
        reply = self._post(body)
        try:
            gen = read_completion(reply.data)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise http_failure(
                self.url, "returned a malformed completion", reply.text, self.secrets
            ) from None
        if reply.repaired:
            note = f"lone surrogates: {reply.repaired} replaced by U+FFFD"
            gen = replace(gen, notes=(*gen.notes, note))
        return gen
