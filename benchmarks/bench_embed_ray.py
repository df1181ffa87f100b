"""Chunk embedding in one process vs over Ray Data (`embed=minilm_ray`), side by side.

A seeded sample of the dataset's chunks (--n-docs) is written as a chunk table. Then, in
alternating order for --repeats rounds, both executors encode it with the embed section of
conf/embed/minilm_ray.yaml:

* local: `encode_windows` in this process, torch on `runtime.threads` threads;
* ray: `encode_over_ray` on a Ray cluster started here with --actors encoder actors of one CPU
  each (its start-up and model loads counted, as the stage pays them), the texts read by the
  actors from the table window by window.

Reported: passages/s of each (median over rounds), the ratio, seconds of Ray's start-up alone
(one `ray.init` + `ray.shutdown`), passages/s per core, and whether the vectors are
byte-identical. The per-core figure is what the cost estimate for a 10M-chunk corpus (docs/scaling.md)
uses.

    nice -n 5 python benchmarks/bench_embed_ray.py [--n-docs 2000] [--window 250] [--repeats 2]
        [--actors 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import _common as C


def _config(actors: int, window: int):
    import yaml

    from ragrig.core.config import validate_section

    raw = yaml.safe_load((C.PROJECT_ROOT / "conf/embed/minilm_ray.yaml").read_text("utf-8"))
    raw["window"] = window
    raw["executor"] = {**raw["executor"], "actors": actors, "cpus_per_actor": 1}
    return validate_section("embed", raw)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    C.add_common_args(p)
    p.add_argument("--n-docs", type=int, default=2000, help="chunks encoded per run (sampled)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--actors", type=int, default=2, help="Ray encoder actors, one CPU each")
    p.add_argument("--window", type=int, default=250, help="chunks per Ray task (and local call)")
    p.add_argument("--sample-seed", type=int, default=13)
    args = p.parse_args(argv)
    C.setup_env()
    threads = C.apply_threads(args.params, torch=True)

    import numpy as np
    import ray

    from ragrig.core.io import write_table
    from ragrig.embed import encode_windows, make_embedder
    from ragrig.embed.ray_data import encode_over_ray

    data = C.load_dataset(args.dataset_root, args.params)
    rng = np.random.default_rng(args.sample_seed)
    n = min(args.n_docs, len(data.chunks))
    pick = np.sort(rng.choice(len(data.chunks), size=n, replace=False))
    chunks = data.chunks.iloc[pick].reset_index(drop=True)
    cfg = _config(args.actors, args.window)
    texts = chunks["text"].tolist()

    t0 = time.perf_counter()
    ray.init(num_cpus=args.actors, include_dashboard=False, log_to_driver=False)
    ray.shutdown()
    ray_start_s = time.perf_counter() - t0

    walls: dict[str, list[float]] = {"local": [], "ray": []}
    vectors: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "chunks.parquet"
        write_table(chunks, table, "chunks")
        for r in range(args.repeats):
            order = ["local", "ray"] if r % 2 == 0 else ["ray", "local"]
            for side in order:
                t0 = time.perf_counter()
                if side == "local":
                    emb = make_embedder(cfg)  # its load counted, as the actors' are
                    vectors[side] = encode_windows(emb, texts, cfg.window)
                else:
                    vectors[side] = encode_over_ray(cfg, table)
                walls[side].append(time.perf_counter() - t0)
                print(f"round {r + 1} {side}: {n / walls[side][-1]:.1f} passages/s", flush=True)
    rate = {side: n / C.median(w) for side, w in walls.items()}
    cores = {"local": threads, "ray": args.actors}
    # the actors encode on cpus_per_actor torch threads: bf16 matrix products on some CPUs (AMX)
    # round differently by thread count, so the byte-identity check encodes locally on that
    # many threads too (fp32 is the same on any thread count)
    import torch

    same_as_threads = vectors["local"].tobytes() == vectors["ray"].tobytes()
    actor_threads = cfg.executor.cpus_per_actor
    torch.set_num_threads(actor_threads)
    try:
        one = encode_windows(make_embedder(cfg), texts, cfg.window)
    finally:
        torch.set_num_threads(threads)
    identical = one.tobytes() == vectors["ray"].tobytes()
    rows = [
        [side, cores[side], C.fmt(C.median(walls[side]), 2), C.fmt(rate[side], 1),
         C.fmt(rate[side] / cores[side], 1)]
        for side in ("local", "ray")
    ]  # fmt: skip
    C.print_table(
        f"{n} chunks, window {cfg.window}",
        ["executor", "cores", "wall s", "passages/s", "per core"],
        rows,
    )
    print(
        f"ray/local passages/s: {rate['ray'] / rate['local']:.2f}x; Ray start-up alone "
        f"{ray_start_s:.1f} s; vectors byte-identical to local on {actor_threads} thread(s) "
        f"(as each actor): {identical}; to local on {threads}: {same_as_threads}"
    )
    C.write_json(
        args.json,
        {
            **C.header("embed_ray", ["ray", "sentence-transformers", "torch"]),
            "config": {
                "chunks": n,
                "window": cfg.window,
                "actors": args.actors,
                "local_threads": threads,
                "repeats": args.repeats,
            },
            "wall_s": walls,
            "passages_per_s": rate,
            "passages_per_s_per_core": {s: rate[s] / cores[s] for s in rate},
            "ray_over_local": rate["ray"] / rate["local"],
            "ray_start_s": ray_start_s,
            "identical": identical,
            "identical_local_threads": {actor_threads: identical, threads: same_as_threads},
        },
    )
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
