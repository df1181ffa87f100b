"""A canary API key that a server echoes in answers, judge replies and errors appears in no file
a run writes: parquet, JSON, sqlite, DVC cache objects, MLflow artifacts, logs, console output.

The pipeline runs for real (`dvc repro` on the tiny fixture) with the HTTP generator and the HTTP
LLM judge pointed at a local server on 127.0.0.1 that repeats the request's bearer key. The key
is shaped like no known token, so only the exact-value redaction can remove it. The in-process
backends go through the same two places (generate_all and LLMJudge.judge): their tests are in
tests/unit/test_redaction.py.
"""

from __future__ import annotations

import gzip
import io
import json
import secrets
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest
import yaml

from .conftest import copy_run, project_env, sh

pytestmark = pytest.mark.e2e

# made per run, so that no file of the project's own (this one included) holds it
CANARY = f"canary{secrets.token_hex(12)}"
ENV = "RAGRIG_CANARY_KEY"


def _reply(content: str) -> bytes:
    return json.dumps(
        {
            "choices": [{"message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 8},
        }
    ).encode()


@pytest.fixture(scope="module")
def echo_server():
    """Answers with the request's key in the answer, in the judge's unsupported statements and,
    for every third generation request, in an HTTP 400 body that echoes the headers."""
    count = {"n": 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            key = self.headers.get("Authorization", "").removeprefix("Bearer ")
            if "response_format" in body:  # the LLM judge
                verdict = {
                    "unsupported_statements": [f"the key is {key}", f"Bearer {key}"],
                    "faithfulness": 0.5,
                    "context_relevance": 1,
                    "coverage": 0.5,
                    "clarity": 1,
                    "external_consistency": 1,
                }
                out, status = _reply(json.dumps(verdict)), 200
            else:
                with lock:
                    count["n"] += 1
                    n = count["n"]
                if n % 3 == 0:
                    out, status = f"bad request; headers {dict(self.headers)!r}".encode(), 400
                else:
                    text = f"SUPPORTED [1]. My key is {key}; Authorization: Bearer {key}."
                    out, status = _reply(text), 200
            self.send_response(status)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def _texts_of(path: Path) -> list[str]:
    """Every text a file holds, decoded by kind: parquet cells, sqlite rows, gzip, raw bytes."""
    raw = path.read_bytes()
    texts = [raw.decode("utf-8", errors="replace")]
    if raw[:4] == b"PAR1":  # pages may be compressed: read the cells
        df = pd.read_parquet(io.BytesIO(raw))
        texts.append(df.to_json(orient="records", force_ascii=False))
    elif raw[:16] == b"SQLite format 3\x00":
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = [
                r[0] for r in con.execute("select name from sqlite_master where type='table'")
            ]
            for table in tables:
                texts.extend(repr(row) for row in con.execute(f'select * from "{table}"'))
        finally:
            con.close()
    elif raw[:2] == b"\x1f\x8b":
        texts.append(gzip.decompress(raw).decode("utf-8", errors="replace"))
    return texts


@pytest.fixture(scope="module")
def run(tmp_path_factory, echo_server, tiny_run):
    """The session's fixture run, copied, then generate, judge and report rerun over HTTP."""
    ws = copy_run(tiny_run, tmp_path_factory.mktemp("canary") / "ws")
    env = project_env({ENV: CANARY})
    python = str(Path(env["PATH"].split(":")[0]) / "python")
    overrides = [
        "dataset=tiny",
        "generate=openai_http",
        f"generate.base_url={echo_server}",
        f"generate.api_key_env={ENV}",
        "generate.model=echo-model",
        "generate.backoff_s=0",
        "+report.prices.echo-model.input_per_mtok=1.0",
        "+report.prices.echo-model.output_per_mtok=2.0",
    ]
    sh([python, "-m", "ragrig", "params", "write", *overrides], ws, env)
    params = yaml.safe_load((ws / "params.yaml").read_text())
    params["judge"]["llm"] = {
        "backend": "openai_http",
        "base_url": echo_server,
        "model": "echo-judge",
        "api_key_env": ENV,
        "backoff_s": 0,
    }
    params["report"]["prices"]["echo-judge"] = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
    (ws / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    sh(["git", "add", "-A"], ws, env)
    sh(["git", "commit", "-qm", "canary params"], ws, env)
    proc = sh(["dvc", "repro"], ws, env)
    ran = [
        json.loads(line)["stage"]
        for line in (ws / ".ragrig/stage_log.jsonl").read_text().splitlines()
    ]
    assert ran[-3:] == ["generate", "judge", "report"]  # the rest restored: nothing re-embedded
    return ws, proc.stdout + proc.stderr


def test_the_run_used_the_key_and_the_echoing_server(run):
    ws, _ = run
    gens = pd.read_parquet(ws / "data/generate/generations.parquet")
    assert set(gens["status"]) == {"ok", "error"}  # answers, and errors echoing the headers
    assert gens["answer"].str.contains("[REDACTED]", regex=False).any()
    assert gens["error"].str.contains("[REDACTED]", regex=False).any()
    judged = pd.read_parquet(ws / "data/judge/judgments.parquet")
    assert (judged["llm_status"] == "ok").any()
    assert judged["llm_unsupported"].str.contains("[REDACTED]", regex=False).any()
    assert list((ws / ".cache" / "judge").rglob("*.json"))  # the reply cache was written


def test_no_file_the_run_wrote_holds_the_key(run):
    ws, console = run
    assert CANARY not in console
    scanned, found = 0, []
    for path in sorted(ws.rglob("*")):
        if not path.is_file() or ".git" in path.relative_to(ws).parts[:1]:
            continue
        scanned += 1
        if any(CANARY in text for text in _texts_of(path)):
            found.append(str(path.relative_to(ws)))
    kinds = {p.suffix for p in ws.rglob("*") if p.is_file()}
    assert {".parquet", ".json", ".db", ".jsonl"} <= kinds  # tables, caches, MLflow, logs
    assert list((ws / ".dvc" / "cache").rglob("*"))  # DVC cache objects were scanned too
    assert scanned > 50 and found == []
