"""The OpenAI-compatible HTTP generator against a local server that serves the packaged SmolLM2."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ragrig.core.config import validate_section
from ragrig.core.errors import ConfigError
from ragrig.generate import generate_all, make_generator
from ragrig.llm.redact import REDACTED

CONTEXT = ["Mars has two moons, Phobos and Deimos.", "Curiosity landed on Mars in 2012."]


@pytest.fixture(scope="module")
def server():
    """/v1 answers with the real in-process model; /slow sleeps; /bad returns non-JSON; /fail 500."""
    smollm = make_generator(
        validate_section("generate", {"method": "llama_cpp", "max_tokens": 24}), seed=13, threads=2
    )
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(
                {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
            )
            if self.path.startswith("/slow"):
                time.sleep(1.5)
            if self.path.startswith("/fail"):
                self.send_response(500)
                self.end_headers()
                self.wfile.write(b"upstream exploded")
                return
            payload = (
                b"<html>not json</html>"
                if self.path.startswith("/bad")
                else json.dumps(
                    smollm.chat(body["messages"], max_tokens=body["max_tokens"])
                ).encode()
            )
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(payload)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    httpd.shutdown()
    httpd.server_close()


def _cfg(base_url: str, **extra):
    return validate_section(
        "generate",
        {
            "method": "openai_http",
            "base_url": base_url,
            "model": "smollm2-local",
            "max_tokens": 24,
            "backoff_s": 0,  # HTTP 5xx is retried: no waiting in tests
            **extra,
        },
    )


def test_answers_over_http_with_usage_and_key_header(server, monkeypatch):
    url, seen = server
    monkeypatch.setenv("RAGRIG_TEST_KEY", "sk-test")
    gen = make_generator(_cfg(url + "/v1", api_key_env="RAGRIG_TEST_KEY"), seed=13, threads=1)
    out = gen.generate("How many moons does Mars have?", CONTEXT)
    assert out.text.strip()
    assert out.prompt_tokens > 30 and 0 < out.completion_tokens <= 24
    request = seen[-1]
    assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer sk-test"
    assert request["body"]["model"] == "smollm2-local" and request["body"]["temperature"] == 0.0
    assert "[1] Mars has two moons" in request["body"]["messages"][1]["content"]


def test_verdict_prompt_and_seeded_samples_reach_the_endpoint(server):
    from ragrig.generate.prompt import VERDICT_SYSTEM_PROMPT

    url, seen = server
    cfg = _cfg(url + "/v1", prompt="claim_verdict", consistency_samples=1)
    gen = make_generator(cfg, seed=13, threads=1)
    before = len(seen)
    df = generate_all(
        gen,
        ["q"],
        {"q": "Mars has two moons."},
        {"q": [("d#0", CONTEXT[0])]},
        200,
        progress=False,
        consistency_samples=cfg.consistency_samples,
        consistency_temperature=cfg.consistency_temperature,
        seed=13,
    )
    main, sample = (r["body"] for r in seen[before:])
    assert main["messages"][0]["content"] == VERDICT_SYSTEM_PROMPT
    assert "Claim: Mars has two moons." in main["messages"][1]["content"]
    assert (main["temperature"], main["seed"]) == (0.0, 13)
    assert (sample["temperature"], sample["seed"]) == (0.7, 14)
    assert sample["messages"] == main["messages"]
    assert len(json.loads(df.loc[0, "samples"])) == 1 and df.loc[0, "status"] == "ok"


def test_missing_api_key_is_a_config_error(monkeypatch):
    monkeypatch.delenv("RAGRIG_ABSENT_KEY", raising=False)
    with pytest.raises(ConfigError, match="RAGRIG_ABSENT_KEY"):
        make_generator(
            _cfg("http://127.0.0.1:9/v1", api_key_env="RAGRIG_ABSENT_KEY"), seed=0, threads=1
        )


def test_timeouts_bad_json_and_http_errors_are_counted(server):
    url, _ = server
    rows = []
    for path, timeout in (("/slow", 0.3), ("/bad", 5.0), ("/fail", 5.0)):
        gen = make_generator(_cfg(url + path, timeout_s=timeout), seed=0, threads=1)
        rows.append(
            generate_all(
                gen, ["q"], {"q": "Moons?"}, {"q": [("d#0", CONTEXT[0])]}, 500, progress=False
            ).iloc[0]
        )
    assert [r["status"] for r in rows] == ["timeout", "error", "error"]
    assert rows[0]["error"].startswith("CallTimeout: no complete answer from")
    assert "malformed completion" in rows[1]["error"]
    assert "HTTP 500" in rows[2]["error"] and "upstream exploded" in rows[2]["error"]


@pytest.fixture(scope="module")
def echo_server():
    """Answers every request with HTTP 500 and a body echoing the request headers and body,
    as a misconfigured proxy or debug server does."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            echo = f"bad request; headers {dict(self.headers)!r}; body {body}"
            if self.path.startswith("/long"):  # the bare key across the 300th character
                echo = "x" * 296 + self.headers["Authorization"].split()[-1] + " trailing"
            self.send_response(500)
            self.end_headers()
            self.wfile.write(echo.encode())

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("key", ["sk-live-0123456789abcdefXYZ", "plain-token-7Q2w9e"])
def test_echoed_key_never_reaches_the_error_column(echo_server, monkeypatch, key):
    monkeypatch.setenv("RAGRIG_TEST_KEY", key)
    gen = make_generator(
        _cfg(echo_server + "/v1", api_key_env="RAGRIG_TEST_KEY"), seed=0, threads=1
    )
    with pytest.raises(RuntimeError) as raised:
        gen.generate("Moons?", CONTEXT)
    row = generate_all(
        gen, ["q"], {"q": "Moons?"}, {"q": [("d#0", CONTEXT[0])]}, 500, progress=False
    ).iloc[0]
    for text in (str(raised.value), row["error"]):
        assert key not in text and key[:8] not in text
        assert "answered HTTP 500: bad request; headers {" in text
        assert f"'Authorization': '{REDACTED}'" in text
    assert row["status"] == "error" and row["error"].startswith("RuntimeError: http://127.0.0.1:")


def test_key_is_redacted_before_the_body_is_cut(echo_server, monkeypatch):
    """Cutting first would keep a fragment of the key that no exact match can find."""
    key = "plain-token-7Q2w9e"
    monkeypatch.setenv("RAGRIG_TEST_KEY", key)
    gen = make_generator(
        _cfg(echo_server + "/long", api_key_env="RAGRIG_TEST_KEY"), seed=0, threads=1
    )
    with pytest.raises(RuntimeError) as raised:
        gen.generate("Moons?", CONTEXT)
    cut = str(raised.value).split("answered HTTP 500: ", 1)[1]
    assert cut == "x" * 296 + REDACTED[:4] + " (after 3 attempts)"
