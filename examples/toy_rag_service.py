"""A toy RAG service to point ragrig at: BM25 over a BEIR corpus (rank-bm25) and ragrig's
extractive generator behind HTTP on 127.0.0.1, logging every interaction as a trace line.

    python examples/toy_rag_service.py --port 8765 &
    make repro ARGS="dataset=tiny generate=rag_http generate.url=http://127.0.0.1:8765/ask"
    .venv/bin/python -m ragrig traces reports/toy/interactions.jsonl --sample-rate 1

POST /ask with {"question": "..."} answers
{"answer": "... [1]", "contexts": [{"id": "<doc id>", "text": "..."}, ...]}, the shape
conf/generate/rag_http.yaml reads by default. Each call is appended to --log as one interaction
({"id", "timestamp", "question", "contexts", "answer", "latency_ms"}), the file `ragrig traces`
evaluates. docs/own-system.md walks through it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT / "src"))


def load_corpus(root: Path) -> list[dict]:
    from ragrig.core.io import iter_lines

    path = next(p for p in (root / "corpus.jsonl", root / "corpus.jsonl.gz") if p.exists())
    docs = []
    for _, line in iter_lines(path):
        if line.strip():
            obj = json.loads(line)
            text = " ".join(t for t in (obj.get("title", ""), obj.get("text", "")) if t)
            docs.append({"id": str(obj["_id"]), "text": text})
    return docs


class ToyRag:
    """BM25 top-k documents, then the extractive generator over them."""

    def __init__(self, docs: list[dict], k: int = 3):
        from rank_bm25 import BM25Okapi

        from ragrig.core.text import tokenize
        from ragrig.generate.extractive import ExtractiveGenerator

        self.docs, self.k = docs, k
        self.tokenize = tokenize
        self.bm25 = BM25Okapi(tokenize([d["text"] for d in docs]))
        self.generator = ExtractiveGenerator()

    def ask(self, question: str) -> dict:
        scores = self.bm25.get_scores(self.tokenize([question])[0])
        top = sorted(range(len(self.docs)), key=lambda i: (-scores[i], i))[: self.k]
        contexts = [self.docs[i] for i in top]
        answer = self.generator.generate(question, [c["text"] for c in contexts]).text
        return {"answer": answer, "contexts": contexts}


def serve(rag: ToyRag, port: int, log: Path) -> ThreadingHTTPServer:
    log.parent.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            t0 = time.perf_counter()
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                question = str(body["question"])
            except (ValueError, KeyError, TypeError):
                self.send_response(400)
                self.end_headers()
                self.wfile.write(b'{"error": "POST {\\"question\\": \\"...\\"}"}')
                return
            reply = rag.ask(question)
            payload = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            line = {
                "id": uuid.uuid4().hex,
                "timestamp": datetime.now(UTC).isoformat(),
                "question": question,
                **reply,
                "latency_ms": round((time.perf_counter() - t0) * 1e3, 3),
            }
            with lock, log.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(line) + "\n")

    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    return httpd


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--dataset-root", type=Path, default=PROJECT / "tests/fixtures/tiny_beir")
    p.add_argument("--port", type=int, default=8765, help="0: any free port (printed)")
    p.add_argument("--log", type=Path, default=PROJECT / "reports/toy/interactions.jsonl")
    p.add_argument("--k", type=int, default=3, help="passages per answer")
    args = p.parse_args()
    rag = ToyRag(load_corpus(args.dataset_root), args.k)
    httpd = serve(rag, args.port, args.log)
    url = f"http://127.0.0.1:{httpd.server_address[1]}/ask"
    print(f"toy RAG service on {url} ({len(rag.docs)} documents), logging to {args.log}",
          flush=True)  # fmt: skip
    with contextlib.suppress(KeyboardInterrupt):
        httpd.serve_forever()


if __name__ == "__main__":
    main()
