"""DVC stage generate: answer a deterministic sample of queries from their top passages."""

from __future__ import annotations

import _bootstrap  # noqa: F401  (this checkout's src/ first on sys.path)
from ragrig.runtime import stage


def main() -> None:
    args = stage.parser(__doc__).parse_args()
    from ragrig.core.config import load_section

    seed = stage.read_runtime(args.params, "seed")
    threads = stage.read_runtime(args.params, "threads")
    stage.apply_threads(threads)
    stage.apply_seed(seed)

    from ragrig.core.io import atomic_dir, read_table, write_json, write_table
    from ragrig.generate import (
        assemble_contexts,
        generate_all,
        make_generator,
        note_counts,
        sample_queries,
    )

    parse_dir, chunk_dir, rerank_dir = args.inputs
    cfg = load_section("generate", args.params)
    if cfg.method in ("answers_file", "rag_http"):
        return external(args, cfg, seed)
    queries = read_table(parse_dir / "queries.parquet", "queries")
    chunks = read_table(chunk_dir / "chunks.parquet", "chunks")
    run = read_table(rerank_dir / "run.parquet", "run")
    qids = sample_queries(queries["qid"].tolist(), cfg.max_queries, seed)
    contexts = assemble_contexts(
        run,
        dict(zip(chunks["chunk_id"], chunks["text"], strict=True)),
        qids,
        cfg.n_passages,
        cfg.passage_order,
    )
    generator = make_generator(cfg, seed=seed, threads=threads)
    texts = dict(zip(queries["qid"], queries["text"], strict=True))
    gens = generate_all(
        generator,
        qids,
        texts,
        contexts,
        cfg.max_passage_chars,
        consistency_samples=getattr(cfg, "consistency_samples", 0),
        consistency_temperature=getattr(cfg, "consistency_temperature", 0.7),
        consistency_max_tokens=getattr(cfg, "consistency_max_tokens", None),
        seed=seed,
        max_answer_chars=cfg.max_answer_chars,
    )
    probe = probe_counts = None
    if cfg.position_probe.enabled:  # the same generator, the gold passage moved
        from ragrig.generate.position import probe_contexts
        from ragrig.generate.step import answer_probe

        pcfg = cfg.position_probe
        probed = qids[: pcfg.max_queries] if pcfg.max_queries else qids
        qrels = read_table(parse_dir / "qrels.parquet", "qrels")
        size = cfg.probe_context_size
        pctx, keys, probe_counts = probe_contexts(run, chunks, qrels, probed, size)
        probe, not_asked = answer_probe(
            generator,
            keys,
            pctx,
            contexts,
            gens,
            texts,
            max_passage_chars=cfg.max_passage_chars,
            seed=seed,
            max_answer_chars=cfg.max_answer_chars,
        )
        probe_counts = {
            "answers": len(probe),
            **not_asked,
            "context_size": size,
            "queries": int(keys["qid"].nunique()),
            **probe_counts,
        }
    precision = None
    if hasattr(cfg, "prefill_precision"):  # the torch generator's prompt pass on this CPU
        from ragrig.weights.precision import precision_record, resolve_precision

        precision = precision_record(
            cfg.prefill_precision, resolve_precision(cfg.prefill_precision)
        )
    status = gens["status"].value_counts().sort_index().to_dict()
    notes = {k: n for k, n in note_counts(gens).items() if n}
    with atomic_dir(args.out) as out:
        write_table(gens, out / "generations.parquet", "generations")
        if probe is not None and len(probe):
            write_table(probe, out / "position_probe.parquet", "generations")
        write_json(
            out / "manifest.json",
            {
                "method": cfg.method,
                "sampled": len(qids),
                "status": status,
                "notes": notes,
                "precision_decision": precision,
                "position_probe": probe_counts,
            },
        )
    repaired = f", repaired {notes}" if notes else ""
    print(f"generate: {len(gens)} answers, status {status}{repaired}")
    if probe_counts is not None:
        print(
            f"generate: position probe: {probe_counts['answers']} answers for "
            f"{probe_counts['queries']} queries, {probe_counts['pipeline_answers']} of them the "
            f"pipeline's own, {probe_counts['repeated_contexts']} a context of another position "
            f"(left out: {probe_counts['no_gold']} without a "
            f"gold document, {probe_counts['too_few_distractors']} with too few distractors)"
        )


def external(args, cfg, seed: int) -> None:
    """The team's own answers: read from system.answers_file (generate=answers_file), or asked
    of its endpoint for each sampled query (generate=rag_http); judged like the pipeline's."""
    from pathlib import Path

    from ragrig.core.io import atomic_dir, read_table, write_json, write_table
    from ragrig.generate.external import read_answers_file, to_generations

    parse_dir, chunk_dir, rerank_dir = args.inputs
    queries = read_table(parse_dir / "queries.parquet", "queries")
    file = Path(stage.read_system(args.params, "answers_file"))
    if cfg.method == "answers_file":
        from ragrig.core.config import refuse_placeholder

        refuse_placeholder(file, "system.answers_file")
        answers, source = read_answers_file(file), str(file)
    else:
        from ragrig.generate import sample_queries
        from ragrig.generate.rag_http import RagHttpClient

        client = RagHttpClient.from_config(cfg)
        texts = dict(zip(queries["qid"], queries["text"], strict=True))
        qids = sample_queries(queries["qid"].tolist(), cfg.max_queries, seed)
        answers = client.ask_all([(q, texts[q]) for q in qids], cfg.concurrency)
        source = cfg.url
    gens, context_run, counts = to_generations(
        answers,
        source,
        queries["qid"].tolist(),
        read_table(rerank_dir / "run.parquet", "run"),
        read_table(chunk_dir / "chunks.parquet", "chunks"),
        cfg.max_passage_chars,
        cfg.model,
    )
    if cfg.method == "rag_http":
        counts["calls"] = client.calls
    status = gens["status"].value_counts().sort_index().to_dict()
    with atomic_dir(args.out) as out:
        write_table(gens, out / "generations.parquet", "generations")
        write_table(context_run, out / "context_run.parquet", "run")
        write_json(
            out / "manifest.json",
            {"method": cfg.method, "source": source, "sampled": len(gens), "status": status,
             "external": counts},
        )  # fmt: skip
    print(
        f"generate: {cfg.method} {source}: {len(gens)} answers, status {status}, "
        f"{counts['passages_outside_the_run']} passages the run does not rank"
    )


if __name__ == "__main__":
    stage.run("generate", main)
