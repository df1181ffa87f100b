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
        # secrets: values removed from every error message this generator raises or
        # generate_all stores
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
        )

    def _failure(self, what: str, body: str) -> RuntimeError:
        return http_failure(self.url, what, body, self.secrets)

    def generate(
        self,
        question: str,
        passages: list[str],
        temperature: float | None = None,
        seed: int | None = None,
    ) -> Generation:
        """The answer; `temperature` and `seed` replace the configured ones for one call (a
        self-consistency sample)."""
        body = {
            "model": self.model_name,
            "messages": chat_messages(self.system_prompt, question, passages, self.prompt),
            "max_tokens": self.max_tokens,
            "temperature": self.temperature if temperature is None else temperature,
            "seed": self.seed if seed is None else seed,
        }
        try:
            response, text = post_chat(self.url, body, self.headers, self.timeout_s, self.secrets)
        except (TransientHTTPError, MalformedResponse) as exc:
            # the generator does not retry: every such failure is a plain RuntimeError row
            raise RuntimeError(str(exc)) from None
        try:
            return read_completion(response)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise self._failure("returned a malformed completion", text) from None


def api_headers(api_key_env: str | None, where: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """JSON headers, with a bearer key read from the environment variable `api_key_env` (never
    from params.yaml), and the secrets to redact; a ConfigError naming `where` if it is unset."""
    headers = {"Content-Type": "application/json"}
    if not api_key_env:
        return headers, ()
    key = os.environ.get(api_key_env)
    if not key:
        from ragrig.errors import ConfigError

        raise ConfigError(f"{where} names {api_key_env!r}, which is not set")
    headers["Authorization"] = f"Bearer {key}"
    return headers, (key,)


class TransientHTTPError(RuntimeError):
    """HTTP 5xx or a failed connection: worth retrying (the LLM judge does, with backoff)."""


class MalformedResponse(RuntimeError):
    """HTTP 200 whose body is not a JSON object."""


def http_failure(
    url: str, what: str, body: str, secrets: tuple[str, ...], cls: type = RuntimeError
) -> RuntimeError:
    """An error naming the URL and the start of the response, secrets redacted first."""
    snippet = redact(body, secrets)[:BODY_CHARS]
    return cls(redact(f"{url} {what}: {snippet}", secrets))


def post_chat(
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    timeout_s: float,
    secrets: tuple[str, ...] = (),
) -> tuple[dict[str, Any], str]:
    """POST one chat-completions request; return (parsed JSON body, raw text).

    Raises TimeoutError (no answer within `timeout_s`), TransientHTTPError (HTTP 5xx or a
    failed connection), MalformedResponse (HTTP 200 that is not a JSON object) or RuntimeError
    (any other status); every message names the URL, with secrets redacted."""
    import requests

    try:
        resp = requests.post(url, json=body, headers=headers, timeout=timeout_s)
    except requests.Timeout as exc:
        raise TimeoutError(f"no answer from {url} within {timeout_s:g} s") from exc
    except requests.RequestException as exc:
        # from None: the original exception may carry the request and its headers
        raise http_failure(
            url, "request failed", f"{type(exc).__name__}: {exc}", secrets, TransientHTTPError
        ) from None
    if resp.status_code >= 500:
        raise http_failure(
            url, f"answered HTTP {resp.status_code}", resp.text, secrets, TransientHTTPError
        )
    if resp.status_code != 200:
        raise http_failure(url, f"answered HTTP {resp.status_code}", resp.text, secrets)
    try:
        parsed = resp.json()
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise http_failure(
            url, "returned a malformed completion", resp.text, secrets, MalformedResponse
        )
    return parsed, resp.text
