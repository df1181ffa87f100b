"""generate: answer each sampled query from its top passages, recording usage and latency."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any, Protocol

import pandas as pd


@dataclass(frozen=True)
class Generation:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Generator(Protocol):
    model_name: str

    def generate(self, question: str, passages: list[str]) -> Generation:
        """Answer `question` from numbered `passages` ([1] is passages[0])."""
        ...


GENERATORS = {
    "extractive": "ragrig.generate.extractive:ExtractiveGenerator",
    "llama_cpp": "ragrig.generate.llama_cpp:LlamaCppGenerator",
    "openai_http": "ragrig.generate.openai_http:OpenAIHttpGenerator",
}


def make_generator(cfg: Any, seed: int, threads: int) -> Generator:
    from ragrig.registry import resolve

    return resolve(GENERATORS, cfg.method, "generator").from_config(cfg, seed=seed, threads=threads)


def sample_queries(qids: list[str], max_queries: int | None, seed: int) -> list[str]:
    """A deterministic sample: the `max_queries` qids with the smallest seeded hash, sorted."""
    if max_queries is None or max_queries >= len(qids):
        return sorted(qids)
    key = lambda q: hashlib.sha256(f"{seed}:{q}".encode()).hexdigest()  # noqa: E731
    return sorted(sorted(qids, key=key)[:max_queries])


def citations(answer: str, n_passages: int) -> list[int]:
    """Passage numbers cited, in order of first appearance, kept only if in range."""
    from ragrig.text import cited_numbers

    seen: list[int] = []
    for n in cited_numbers(answer):
        if 1 <= n <= n_passages and n not in seen:
            seen.append(n)
    return seen


def format_passages(passages: list[str]) -> str:
    return "\n".join(f"[{i}] {p}" for i, p in enumerate(passages, start=1))


def generate_all(
    generator: Generator,
    qids: list[str],
    queries: dict[str, str],
    contexts: dict[str, list[tuple[str, str]]],
    max_passage_chars: int,
    progress: bool = True,
) -> pd.DataFrame:
    """One row per query; a failure becomes status 'error' with its message, never a dropped row.

    `contexts` maps qid -> [(chunk_id, text)] best first.
    """
    from tqdm import tqdm

    rows = []
    for qid in tqdm(qids, desc=f"generate {generator.model_name}", disable=not progress):
        ctx = contexts.get(qid, [])
        passages = [text[:max_passage_chars] for _, text in ctx]
        row = {
            "qid": qid,
            "status": "ok",
            "answer": "",
            "context_chunk_ids": json.dumps([c for c, _ in ctx]),
            "contexts": json.dumps(passages, ensure_ascii=False),
            "citations": "[]",
            "model": generator.model_name,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "latency_ms": 0.0,
            "error": "",
        }
        t0 = time.perf_counter()
        try:
            gen = generator.generate(queries[qid], passages)
        except Exception as exc:  # counted as status=error in the report, never hidden
            row.update(status="error", error=f"{type(exc).__name__}: {exc}")
        else:
            row.update(
                answer=gen.text.strip(),
                prompt_tokens=int(gen.prompt_tokens),
                completion_tokens=int(gen.completion_tokens),
                citations=json.dumps(citations(gen.text, len(passages))),
            )
            if not row["answer"]:
                row["status"] = "empty"
        row["latency_ms"] = (time.perf_counter() - t0) * 1e3
        rows.append(row)
    return pd.DataFrame(rows, columns=list(rows[0]) if rows else None)
