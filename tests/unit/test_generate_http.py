"""The OpenAI-compatible HTTP generator against a local server that serves the packaged SmolLM2."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ragrig.config import validate_section
from ragrig.errors import ConfigError
from ragrig.generate import generate_all, make_generator

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
    assert [r["status"] for r in rows] == ["error", "error", "error"]
    assert rows[0]["error"].startswith("TimeoutError: no answer from")
    assert "malformed completion" in rows[1]["error"]
    assert "HTTP 500" in rows[2]["error"] and "upstream exploded" in rows[2]["error"]
