"""The generate stage's computation."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from ragrig.core.schemas import GENERATION_FAILED
from ragrig.generate.base import Generation, Generator, Request

# every model output and error passes through redact before it is stored
from ragrig.llm.redact import REDACTED, redact  # noqa: F401  (REDACTED: re-exported)


def sample_queries(qids: list[str], max_queries: int | None, seed: int) -> list[str]:
    """A deterministic sample: the `max_queries` qids with the smallest seeded hash, sorted."""
    if max_queries is None or max_queries >= len(qids):
        return sorted(qids)
    key = lambda q: hashlib.sha256(f"{seed}:{q}".encode()).hexdigest()  # noqa: E731
    return sorted(sorted(qids, key=key)[:max_queries])


def assemble_contexts(
    run: pd.DataFrame,
    chunk_text: Mapping[str, str],
    qids: list[str],
    n_passages: int,
    order: str = "ranked",
) -> dict[str, list[tuple[str, str]]]:
    """qid -> [(chunk_id, text)] of its best `n_passages` run rows, best (lowest rank) first, or
    with `order` "reorder" the strongest at both ends (ragrig.generate.position.reorder_ends).

    Every qid in `qids` is a key (an empty list when the run has no row for it); a chunk id the
    run names but `chunk_text` lacks is a SchemaError naming it.
    """
    from ragrig.core.errors import SchemaError

    wanted = run[run["qid"].isin(set(qids))].sort_values(["qid", "rank"], kind="mergesort")
    contexts: dict[str, list[tuple[str, str]]] = {q: [] for q in qids}
    for qid, group in wanted.groupby("qid", sort=True):
        for chunk_id in group["chunk_id"].head(n_passages):
            if chunk_id not in chunk_text:
                raise SchemaError(f"run: query {qid!r} ranks chunk {chunk_id!r}, not in chunks")
            contexts[qid].append((chunk_id, chunk_text[chunk_id]))
    if order == "reorder":
        from ragrig.generate.position import reorder_ends

        contexts = {q: reorder_ends(c) for q, c in contexts.items()}
    return contexts


def citations(answer: str, n_passages: int) -> list[int]:
    """Passage numbers cited, in order of first appearance, kept only if in range."""
    from ragrig.core.text import cited_numbers

    seen: list[int] = []
    for n in cited_numbers(answer):
        if 1 <= n <= n_passages and n not in seen:
            seen.append(n)
    return seen


# Notes on an answer that stays ok, stored in its `error` column, each counted by note_counts.
TRUNCATED = "truncated"
NOTE_KINDS = (TRUNCATED, "usage invalid", "lone surrogates")


def note_counts(gens: pd.DataFrame) -> dict[str, int]:
    """How many answers (status not in GENERATION_FAILED) carry each note of NOTE_KINDS in `error`."""
    answered = (
        gens.loc[~gens["status"].isin(GENERATION_FAILED), "error"].astype(str) if len(gens) else []
    )
    return {
        kind: int(sum(any(p.startswith(kind) for p in e.split("; ")) for e in answered))
        for kind in NOTE_KINDS
    }


def _output(text: str, secrets: tuple[str, ...], max_chars: int) -> tuple[str, list[str]]:
    """A model's answer as stored: lone surrogates replaced, secrets redacted, stripped and cut
    at `max_chars`; the notes saying what was done."""
    from ragrig.core.text import replace_surrogates

    notes = []
    text, n = replace_surrogates(text)
    if n:
        notes.append(f"lone surrogates: {n} replaced by U+FFFD")
    text = redact(text, secrets).strip()
    if len(text) > max_chars:
        notes.append(
            f"{TRUNCATED}: answer of {len(text):,} characters cut at {max_chars:,} "
            "(generate.max_answer_chars)"
        )
        text = text[:max_chars]
    return text, notes


def _answer(generator: Generator, requests: list[Request]) -> list[tuple[Any, float, float]]:
    """(Generation or the exception raised, wall seconds, CPU seconds) per request: one call
    each, or one generate_many call for a batching backend, whose wall time is the answers'
    own `seconds` (a failed request's: what is left of the call's, shared evenly) and whose
    CPU time is shared out in proportion to them."""
    many = getattr(generator, "generate_many", None)
    if many is None:
        out = []
        for r in requests:
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                kw = {} if r.temperature is None else {"temperature": r.temperature, "seed": r.seed}
                if r.max_tokens is not None:
                    kw["max_tokens"] = r.max_tokens
                gen: Any = generator.generate(r.question, r.passages, **kw)  # type: ignore[call-arg]
            except Exception as exc:  # kept and counted by the caller
                gen = exc
            out.append((gen, time.perf_counter() - t0, time.process_time() - c0))
        return out
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        gens: list[Any] = list(many(requests))
        if len(gens) != len(requests):
            raise RuntimeError(f"generate_many gave {len(gens)} answers for {len(requests)}")
    except Exception as exc:  # the whole batch failed: every request records it
        gens = [exc] * len(requests)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    given = [g.seconds if isinstance(g, Generation) else None for g in gens]
    missing = sum(s is None for s in given)  # failed requests: the rest of the call's time
    rest = max(wall - sum(s for s in given if s is not None), 0.0) / missing if missing else 0.0
    secs = [rest if s is None else s for s in given]
    total = sum(secs)
    shares = [s / total for s in secs] if total > 0 else [1 / len(secs)] * len(secs)
    return [(g, s, cpu * f) for g, s, f in zip(gens, secs, shares, strict=True)]


def _batch_size(generator: Generator) -> int:
    if not hasattr(generator, "generate_many"):
        return 1
    return max(1, int(getattr(generator, "batch_size", 1)))


def _batches(generator: Generator, items: list[Any]) -> Iterable[list[Any]]:
    size = _batch_size(generator)
    for start in range(0, len(items), size):
        yield items[start : start + size]


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
    max_answer_chars: int = 20_000,
    consistency_max_tokens: int | str | None = None,
) -> pd.DataFrame:
    """One row per query; a failure becomes status 'error' with its message, never a dropped row.

    `contexts` maps qid -> [(chunk_id, text)] best first. `latency_ms` is the answer's call
    (for a batching backend, its own prompt pass plus an even share of its batch's decoding);
    `cpu_s` the process CPU time of that call (all threads of this process: an in-process
    model's compute; next to nothing for an HTTP backend), shared out likewise. With
    `consistency_samples` n > 0, each answered query gets n more answers at
    `consistency_temperature`, sample i seeded `seed + i`, each within `consistency_max_tokens`
    (a number, "answer": the answer's own completion tokens, None: the generator's budget),
    stored as the JSON list `samples` (a failed sample is null there and named in `error`; the
    answer stays ok).

    Every answer, sample and error is stored with the generator's `secrets` and anything shaped
    like a key redacted (ragrig.llm.redact), lone surrogates replaced, and an answer longer than
    `max_answer_chars` cut there; each repair is a note in `error` (note_counts counts them).
    """
    from ragrig.core.progress import bar

    secrets = tuple(getattr(generator, "secrets", ()))
    rows = []
    # an in-process model keeps each batch's prompts for their samples (no second prompt pass)
    keep = getattr(generator, "keep_prompts", None) if consistency_samples else None
    if keep is not None:
        keep(_batch_size(generator))
    with bar(f"generate {generator.model_name}", len(qids), "answers", on=progress) as b:
        for chunk in _batches(generator, list(qids)):
            passages = {
                q: [text[:max_passage_chars] for _, text in contexts.get(q, [])] for q in chunk
            }
            answers = _answer(generator, [Request(queries[q], passages[q]) for q in chunk])
            done = []
            for qid, (gen, wall, cpu) in zip(chunk, answers, strict=True):
                ctx = contexts.get(qid, [])
                row = {
                    "qid": qid,
                    "status": "ok",
                    "answer": "",
                    "context_chunk_ids": json.dumps([c for c, _ in ctx]),
                    "contexts": json.dumps(passages[qid], ensure_ascii=False),
                    "citations": "[]",
                    "model": generator.model_name,
                    "prompt_tokens": 0,
                    "completion_tokens": 0,
                    "latency_ms": wall * 1e3,
                    "error": "",
                    "cpu_s": cpu,
                    "samples": "[]",
                }
                if isinstance(gen, Exception):  # counted as status error/timeout, never hidden
                    row.update(
                        status="timeout" if isinstance(gen, TimeoutError) else "error",
                        error=redact(f"{type(gen).__name__}: {gen}", secrets),
                    )
                else:
                    answer, notes = _output(gen.text, secrets, max_answer_chars)
                    row.update(
                        answer=answer,
                        prompt_tokens=int(gen.prompt_tokens),
                        completion_tokens=int(gen.completion_tokens),
                        citations=json.dumps(citations(answer, len(passages[qid]))),
                        error=redact("; ".join([*gen.notes, *notes]), secrets),
                    )
                    if not row["answer"]:
                        row["status"] = "empty"
                done.append(row)
            if consistency_samples:
                _add_samples(
                    generator,
                    [r for r in done if r["status"] not in GENERATION_FAILED],
                    queries,
                    passages,
                    consistency_samples,
                    consistency_temperature,
                    seed,
                    secrets,
                    max_answer_chars,
                    consistency_max_tokens,
                )
            rows.extend(done)
            b.update(len(chunk))
    if keep is not None:
        keep(0)
    return pd.DataFrame(rows, columns=list(rows[0]) if rows else None)


def _add_samples(
    generator: Generator,
    rows: list[dict[str, Any]],
    queries: dict[str, str],
    passages: dict[str, list[str]],
    n: int,
    temperature: float,
    seed: int,
    secrets: tuple[str, ...],
    max_chars: int,
    max_tokens: int | str | None = None,
) -> None:
    """Each row's n sampled answers (sample i seeded seed + i, within `max_tokens`: see
    generate_all) into `samples` (None for a failed one, named in `error`)."""

    def budget(row: dict[str, Any]) -> int | None:
        if max_tokens == "answer":
            return max(1, int(row["completion_tokens"]))
        return None if max_tokens is None else int(max_tokens)

    requests = [
        Request(queries[r["qid"]], passages[r["qid"]], temperature, seed + i, budget(r))
        for r in rows
        for i in range(1, n + 1)
    ]
    results = [a for chunk in _batches(generator, requests) for a in _answer(generator, chunk)]
    for k, row in enumerate(rows):
        out: list[str | None] = []
        failures = []
        for i, (gen, _, _) in enumerate(results[k * n : (k + 1) * n], start=1):
            if isinstance(gen, Exception):
                out.append(None)
                failures.append(f"sample {i}: {type(gen).__name__}: {gen}")
            else:
                out.append(_output(gen.text, secrets, max_chars)[0])
        row["samples"] = json.dumps(out, ensure_ascii=False)
        if failures:
            row["error"] = "; ".join(
                e for e in (row["error"], redact("; ".join(failures), secrets)) if e
            )


def answer_probe(
    generator: Any,
    keys: pd.DataFrame,
    contexts: Mapping[str, list[tuple[str, str]]],
    pipeline_contexts: Mapping[str, list[tuple[str, str]]],
    pipeline: pd.DataFrame,
    query_text: Mapping[str, str],
    **generate_kw: Any,
) -> tuple[pd.DataFrame, dict[str, int]]:
    """The lost-in-the-middle probe's answers (ragrig.generate.position), one row per key of
    `keys` with its columns, and how many prompts were not asked again.

    A greedy generator gives one answer per prompt, so each distinct prompt is asked once: a
    probe context identical to the one the pipeline gave its query (the same passages in the
    same order) takes the pipeline's answer (`pipeline_answer` True; only an answer of status
    ok is taken), and one identical to an earlier position of the same query (with three
    passages, `reorder` is `middle` or `last` unless the gold passage is the strongest) takes
    that position's answer. Counts: `pipeline_answers`, `repeated_contexts`. `pipeline` is the
    generate stage's table for `pipeline_contexts`; `generate_kw` goes to generate_all.
    """

    def ids(ctx) -> tuple[str, ...]:
        return tuple(c for c, _ in ctx)

    answered = {
        str(q): row
        for q, row in zip(pipeline["qid"], pipeline.to_dict("records"), strict=True)
        if row["status"] == "ok"
    }
    from_pipeline: dict[str, str] = {}  # key -> its query, whose pipeline answer it takes
    repeated: dict[str, str] = {}  # key -> the earlier key of the same prompt
    first: dict[tuple, str] = {}
    for k, q in zip(keys["key"], keys["qid"], strict=True):
        prompt = (q, ids(contexts[k]))
        if q in answered and prompt[1] == ids(pipeline_contexts.get(q, [])):
            from_pipeline[k] = q
        elif prompt in first:
            repeated[k] = first[prompt]
        else:
            first[prompt] = k
    ask = [k for k in keys["key"] if k not in from_pipeline and k not in repeated]
    wanted = set(ask)
    asked = generate_all(
        generator,
        ask,
        {k: query_text[q] for k, q in zip(keys["key"], keys["qid"], strict=True) if k in wanted},
        dict(contexts),
        **generate_kw,
    )
    rows = {r["qid"]: r for r in asked.to_dict("records")} if len(asked) else {}
    for k, q in from_pipeline.items():
        rows[k] = {**answered[q], "qid": k, "samples": "[]"}
    for k, earlier in repeated.items():
        rows[k] = {**rows[earlier], "qid": k}
    counts = {"pipeline_answers": len(from_pipeline), "repeated_contexts": len(repeated)}
    if not rows:
        return pd.DataFrame(), counts
    ordered = pd.DataFrame([rows[k] for k in keys["key"]])
    ordered["pipeline_answer"] = ordered["qid"].isin(set(from_pipeline))
    table = ordered.merge(keys.rename(columns={"qid": "query_qid", "key": "qid"}), on="qid")
    return table, counts
