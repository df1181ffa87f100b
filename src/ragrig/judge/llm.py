"""The LLM judge: one schema-constrained call per answer over its question and context.

Backends are those of the generate stage: an OpenAI-compatible endpoint (`openai_http`) and a
GGUF model in-process through xllamacpp (`llama_cpp`). The request carries a JSON schema
(`response_format`), and the reply is validated again with pydantic (types, ranges, required
fields): a reply that is not JSON or breaks the schema is `invalid`, a call past `timeout_s` is
`timeout` (for HTTP, an overall deadline: ragrig.llm.http), HTTP 5xx, 429 or a failed connection
is retried with exponential backoff (a 429's Retry-After honoured within `max_retry_wait_s`) and
then `error`. Every reply has its secrets redacted and lone surrogates replaced before it is
cached, parsed or stored.
None of these is ever averaged as 0: the composite leaves the LLM part out (ragrig.judge.composite).

Completed exchanges are cached on disk by content hash (model, messages, schema, sampling
parameters), so a rerun pays nothing: a cached call costs 0 tokens and is flagged `cached`.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from ragrig.llm.http import TransientHTTPError, retry_delay, usage_counts
from ragrig.llm.redact import redact

OK, ERROR, TIMEOUT, INVALID = "ok", "error", "timeout", "invalid"
CACHE_VERSION = 1
ERROR_CHARS = 500

# The rubric's levels: the schema allows only these, because a grammar-constrained local model
# does not honour `minimum`/`maximum` on numbers (SmolLM2 wrote 2 for a 0..1 score), while an
# enum is enforced by llama.cpp's grammar and by hosted structured-output modes alike.
LEVELS = (0, 0.25, 0.5, 0.75, 1)
SCORES = {
    "faithfulness": "share of the answer's content that the passages support",
    "context_relevance": "how well the passages address the question",
    "coverage": "how fully the answer addresses what the question asks",
    "clarity": "how clear, direct and well-formed the answer is",
    "external_consistency": "agreement of the answer with well-established general knowledge",
}
MAX_STATEMENTS = 5  # listed at most; enough to show why, bounded in tokens
STATEMENT_CHARS = 200

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "unsupported_statements": {
            "type": "array",
            "items": {"type": "string", "maxLength": STATEMENT_CHARS},
            "maxItems": MAX_STATEMENTS,
        },
        **{name: {"type": "number", "enum": list(LEVELS)} for name in SCORES},
    },
    "required": ["unsupported_statements", *SCORES],
    "additionalProperties": False,
}

SYSTEM_PROMPT = (
    "You are a strict evaluator of answers written by a retrieval-augmented system. Judge the "
    "answer against the numbered context passages only. Reply with one JSON object and nothing "
    "else."
)

USER_TEMPLATE = """Question: {question}

Context passages:
{passages}

Answer:
{answer}

First list the answer's statements that the passages do not support or that contradict them
(unsupported_statements; an empty list if there are none). Then score each item with one of
{levels} (0 worst, 1 best):
{rubric}"""


Score = Annotated[float, Field(ge=0, le=1, strict=True)]


class LLMVerdict(BaseModel):
    """A reply of the LLM judge, validated after parsing (the endpoint may ignore the schema)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    unsupported_statements: list[Annotated[StrictStr, Field(max_length=STATEMENT_CHARS)]] = Field(
        max_length=MAX_STATEMENTS
    )
    faithfulness: Score
    context_relevance: Score
    coverage: Score
    clarity: Score
    external_consistency: Score


@dataclass(frozen=True)
class LLMJudgment:
    """One call's outcome: `verdict` only when status is ok; tokens are those paid (0 cached)."""

    status: str
    verdict: Any = None  # LLMVerdict, or the parsed reply of another schema (exchange)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False
    error: str = ""
    attempts: int = 0
    latency_ms: float = 0.0
    cpu_s: float = 0.0  # process CPU seconds of the call (in-process models: the inference)


def judge_messages(question: str, answer: str, contexts: list[str]) -> list[dict[str, str]]:
    """System instruction and one user message: question, numbered passages, answer, rubric."""
    from ragrig.generate.prompt import format_passages

    rubric = "\n".join(f"- {name}: {what}" for name, what in SCORES.items())
    user = USER_TEMPLATE.format(
        question=question,
        passages=format_passages(contexts) if contexts else "(none)",
        answer=answer,
        levels=", ".join(str(level) for level in LEVELS),
        rubric=rubric,
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def parse_verdict(content: str) -> LLMVerdict:
    """The reply's JSON (a surrounding ``` fence tolerated) validated against LLMVerdict;
    ValueError (json.JSONDecodeError or pydantic's ValidationError) when it is not one."""
    return _parse_verdict(content)[0]


def _parse_verdict(content: str) -> tuple[LLMVerdict, int]:
    """parse_verdict, and how many lone surrogates (JSON escapes such as \\ud83d) its strings
    held, each replaced by U+FFFD."""
    from ragrig.core.text import replace_surrogates_in

    text = content.strip()
    if text.startswith("```") and text.endswith("```"):
        text = text[3:-3].removeprefix("json").strip()
    data, repaired = replace_surrogates_in(json.loads(text))
    return LLMVerdict.model_validate(data), repaired


def cache_key(
    model: str,
    messages: list[dict[str, str]],
    params: dict[str, Any],
    schema: dict[str, Any] | None = None,
) -> str:
    """sha256 of everything that determines the reply: model, prompt, schema (the rubric's by
    default), sampling params."""
    material = {
        "v": CACHE_VERSION,
        "model": model,
        "messages": messages,
        "schema": SCHEMA if schema is None else schema,
        "params": params,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


class TransientError(TransientHTTPError):
    """A failure worth retrying (HTTP 5xx, 429, a failed connection); `retry_after` the wait the
    server asked for, if any."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class MalformedReply(RuntimeError):
    """A reply whose envelope is not a chat completion: counted as invalid, not retried."""


# A transport sends one chat-completions request body and returns the response object; it
# raises TimeoutError, TransientError, MalformedReply or any other exception (-> error).
Transport = Callable[[dict[str, Any]], dict[str, Any]]


class LLMJudge:
    def __init__(
        self,
        transport: Transport,
        model_name: str,
        cache_dir: Path,
        max_tokens: int = 384,
        temperature: float = 0.0,
        seed: int = 0,
        retries: int = 2,
        backoff_s: float = 1.0,
        max_retry_wait_s: float = 60.0,
        secrets: tuple[str, ...] = (),
        extra_body: dict[str, Any] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.transport = transport
        self.model_name = model_name
        self.cache_dir = Path(cache_dir)
        self.params = {"max_tokens": max_tokens, "temperature": temperature, "seed": seed}
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_retry_wait_s = max_retry_wait_s
        self.secrets = secrets
        self.extra_body = dict(extra_body or {})
        self.sleep = sleep
        self.calls = 0  # requests sent (retries included), for tests and the manifest
        self.repeats = 1  # verdicts per answer (judge.llm.repeats) and the votes the k-of-n
        self.agree = 1  # verdict needs (judge.llm.agree); set by make_llm_judge

    def _cache_path(self, key: str) -> Path:
        return self.cache_dir / key[:2] / f"{key}.json"

    def _read_cache(self, key: str) -> dict[str, Any] | None:
        path = self._cache_path(key)
        if not path.exists():
            return None
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # an unreadable entry is a miss: the call is made again and rewritten
        return entry if isinstance(entry, dict) and isinstance(entry.get("content"), str) else None

    def _write_cache(self, key: str, entry: dict[str, Any]) -> None:
        from ragrig.core.io import atomic_write_text

        path = self._cache_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(entry, ensure_ascii=False, sort_keys=True))

    def _redacted(self, exc: BaseException) -> str:
        return redact(f"{type(exc).__name__}: {exc}", self.secrets)[:ERROR_CHARS]

    def judge(self, question: str, answer: str, contexts: list[str]) -> LLMJudgment:
        """The rubric's verdict (LLMVerdict) of one answer."""
        return self.exchange(
            judge_messages(question, answer, contexts), SCHEMA, "judgment", _parse_verdict
        )

    def judge_repeated(
        self, question: str, answer: str, contexts: list[str], k: int
    ) -> list[LLMJudgment]:
        """`k` verdicts of one answer, call i seeded seed + i (each its own cache entry; the
        first is the single call's, so a cache made with one call per answer stays valid)."""
        base = dict(self.params)
        out = []
        try:
            for i in range(k):
                self.params = {**base, "seed": base["seed"] + i}
                out.append(self.judge(question, answer, contexts))
        finally:
            self.params = base
        return out

    def exchange(
        self,
        messages: list[dict[str, str]],
        schema: dict[str, Any],
        schema_name: str,
        parse: Callable[[str], tuple[Any, int]],
    ) -> LLMJudgment:
        """One schema-constrained call, cached, retried and counted; `parse` turns the reply's
        text into (the validated object, lone surrogates replaced) or raises ValueError."""
        t0 = (
            time.perf_counter(),
            time.process_time(),
            _remote_cpu(self.transport),
            self.transport,
        )
        key = cache_key(self.model_name, messages, self.params, schema)
        entry = self._read_cache(key)
        if entry is not None:
            return self._judgment(
                entry["content"], 0, 0, True, 0, t0, entry.get("finish"), parse=parse
            )
        body = {
            "model": self.model_name,
            "messages": messages,
            **self.params,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "strict": True, "schema": schema},
            },
            **self.extra_body,
        }
        attempts = 0
        while True:
            attempts += 1
            self.calls += 1
            try:
                response = self.transport(body)
                break
            except TimeoutError as exc:
                return self._failed(TIMEOUT, exc, attempts, t0)
            except MalformedReply as exc:
                return self._failed(INVALID, exc, attempts, t0)
            except TransientError as exc:
                wait = retry_delay(
                    exc, attempts, self.retries, self.backoff_s, self.max_retry_wait_s
                )
                if wait is None:
                    asked = exc.retry_after
                    why = (
                        f" (Retry-After {asked:g} s is past max_retry_wait_s "
                        f"{self.max_retry_wait_s:g})"
                        if asked is not None and asked > self.max_retry_wait_s
                        else f" (after {attempts} attempts)"
                    )
                    return self._failed(ERROR, exc, attempts, t0, why)
                self.sleep(wait)
            except Exception as exc:  # counted as error, never raised past the judge
                return self._failed(ERROR, exc, attempts, t0)
        from ragrig.core.text import replace_surrogates

        try:
            choice = response["choices"][0]
            content = choice["message"].get("content") or ""
            if not isinstance(content, str):
                raise TypeError(f"content is {type(content).__name__}, not text")
            finish = choice.get("finish_reason")
            prompt_tokens, completion_tokens, usage_problem = usage_counts(response.get("usage"))
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            return self._failed(
                INVALID, MalformedReply(f"not a chat completion: {exc!r}"), attempts, t0
            )
        # a reply that repeats the key never reaches the cache, the table or MLflow
        content, repaired = replace_surrogates(redact(content, self.secrets))
        notes = [f"usage invalid: {usage_problem}"] if usage_problem else []
        if repaired:
            notes.append(f"lone surrogates: {repaired} replaced by U+FFFD")
        # paid for: kept whether the reply validates or not, so a rerun never pays for it again
        self._write_cache(
            key,
            {
                "model": self.model_name,
                "content": content,
                "finish": finish,
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
            },
        )
        return self._judgment(
            content, prompt_tokens, completion_tokens, False, attempts, t0, finish, notes, parse
        )

    def _failed(
        self, status: str, exc: BaseException, attempts: int, t0: tuple, note: str = ""
    ) -> LLMJudgment:
        return LLMJudgment(
            status,
            error=self._redacted(exc) + note,
            attempts=attempts,
            **_elapsed(t0),
        )

    def _judgment(
        self,
        content: str,
        prompt_tokens: int,
        completion_tokens: int,
        cached: bool,
        attempts: int,
        t0: tuple,
        finish: str | None,
        notes: list[str] | None = None,
        parse: Callable[[str], tuple[Any, int]] | None = None,
    ) -> LLMJudgment:
        common = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "cached": cached,
            "attempts": attempts,
        }
        try:
            verdict, escaped = (parse or _parse_verdict)(content)
        except (ValueError, ValidationError) as exc:
            why = (
                "reply is not JSON"
                if isinstance(exc, json.JSONDecodeError)
                else "reply breaks the schema"
            )
            cut = " (cut at max_tokens)" if finish == "length" else ""
            error = redact(f"{why}{cut}: {exc}; reply {content[:200]!r}", self.secrets)
            return LLMJudgment(
                INVALID,
                error=error[:ERROR_CHARS],
                **_elapsed(t0),
                **common,
            )
        notes = list(notes or ())
        if escaped:
            notes.append(f"lone surrogates: {escaped} replaced by U+FFFD")
        return LLMJudgment(OK, verdict, error="; ".join(notes), **_elapsed(t0), **common)


def _elapsed(t0: tuple[float, float, float, Any]) -> dict[str, float]:
    """Wall and CPU time since t0 = (perf_counter, process_time, the transport's CPU seconds
    spent elsewhere, the transport): a transport running the model in a child process (the
    in-process GGUF judge) reports that child's CPU as `cpu_s`."""
    return {
        "latency_ms": (time.perf_counter() - t0[0]) * 1e3,
        "cpu_s": time.process_time() - t0[1] + _remote_cpu(t0[3]) - t0[2],
    }


def _remote_cpu(transport: Any) -> float:
    return float(getattr(transport, "cpu_s", 0.0))


def _http_transport(cfg: Any) -> tuple[Transport, tuple[str, ...]]:
    from ragrig.llm.http import MalformedResponse, api_headers, post_chat

    url = cfg.base_url.rstrip("/") + "/chat/completions"
    headers, secrets = api_headers(cfg.api_key_env, "judge.llm.api_key_env")

    def send(body: dict[str, Any]) -> dict[str, Any]:
        try:
            reply = post_chat(url, body, headers, cfg.timeout_s, secrets, cfg.max_response_bytes)
        except TransientHTTPError as exc:
            raise TransientError(str(exc), exc.retry_after) from None
        except MalformedResponse as exc:
            raise MalformedReply(str(exc)) from None
        return reply.data

    return send, secrets


def llama_chat_model(*args: Any) -> Any:
    """The GGUF chat model of the in-process judge (built inside the bounded worker)."""
    from ragrig.generate.llama_cpp import LlamaCppGenerator

    return LlamaCppGenerator(*args)


class _LlamaTransport:
    """The in-process GGUF judge, bounded: the model lives in a child process
    (ragrig.runtime.bounded), so a call past `timeout_s` is stopped and counted as `timeout`; the next
    call loads the model again. `cpu_s` counts the child's CPU seconds."""

    def __init__(self, cfg: Any):
        from ragrig.runtime.bounded import BoundedWorker

        self.worker = BoundedWorker(
            llama_chat_model,
            (cfg.model, "", cfg.n_ctx, cfg.max_tokens, cfg.temperature, cfg.seed, cfg.threads),
            method="chat",
            timeout_s=cfg.timeout_s,
            build_timeout_s=max(cfg.timeout_s, 120.0),
        )

    @property
    def cpu_s(self) -> float:
        return self.worker.cpu_s

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        extra = {k: v for k, v in body.items() if k not in ("model", "messages")}
        return self.worker.call(body["messages"], **extra)


def default_cache_dir(cwd: Path | None = None) -> Path:
    """<project>/.cache/judge, the same folder from inside a DVC temporary experiment copy."""
    from ragrig.core.paths import project_root

    return project_root(cwd or Path.cwd()) / ".cache" / "judge"


def make_llm_judge(cfg: Any) -> LLMJudge:
    """The LLM judge a `judge.llm` config section describes."""
    cache_dir = Path(cfg.cache_dir) if cfg.cache_dir else default_cache_dir()
    common = {
        "model_name": cfg.model,
        "cache_dir": cache_dir,
        "max_tokens": cfg.max_tokens,
        "temperature": cfg.temperature,
        "seed": cfg.seed,
        "retries": cfg.retries,
        "backoff_s": cfg.backoff_s,
    }
    if cfg.backend == "openai_http":
        send, secrets = _http_transport(cfg)
        judge = LLMJudge(send, secrets=secrets, max_retry_wait_s=cfg.max_retry_wait_s, **common)
    elif cfg.backend == "llama_cpp":
        # a cached prompt prefix would make a reply depend on the call before it
        judge = LLMJudge(_LlamaTransport(cfg), extra_body={"cache_prompt": False}, **common)
    else:
        raise ValueError(f"unknown LLM judge backend {cfg.backend!r}")
    judge.repeats = cfg.repeats
    judge.agree = cfg.agree if cfg.agree is not None else cfg.repeats // 2 + 1
    return judge


# Model families, by the name's words: a judge of the generator's family tends to prefer its
# answers (self-preference), so the judge stage warns when they are the same
FAMILIES = (
    "smollm", "llama", "qwen", "mistral", "mixtral", "gemma", "phi", "gpt", "claude",
    "deepseek", "granite", "olmo", "falcon", "command", "gemini",
)  # fmt: skip


def model_family(name: str) -> str:
    """The family of a model name ('packaged:SmolLM2-135M-Instruct' -> 'smollm'; a path's
    file name read; an unknown name: its first letters)."""
    base = name.split(":", 1)[-1].replace("\\", "/").rsplit("/", 1)[-1].lower()
    for family in FAMILIES:
        if family in base:
            return family
    m = re.match(r"[a-z]+", base)
    return m.group(0) if m else base


def self_preference(judge_models: list[str], generator_models: list[str]) -> str | None:
    """A warning when a judge model is of a generator model's family, else None."""
    same = sorted(
        {
            (j, g)
            for j in judge_models
            for g in generator_models
            if j and g and model_family(j) == model_family(g)
        }
    )
    if not same:
        return None
    pairs = ", ".join(f"judge {j} / generator {g}" for j, g in same)
    return (
        f"the judge and the generator are of one model family ({model_family(same[0][0])}: "
        f"{pairs}): a judge tends to prefer its own family's answers (self-preference); "
        "judge with another family"
    )
