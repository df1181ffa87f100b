"""generate: answer each sampled query from its top passages, recording usage and latency."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import pandas as pd


@dataclass(frozen=True)
class Generation:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Generator(Protocol):
    """A backend may also have `secrets` (e.g. its API key): redacted from every stored error."""

    model_name: str

    def generate(self, question: str, passages: list[str]) -> Generation:
        """Answer `question` from numbered `passages` ([1] is passages[0]). A backend that can
        sample (the chat ones) also takes keyword `temperature` and `seed` for one call."""
        ...


GENERATORS = {
    "extractive": "ragrig.generate.extractive:ExtractiveGenerator",
    "llama_cpp": "ragrig.generate.llama_cpp:LlamaCppGenerator",
    "openai_http": "ragrig.generate.openai_http:OpenAIHttpGenerator",
    "torch_gguf": "ragrig.generate.torch_gguf:TorchGgufGenerator",
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


def assemble_contexts(
    run: pd.DataFrame, chunk_text: Mapping[str, str], qids: list[str], n_passages: int
) -> dict[str, list[tuple[str, str]]]:
    """qid -> [(chunk_id, text)] of its best `n_passages` run rows, best (lowest rank) first.

    Every qid in `qids` is a key (an empty list when the run has no row for it); a chunk id the
    run names but `chunk_text` lacks is a SchemaError naming it.
    """
    from ragrig.errors import SchemaError

    wanted = run[run["qid"].isin(set(qids))].sort_values(["qid", "rank"], kind="mergesort")
    contexts: dict[str, list[tuple[str, str]]] = {q: [] for q in qids}
    for qid, group in wanted.groupby("qid", sort=True):
        for chunk_id in group["chunk_id"].head(n_passages):
            if chunk_id not in chunk_text:
                raise SchemaError(f"run: query {qid!r} ranks chunk {chunk_id!r}, not in chunks")
            contexts[qid].append((chunk_id, chunk_text[chunk_id]))
    return contexts


def citations(answer: str, n_passages: int) -> list[int]:
    """Passage numbers cited, in order of first appearance, kept only if in range."""
    from ragrig.text import cited_numbers

    seen: list[int] = []
    for n in cited_numbers(answer):
        if 1 <= n <= n_passages and n not in seen:
            seen.append(n)
    return seen


REDACTED = "[REDACTED]"
_SECRET_PATTERNS = (
    # an Authorization header or field, whatever its scheme: `Authorization: Bearer x`,
    # `"authorization": "x"`, `authorization=x`
    re.compile(
        r"(\b(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?)"
        r"(?:(?:bearer|basic|token)\s+)?[^\s\"',;}&]+",
        re.IGNORECASE,
    ),
    re.compile(r"(\bbearer\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE),
    # api_key / api-key / apikey / x-api-key as a field, header or query parameter
    re.compile(r"(\b(?:x-)?api[_-]?key\b[\"']?\s*[:=]\s*[\"']?)[^\s\"',;}&]+", re.IGNORECASE),
    # OpenAI-style secret keys: sk-..., sk-proj-...
    re.compile(r"()\bsk-[A-Za-z0-9_-]{8,}"),
)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with each exact secret value, and anything shaped like an Authorization value, an
    api_key value or an `sk-` key, replaced by [REDACTED]. Applied to every error that is stored
    or raised, so a server echoing the request cannot put the key into outputs or caches."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(rf"\g<1>{REDACTED}", text)
    return text


def _samples(
    generator: Generator,
    question: str,
    passages: list[str],
    n: int,
    temperature: float,
    seed: int,
) -> tuple[list[str | None], list[str]]:
    """n sampled answers (None for a failed one) and a message per failure."""
    out: list[str | None] = []
    failures = []
    for i in range(1, n + 1):
        try:
            gen = generator.generate(question, passages, temperature=temperature, seed=seed + i)  # type: ignore[call-arg]
        except Exception as exc:
            out.append(None)
            failures.append(f"sample {i}: {type(exc).__name__}: {exc}")
        else:
            out.append(gen.text.strip())
    return out, failures


def generate_all(
    generator: Generator,
    qids: list[str],
    queries: dict[str, str],
    contexts: dict[str, list[tuple[str, str]]],
    max_passage_chars: int,
    progress: bool = True,
    consistency_samples: int = 0,
    consistency_temperature: float = 0.7,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per query; a failure becomes status 'error' with its message, never a dropped row.

    `contexts` maps qid -> [(chunk_id, text)] best first. `cpu_s` is the process CPU time of
    the answer's call (all threads of this process: an in-process model's compute; next to
    nothing for an HTTP backend). With `consistency_samples` n > 0, each answered query gets n
    more answers at `consistency_temperature`, sample i seeded `seed + i`, stored as the JSON
    list `samples` (a failed sample is null there and named in `error`; the answer stays ok).
    """
    from ragrig.progress import track

    secrets = tuple(getattr(generator, "secrets", ()))
    rows = []
    for qid in track(qids, f"generate {generator.model_name}", "answers") if progress else qids:
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
            "cpu_s": 0.0,
            "samples": "[]",
        }
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            gen = generator.generate(queries[qid], passages)
        except Exception as exc:  # counted as status=error in the report, never hidden
            row.update(status="error", error=redact(f"{type(exc).__name__}: {exc}", secrets))
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
        row["cpu_s"] = time.process_time() - c0
        if consistency_samples and row["status"] != "error":
            samples, failures = _samples(
                generator,
                queries[qid],
                passages,
                consistency_samples,
                consistency_temperature,
                seed,
            )
            row["samples"] = json.dumps(samples, ensure_ascii=False)
            if failures:
                row["error"] = redact("; ".join(failures), secrets)
        rows.append(row)
    return pd.DataFrame(rows, columns=list(rows[0]) if rows else None)
