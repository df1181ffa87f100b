"""generate=rag_http: the team's deployed RAG endpoint, called once per sampled query.

The request body is `generate.request`, a JSON object template (text) whose strings have `{query}` and
`{qid}` replaced (a string that is exactly "{query}" becomes the query text). The reply is a
JSON object read by dotted paths (`answer_path`, `passages_path`, `citations_path`, the usage
paths; a number in a path indexes a list): the passages a list of ids, or of objects with the id
under `passage_id_key` and the text the system used under `passage_text_key`. Calls are bounded
like the OpenAI-compatible backend's (ragrig.llm.http: a deadline, a body ceiling, retries after
5xx, 429 and failed connections with backoff and Retry-After); the key is read from the
environment variable `api_key_env` and redacted from everything stored.

A failed call (HTTP error, timeout, HTML or other non-JSON body, a body without the answer's
path) is an answer with status error or timeout and the reason, counted, never a dropped query.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from ragrig.generate.external import Answer
from ragrig.llm.http import CallTimeout, api_headers, post_with_retries
from ragrig.llm.redact import redact

_MISSING = object()


def fill(template: Any, qid: str, query: str) -> Any:
    """The request template with `{query}` and `{qid}` replaced in every string."""
    if isinstance(template, dict):
        return {k: fill(v, qid, query) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, qid, query) for v in template]
    if isinstance(template, str):
        return template.replace("{qid}", qid).replace("{query}", query)
    return template


def at_path(data: Any, path: str) -> Any:
    """The value at a dotted path (`result.contexts`, `choices.0.text`), or _MISSING."""
    node = data
    for part in path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif (
            isinstance(node, list)
            and part.lstrip("-").isdigit()
            and -len(node) <= int(part) < len(node)
        ):
            node = node[int(part)]
        else:
            return _MISSING
    return node


class BrokenReply(ValueError):
    """The reply is JSON but breaks the configured paths."""


class RagHttpClient:
    def __init__(
        self,
        url: str,
        request: str,
        answer_path: str,
        passages_path: str | None = None,
        passage_id_key: str = "id",
        passage_text_key: str | None = "text",
        citations_path: str | None = None,
        prompt_tokens_path: str | None = None,
        completion_tokens_path: str | None = None,
        api_key_env: str | None = None,
        timeout_s: float = 60.0,
        retries: int = 2,
        backoff_s: float = 1.0,
        max_retry_wait_s: float = 60.0,
        max_response_bytes: int = 4_000_000,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.url = url
        self.request = json.loads(request)
        self.answer_path = answer_path
        self.passages_path = passages_path
        self.passage_id_key = passage_id_key
        self.passage_text_key = passage_text_key
        self.citations_path = citations_path
        self.prompt_tokens_path = prompt_tokens_path
        self.completion_tokens_path = completion_tokens_path
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_retry_wait_s = max_retry_wait_s
        self.max_response_bytes = max_response_bytes
        self.sleep = sleep
        self.calls = 0  # requests sent, retries included
        self._lock = threading.Lock()
        self.headers, self.secrets = api_headers(api_key_env, "generate.api_key_env")

    @classmethod
    def from_config(cls, cfg: Any) -> RagHttpClient:
        return cls(
            cfg.url,
            cfg.request,
            cfg.answer_path,
            cfg.passages_path,
            cfg.passage_id_key,
            cfg.passage_text_key,
            cfg.citations_path,
            cfg.prompt_tokens_path,
            cfg.completion_tokens_path,
            cfg.api_key_env,
            cfg.timeout_s,
            cfg.retries,
            cfg.backoff_s,
            cfg.max_retry_wait_s,
            cfg.max_response_bytes,
        )

    def _count(self) -> None:
        with self._lock:
            self.calls += 1

    def ask_all(
        self, items: list[tuple[str, str]], concurrency: int = 1, progress: bool = True
    ) -> list[Answer]:
        """The answers to (qid, query) items, in their order, `concurrency` calls at a time."""
        from concurrent.futures import ThreadPoolExecutor

        from ragrig.core.progress import bar

        with bar(f"ask {self.url}", len(items), "queries", on=progress) as b:
            if concurrency == 1:
                out = []
                for qid, query in items:
                    out.append(self.ask(qid, query))
                    b.update(1)
                return out
            with ThreadPoolExecutor(max_workers=concurrency) as pool:
                futures = [pool.submit(self.ask, qid, query) for qid, query in items]
                out = []
                for f in futures:
                    out.append(f.result())  # ask never raises: a failure is an Answer
                    b.update(1)
                return out

    def ask(self, qid: str, query: str) -> Answer:
        """The endpoint's answer to one query; a failure is an Answer with status error or
        timeout and its reason (secrets redacted)."""
        t0 = time.perf_counter()
        try:
            reply = post_with_retries(
                self.url,
                fill(self.request, qid, query),
                self.headers,
                self.timeout_s,
                self.secrets,
                self.max_response_bytes,
                self.retries,
                self.backoff_s,
                self.max_retry_wait_s,
                self.sleep,
                self._count,
            )
            answer = self.read(qid, reply.data)
        except CallTimeout as exc:
            return self._failed(qid, "timeout", exc, t0)
        except (RuntimeError, BrokenReply) as exc:
            return self._failed(qid, "error", exc, t0)
        answer.latency_ms = (time.perf_counter() - t0) * 1e3
        return answer

    def _failed(self, qid: str, status: str, exc: Exception, t0: float) -> Answer:
        error = redact(f"{type(exc).__name__}: {exc}", self.secrets)
        return Answer(qid, status=status, error=error, latency_ms=(time.perf_counter() - t0) * 1e3)

    def read(self, qid: str, data: dict[str, Any]) -> Answer:
        """An Answer from the reply's JSON, by the configured paths."""
        where = f"{self.url} (query {qid!r})"
        text = at_path(data, self.answer_path)
        if not isinstance(text, str):
            what = "no" if text is _MISSING else "a non-string"
            raise BrokenReply(f"{where}: the reply has {what} answer at {self.answer_path!r}")
        ids, texts = [], []
        if self.passages_path:
            items = at_path(data, self.passages_path)
            if not isinstance(items, list):
                raise BrokenReply(f"{where}: the reply has no list at {self.passages_path!r}")
            for n, item in enumerate(items):
                if isinstance(item, str | int):
                    ids.append(str(item))
                    continue
                pid = item.get(self.passage_id_key) if isinstance(item, dict) else None
                if not isinstance(pid, str | int):
                    raise BrokenReply(
                        f"{where}: passage {n} has no {self.passage_id_key!r} "
                        f"(at {self.passages_path!r})"
                    )
                ids.append(str(pid))
                body = item.get(self.passage_text_key) if self.passage_text_key else None
                if isinstance(body, str):
                    texts.append(body)
            if texts and len(texts) != len(ids):
                raise BrokenReply(
                    f"{where}: {len(texts)} of {len(ids)} passages have a {self.passage_text_key!r}"
                )
        cites = None
        if self.citations_path:
            value = at_path(data, self.citations_path)
            if value is not _MISSING:
                if not isinstance(value, list) or not all(type(c) is int and c >= 1 for c in value):
                    raise BrokenReply(
                        f"{where}: {self.citations_path!r} is not a list of passage numbers >= 1"
                    )
                cites = value
        return Answer(
            qid,
            answer=text,
            passage_ids=ids,
            passages=texts or None,
            citations=cites,
            prompt_tokens=self._tokens(data, self.prompt_tokens_path, where),
            completion_tokens=self._tokens(data, self.completion_tokens_path, where),
        )

    @staticmethod
    def _tokens(data: dict[str, Any], path: str | None, where: str) -> int:
        if not path:
            return 0
        value = at_path(data, path)
        if value is _MISSING or value is None:
            return 0
        if type(value) is not int or value < 0:
            raise BrokenReply(f"{where}: {path!r} is {value!r}, not a token count")
        return value
