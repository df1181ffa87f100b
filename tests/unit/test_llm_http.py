"""A misbehaving OpenAI-compatible server on 127.0.0.1 against the generator and the LLM judge:
it trickles, stalls, floods, rate-limits, redirects, sends broken JSON and impossible usage.
Every route ends by itself within MAX_SECONDS, so no test can hang."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ragrig.core.config import validate_section
from ragrig.generate import generate_all, make_generator, note_counts
from ragrig.judge.llm import make_llm_judge
from ragrig.llm.http import retry_after_seconds, usage_counts

MAX_SECONDS = 10.0
CONTEXT = ["Mars has two moons, Phobos and Deimos."]
VERDICT = {
    "unsupported_statements": [],
    "faithfulness": 1,
    "context_relevance": 1,
    "coverage": 1,
    "clarity": 1,
    "external_consistency": 1,
}


def _completion(content: str, usage: dict | None = None) -> bytes:
    body = {"choices": [{"message": {"role": "assistant", "content": content}}]}
    body["usage"] = usage or {"prompt_tokens": 10, "completion_tokens": 3}
    return json.dumps(body).encode()


@pytest.fixture(scope="module")
def server():
    """(base URL, hits per route); each route is `/<name>/v1/chat/completions`."""
    hits: dict[str, int] = {}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, status: int, body: bytes, headers: dict | None = None) -> None:
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            route = self.path.split("/")[1]
            with lock:
                hits[route] = hits.get(route, 0) + 1
                n = hits[route]
            t0 = time.monotonic()
            try:
                if route == "trickle":  # headers at once, then the body a byte at a time
                    body = _completion("Two moons [1].")
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    for i in range(len(body)):
                        if time.monotonic() - t0 > MAX_SECONDS:
                            return
                        self.wfile.write(body[i : i + 1])
                        self.wfile.flush()
                        time.sleep(0.1)
                elif route == "stall_headers":
                    for byte in b"HTTP/1.1 200 OK\r\nX-Slow: 1":
                        if time.monotonic() - t0 > MAX_SECONDS:
                            return
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(0.1)
                elif route == "flood":  # a well-formed completion of 10 MB
                    self._send(200, _completion("moon " * 2_000_000))
                elif route == "flood_chunked":  # the same with no Content-Length
                    self.send_response(200)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    piece = b"x" * 65536
                    for _ in range(160):
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.write(b"0\r\n\r\n")
                elif route == "long":  # 1.2 MB of answer in a body under the byte ceiling
                    self._send(200, _completion("Phobos is a moon of Mars. " * 48_000))
                elif route == "ratelimit":  # 429 twice, then an answer
                    if n % 3 != 0:
                        self._send(429, b'{"error": "slow down"}', {"Retry-After": "1"})
                    else:
                        self._send(200, _completion("Two moons [1]."))
                elif route == "ratelimit_long":
                    self._send(429, b'{"error": "come back tomorrow"}', {"Retry-After": "86400"})
                elif route == "judge_ratelimit":
                    if n % 2 == 1:
                        self._send(429, b"{}", {"Retry-After": "1"})
                    else:
                        self._send(200, _completion(json.dumps(VERDICT)))
                elif route == "redirect_away":
                    where = "http://elsewhere.invalid:8080/v1/chat/completions"
                    self._send(307, b"", {"Location": where})
                elif route == "redirect_here":
                    self._send(307, b"", {"Location": "/plain/v1/chat/completions"})
                elif route == "plain":
                    self._send(200, _completion("Two moons [1]."))
                elif route == "surrogate":  # a JSON escape of a lone high surrogate
                    body = b'{"choices": [{"message": {"content": "Two moons \\ud83d [1]."}}]}'
                    self._send(200, body)
                elif route == "judge_surrogate":
                    reply = json.dumps(VERDICT).replace("[]", '["moons \\ud83d"]')
                    self._send(200, _completion(reply))
                elif route == "negative_usage":
                    body = _completion("Two moons [1].", {"prompt_tokens": -1000})
                    self._send(200, body)
                else:
                    self._send(404, b"no such route")
            except (BrokenPipeError, ConnectionResetError):
                pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", hits
    httpd.shutdown()
    httpd.server_close()


def _generate(base: str, route: str, **extra) -> dict:
    cfg = validate_section(
        "generate",
        {
            "method": "openai_http",
            "base_url": f"{base}/{route}/v1",
            "model": "m",
            "backoff_s": 0,
            **extra,
        },
    )
    gen = make_generator(cfg, seed=0, threads=1)
    df = generate_all(
        gen,
        ["q"],
        {"q": "Moons of Mars?"},
        {"q": [("d#0", CONTEXT[0])]},
        500,
        progress=False,
        max_answer_chars=cfg.max_answer_chars,
    )
    row = df.iloc[0].to_dict()
    row["_calls"] = gen.calls
    row["_notes"] = note_counts(df)
    return row


def _judge(base: str, route: str, tmp_path, **extra):
    cfg = validate_section(
        "judge",
        {
            "method": "overlap",
            "llm": {
                "backend": "openai_http",
                "base_url": f"{base}/{route}/v1",
                "model": "j",
                "cache_dir": str(tmp_path / "cache"),
                "backoff_s": 0,
                **extra,
            },
        },
    )
    return make_llm_judge(cfg.llm)


@pytest.mark.parametrize("route", ["trickle", "stall_headers"])
def test_a_trickling_or_stalled_server_is_a_timeout_at_the_overall_deadline(server, route):
    base, _ = server
    t0 = time.monotonic()
    row = _generate(base, route, timeout_s=1.0)
    elapsed = time.monotonic() - t0
    assert row["status"] == "timeout" and row["answer"] == ""
    assert "within 1 s" in row["error"]
    assert elapsed < 3.0  # one deadline, not one per byte (the body alone takes ~10 s)
    assert row["_calls"] == 1  # a timeout is not retried


@pytest.mark.parametrize("route", ["flood", "flood_chunked"])
def test_a_flood_is_refused_at_the_byte_ceiling(server, route):
    base, _ = server
    row = _generate(base, route, max_response_bytes=1_000_000)
    assert row["status"] == "error"
    assert "max_response_bytes 1,000,000" in row["error"] and "refused" in row["error"]
    assert len(row["error"]) < 1000


def test_a_long_answer_is_cut_and_counted_truncated(server):
    base, _ = server
    row = _generate(base, "long", max_answer_chars=5000)
    assert row["status"] == "ok" and len(row["answer"]) == 5000
    assert row["error"] == (
        "truncated: answer of 1,247,999 characters cut at 5,000 (generate.max_answer_chars)"
    )
    assert row["_notes"] == {"truncated": 1, "usage invalid": 0, "lone surrogates": 0}


def test_429_is_retried_after_retry_after(server):
    base, hits = server
    before = hits.get("ratelimit", 0)
    t0 = time.monotonic()
    row = _generate(base, "ratelimit", retries=2)
    assert row["status"] == "ok" and row["answer"] == "Two moons [1]."
    assert hits["ratelimit"] - before == 3
    assert time.monotonic() - t0 >= 2.0  # two waits of Retry-After 1 s, backoff_s being 0


def test_429_asking_past_the_budget_is_an_error_at_once(server):
    base, hits = server
    before = hits.get("ratelimit_long", 0)
    row = _generate(base, "ratelimit_long", retries=5, max_retry_wait_s=30)
    assert row["status"] == "error" and "HTTP 429" in row["error"]
    assert hits["ratelimit_long"] - before == 1


def test_the_llm_judge_honours_retry_after(server, tmp_path):
    base, hits = server
    sleeps: list[float] = []
    judge = _judge(base, "judge_ratelimit", tmp_path, retries=2)
    judge.sleep = sleeps.append
    out = judge.judge("Moons?", "Two moons.", CONTEXT)
    assert out.status == "ok" and out.attempts == 2 and sleeps == [1.0]


def test_the_llm_judge_gives_up_on_a_retry_after_past_its_budget(server, tmp_path):
    base, _ = server
    judge = _judge(base, "ratelimit_long", tmp_path, retries=3, max_retry_wait_s=10)
    out = judge.judge("Moons?", "Two moons.", CONTEXT)
    assert out.status == "error" and out.attempts == 1
    assert "Retry-After 86400 s is past max_retry_wait_s 10" in out.error


def test_a_redirect_to_another_host_is_not_followed(server):
    base, _ = server
    row = _generate(base, "redirect_away")
    assert row["status"] == "error"
    assert "redirected (HTTP 307) to elsewhere.invalid:8080: not followed" in row["error"]


def test_a_redirect_to_the_same_origin_is_followed(server):
    base, hits = server
    before = hits.get("plain", 0)
    row = _generate(base, "redirect_here")
    assert row["status"] == "ok" and row["answer"] == "Two moons [1]."
    assert hits["plain"] - before == 1


def test_a_lone_surrogate_escape_is_replaced_and_counted(server, tmp_path):
    base, _ = server
    row = _generate(base, "surrogate")
    assert row["status"] == "ok" and row["answer"] == "Two moons \ufffd [1]."
    assert row["error"] == "lone surrogates: 1 replaced by U+FFFD"
    row["answer"].encode("utf-8")  # storable
    out = _judge(base, "judge_surrogate", tmp_path).judge("Moons?", "Two moons.", CONTEXT)
    assert out.status == "ok" and out.verdict.unsupported_statements == ["moons \ufffd"]
    assert out.error == "lone surrogates: 1 replaced by U+FFFD"


def test_impossible_usage_is_counted_invalid_and_not_priced(server):
    base, _ = server
    row = _generate(base, "negative_usage")
    assert row["status"] == "ok" and row["prompt_tokens"] == 0 and row["completion_tokens"] == 0
    assert (
        row["error"]
        == "usage invalid: usage prompt_tokens -1000 is not a count in [0, 1,000,000,000]"
    )
    assert row["_notes"]["usage invalid"] == 1


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (None, (0, 0, "")),
        ({"prompt_tokens": 7, "completion_tokens": 2}, (7, 2, "")),
        ({"prompt_tokens": 7.0}, (7, 0, "")),
        (
            {"prompt_tokens": True},
            (0, 0, "usage prompt_tokens True is not a count in [0, 1,000,000,000]"),
        ),
        (
            {"completion_tokens": "12"},
            (0, 0, "usage completion_tokens '12' is not a count in [0, 1,000,000,000]"),
        ),
        (
            {"prompt_tokens": 10**12},
            (0, 0, "usage prompt_tokens 1000000000000 is not a count in [0, 1,000,000,000]"),
        ),
        ([1, 2], (0, 0, "usage is list, not an object")),
    ],
)
def test_usage_counts(usage, expected):
    assert usage_counts(usage) == expected


def test_retry_after_forms():
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412490.0) == 0.0
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None
    assert retry_after_seconds("1_0") is None and retry_after_seconds("２") is None
