"""A local OpenAI-compatible server that verifies claims lexically, for the LLM claim judge's
tests and bias probes (ragrig.judge.llm_claims): no model, deterministic, on 127.0.0.1.

It reads the claim prompt (numbered passages, `Statement: ...`) and answers the claim schema:
`supported` when a passage holds at least 80% of the statement's words of 4+ letters (and
`contradicted` when exactly one of the two negates with not/no/never), else `not_addressed`.
Routes by the path's first segment: /reader reads every passage; /first reads only passage [1]
(a judge with position bias, for the probes to catch); /fail answers 500.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_WORD = re.compile(r"[a-z0-9]{4,}")
_NEG = re.compile(r"\b(not|no|never)\b|n't\b")


def lexical_verdict(prompt: str, first_only: bool = False) -> str:
    block = prompt.split("Context passages:\n", 1)[1].split("\n\nStatement: ", 1)[0]
    parts = re.split(r"^\[(\d+)\] ", block, flags=re.M)[1:]  # number, text, number, text...
    passages = list(zip(parts[::2], parts[1::2], strict=True))
    statement = re.search(r"^Statement: (.*)$", prompt, flags=re.M).group(1).lower()
    words = set(_WORD.findall(statement))
    for _number, text in passages[:1] if first_only else passages:
        text = text.lower()
        if words and len(words & set(_WORD.findall(text))) >= 0.8 * len(words):
            negated = bool(_NEG.search(statement)) != bool(_NEG.search(text))
            return "contradicted" if negated else "supported"
    return "not_addressed"


def start() -> tuple[str, Counter, ThreadingHTTPServer]:
    """(base URL, requests per route, the server: call .shutdown() when done)."""
    hits: Counter[str] = Counter()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            route = self.path.strip("/").split("/")[0]
            hits[route] += 1
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if route == "fail":
                self.send_response(500)
                self.end_headers()
                self.wfile.write(b"upstream down")
                return
            prompt = body["messages"][-1]["content"]
            verdict = lexical_verdict(prompt, first_only=route == "first")
            reply = {
                "choices": [
                    {
                        "message": {
                            "role": "assistant",
                            "content": json.dumps({"verdict": verdict}),
                        },
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": 5},
            }
            payload = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{httpd.server_address[1]}", hits, httpd
