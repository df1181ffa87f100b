"""generate=rag_http against a local endpoint that answers, rate-limits, stalls, answers HTML
or breaks the configured paths: each a counted status with one reason, the key never stored."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest

from ragrig.core.config import validate_section
from ragrig.generate.external import to_generations
from ragrig.generate.rag_http import _MISSING, RagHttpClient, at_path, fill
from ragrig.llm.redact import REDACTED

KEY = "sk-team-0123456789abcdef0123456789"
GOOD = {
    "result": {
        "answer": "Mars has two moons [1].",
        "contexts": [{"id": "d1", "text": "Mars has two moons."}, {"id": "d2", "text": "Other."}],
        "cited": [1],
    },
    "usage": {"in": 30, "out": 7},
}


@pytest.fixture(scope="module")
def endpoint():
    seen: list[dict] = []
    state = {"limited": 0}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None):
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(
                {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
            )
            if self.path == "/limited" and state["limited"] == 0:
                state["limited"] += 1
                return self._send(429, b"slow down", {"Retry-After": "0"})
            if self.path == "/slow":
                time.sleep(1.5)
            if self.path == "/html":
                return self._send(200, b"<html><body>Login</body></html>")
            if self.path == "/echo-key":  # a server that leaks the key it was sent
                return self._send(400, f"bad request for {self.headers['Authorization']}".encode())
            if self.path == "/broken":
                return self._send(200, json.dumps({"result": {"text": "no answer key"}}).encode())
            return self._send(200, json.dumps(GOOD).encode())

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    httpd.shutdown()


def _client(url: str, **kw) -> RagHttpClient:
    cfg = validate_section(
        "generate",
        {"method": "rag_http", "url": url, "request": '{"q": "{query}", "meta": {"id": "{qid}"}}',
         "answer_path": "result.answer", "passages_path": "result.contexts",
         "citations_path": "result.cited", "prompt_tokens_path": "usage.in",
         "completion_tokens_path": "usage.out", "timeout_s": 0.5, "backoff_s": 0.0, **kw},
    )  # fmt: skip
    return RagHttpClient.from_config(cfg)


def test_the_template_and_the_paths():
    assert fill({"a": ["{query}", 3], "b": "id={qid}"}, "q1", "why?") == {
        "a": ["why?", 3],
        "b": "id=q1",
    }
    assert at_path({"a": [{"b": 1}, {"b": 2}]}, "a.1.b") == 2
    assert at_path({"a": []}, "a.0") is _MISSING and at_path({"a": 1}, "b") is _MISSING


def test_an_answer_its_passages_citations_and_usage_are_read_by_path(endpoint):
    url, seen = endpoint
    a = _client(url + "/ok").ask("q1", "How many moons has Mars?")
    assert (a.status, a.answer, a.passage_ids, a.citations) == (
        "ok", "Mars has two moons [1].", ["d1", "d2"], [1])  # fmt: skip
    assert a.passages == ["Mars has two moons.", "Other."]
    assert (a.prompt_tokens, a.completion_tokens) == (30, 7) and a.latency_ms > 0
    assert seen[-1]["body"] == {"q": "How many moons has Mars?", "meta": {"id": "q1"}}


def test_each_failure_is_a_status_with_its_reason(endpoint, monkeypatch):
    url, _ = endpoint
    limited = _client(url + "/limited")
    a = limited.ask("q1", "x")
    assert a.status == "ok" and limited.calls == 2  # the 429 was retried
    html = _client(url + "/html").ask("q1", "x")
    assert html.status == "error" and "<html><body>Login" in html.error
    slow = _client(url + "/slow").ask("q1", "x")
    assert slow.status == "timeout" and "within 0.5 s" in slow.error
    broken = _client(url + "/broken").ask("q1", "x")
    assert broken.status == "error"
    assert "the reply has no answer at 'result.answer'" in broken.error
    monkeypatch.setenv("TEAM_KEY", KEY)
    leaky = _client(url + "/echo-key", api_key_env="TEAM_KEY")
    out = leaky.ask("q1", "x")
    assert out.status == "error" and "HTTP 400" in out.error
    assert KEY not in out.error and REDACTED in out.error

    # all five become rows, none dropped; the failed ones carry no answer
    chunks = pd.DataFrame({"chunk_id": ["d1#0", "d2#0"], "doc_id": ["d1", "d2"],
                           "text": ["Mars has two moons.", "Other."], "start": [0, 0],
                           "end": [19, 6]})  # fmt: skip
    answers = [a, html, slow, broken, out]
    for n, x in enumerate(answers):
        x.qid = f"q{n}"
    gens, extra, counts = to_generations(
        answers, url, [f"q{n}" for n in range(5)], pd.DataFrame(
            {"qid": [], "doc_id": [], "chunk_id": [], "score": [], "rank": []}),
        chunks, 100, "team-system",
    )  # fmt: skip
    assert gens["status"].tolist() == ["ok", "error", "timeout", "error", "error"]
    assert json.loads(gens.loc[0, "context_chunk_ids"]) == ["d1#0", "d2#0"]
    assert counts["passages_outside_the_run"] == 2 and len(extra) == 2
    assert not gens["error"].str.contains(KEY).any()


def test_a_url_with_credentials_or_a_request_that_is_no_json_object_is_refused():
    from ragrig.core.errors import ConfigError

    with pytest.raises(ConfigError, match="generate.url"):
        validate_section("generate", {"method": "rag_http", "url": "http://u:pw@host/ask"})
    for bad, why in (("{question", "is not JSON"), ("[1]", "is not a JSON object")):
        with pytest.raises(ConfigError, match=why):
            validate_section(
                "generate", {"method": "rag_http", "url": "http://h/a", "request": bad}
            )


def test_calls_in_flight_together_keep_the_queries_order(endpoint):
    url, seen = endpoint
    client = _client(url + "/slow", timeout_s=5.0)
    items = [(f"q{i}", f"question {i}") for i in range(4)]
    t0 = time.perf_counter()
    answers = client.ask_all(items, concurrency=4, progress=False)
    wall = time.perf_counter() - t0
    assert [a.qid for a in answers] == ["q0", "q1", "q2", "q3"]
    assert all(a.status == "ok" for a in answers) and client.calls == 4
    assert wall < 4 * 1.5  # the four 1.5 s calls overlapped
