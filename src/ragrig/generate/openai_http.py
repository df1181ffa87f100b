"""Chat generator for any OpenAI-compatible HTTP endpoint (a hosted API, vLLM, llama.cpp server).

The API key is read from the environment variable the config names, never from params.yaml.
"""

from __future__ import annotations

import os
from typing import Any

from ragrig.generate import Generation, redact
from ragrig.generate.prompt import chat_messages, read_completion

BODY_CHARS = 300  # of an error response kept in the message, after redaction


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
    ):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model_name = model
        self.system_prompt = system_prompt
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.timeout_s = timeout_s
        self.prompt = prompt
        self.headers = {"Content-Type": "application/json"}
        # Values removed from every error message this generator raises or generate_all stores.
        self.secrets: tuple[str, ...] = ()
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                from ragrig.errors import ConfigError

                raise ConfigError(f"generate.api_key_env names {api_key_env!r}, which is not set")
            self.headers["Authorization"] = f"Bearer {key}"
            self.secrets = (key,)

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
        )

    def _failure(self, what: str, body: str) -> RuntimeError:
        """An error naming the URL and the start of the response, secrets redacted first."""
        snippet = redact(body, self.secrets)[:BODY_CHARS]
        return RuntimeError(redact(f"{self.url} {what}: {snippet}", self.secrets))

    def generate(
        self,
        question: str,
        passages: list[str],
        temperature: float | None = None,
        seed: int | None = None,
    ) -> Generation:
        """The answer; `temperature` and `seed` replace the configured ones for one call (a
        self-consistency sample)."""
        import requests

        body = {
            "model": self.model_name,
            "messages": chat_messages(self.system_prompt, question, passages, self.prompt),
            "max_tokens": self.max_tokens,
            "temperature": self.temperature if temperature is None else temperature,
            "seed": self.seed if seed is None else seed,
        }
        try:
            resp = requests.post(self.url, json=body, headers=self.headers, timeout=self.timeout_s)
        except requests.Timeout as exc:
            raise TimeoutError(f"no answer from {self.url} within {self.timeout_s:.0f} s") from exc
        except requests.RequestException as exc:
            # from None: the original exception may carry the request and its headers
            raise self._failure("request failed", f"{type(exc).__name__}: {exc}") from None
        if resp.status_code != 200:
            raise self._failure(f"answered HTTP {resp.status_code}", resp.text)
        try:
            return read_completion(resp.json())
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise self._failure("returned a malformed completion", resp.text) from None
