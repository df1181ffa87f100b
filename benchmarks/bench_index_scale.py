"""Dense indexes for millions of vectors: IVF-PQ and HNSW-SQ against exact search.

Generates --n seeded, clustered, L2-normalised vectors of --dim dimensions (--clusters centres,
each point varying around its centre in a shared 16-dimensional subspace plus a little isotropic
noise, as sentence embeddings have a low intrinsic dimension; --queries query vectors drawn from
the same mixture), computes the exact
top-10 of every query with a flat inner-product index, then builds each configuration through
the pipeline's own builders (`ragrig.index.dense`, as `index/dense=ivf_pq | hnsw_sq` builds it)
and measures, per configuration:

* build seconds (training on the configured seeded sample, then adding every vector);
* bytes per vector of the serialised index (codes, graph or lists, ids, quantisers);
* peak resident memory of the process that built and searched it (each configuration runs in
  its own process, so one's memory is not another's; the vectors themselves are part of it:
  `vectors_bytes` says how much);
* for each nprobe / efSearch: recall@10 against exact search and query latency (one query at a
  time, --search-threads threads, as the retrieve stage searches), p50 and p95 ms.

It then names, per configuration, the smallest nprobe / efSearch whose recall@10 is >= 0.95
(the issue's bar for the defaults).

    python benchmarks/bench_index_scale.py [--n 1000000] [--dim 384] [--queries 1000]
        [--threads 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import statistics
import tempfile
import time
from pathlib import Path

import _common as C

TARGET_RECALL = 0.95
# (name, index/dense section, the search knob, its values)
DEFAULT_CONFIGS = [
    ("ivf_pq", {"method": "ivf_pq", "nlist": 4096, "pq_m": 48}, "nprobe", [16, 32, 64, 128]),
    (
        "ivf_pq+sq8",
        {"method": "ivf_pq", "nlist": 4096, "pq_m": 48, "refine": "sq8", "k_factor": 4},
        "nprobe",
        [16, 32, 64, 128],
    ),
    (
        "hnsw_sq",
        {"method": "hnsw_sq", "m": 32, "ef_construction": 200, "build_threads": 2},
        "ef_search",
        [32, 64, 128, 256],
    ),
]


LATENT_DIM = 16  # the mixture's points vary in a 16-d subspace, as embeddings do, plus noise


def make_vectors(n: int, dim: int, clusters: int, seed: int, draw_seed: int, spread: float = 0.5):
    """n unit vectors (float32): centre + spread x (a point of a shared 16-d subspace) + a
    little isotropic noise, around `clusters` centres. `seed` fixes the centres and the
    subspace, `draw_seed` the points (base set and queries share centres, not points). In
    blocks of 100,000 to bound the memory used."""
    import numpy as np

    fixed = np.random.default_rng(seed)
    centres = fixed.standard_normal((clusters, dim)).astype(np.float32)
    basis = (fixed.standard_normal((LATENT_DIM, dim)) / np.sqrt(LATENT_DIM)).astype(np.float32)
    rng = np.random.default_rng(draw_seed)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 100_000):
        m = min(start + 100_000, n) - start
        x = centres[rng.integers(0, clusters, m)]
        x = x + spread * (rng.standard_normal((m, LATENT_DIM)).astype(np.float32) @ basis)
        x = x + 0.1 * spread * rng.standard_normal((m, dim)).astype(np.float32)
        out[start : start + m] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def _data(args: dict):
    """(base vectors, query vectors): the same mixture, two independent draws."""
    make = make_vectors
    base = make(args["n"], args["dim"], args["clusters"], args["seed"], args["seed"] + 1)
    queries = make(args["queries"], args["dim"], args["clusters"], args["seed"], args["seed"] + 2)
    return base, queries


def _exact(args: dict, out: Path) -> None:
    """Child process: the exact top-10 of every query (flat inner product), saved to `out`."""
    import faiss
    import numpy as np

    faiss.omp_set_num_threads(args["threads"])
    base, queries = _data(args)
    index = faiss.IndexFlatIP(base.shape[1])
    index.add(base)
    t0 = time.perf_counter()
    _, ids = index.search(queries, 10)
    np.save(out, ids)
    out.with_suffix(".json").write_text(
        json.dumps(
            {
                "exact_search_s": time.perf_counter() - t0,
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        ),
        encoding="utf-8",
    )


def _measure(args: dict, name: str, section: dict, knob: str, values: list, gt: Path, out: Path):
    """Child process: build one configuration, search at each knob value, write the figures."""
    import faiss
    import numpy as np

    from ragrig.core.config import validate_section
    from ragrig.core.registry import resolve
    from ragrig.index import DENSE_INDEXES
    from ragrig.index.dense import search, set_search_params

    base, queries = _data(args)
    truth = np.load(gt)
    cfg = validate_section("index", {"dense": section, "sparse": {"method": "bm25s"}}).dense
    faiss.omp_set_num_threads(args["threads"])
    t0 = time.perf_counter()
    index = resolve(DENSE_INDEXES, cfg.method, "dense index")(base, cfg)
    build_s = time.perf_counter() - t0
    index_bytes = len(faiss.serialize_index(index))
    faiss.omp_set_num_threads(args["search_threads"])
    rows = []
    for v in values:
        set_search_params(index, v if knob == "ef_search" else 16, v if knob == "nprobe" else 1)
        lat, found = [], []
        for i in range(len(queries)):
            q0 = time.perf_counter()
            _, ids = search(index, queries[i : i + 1], 10)
            lat.append((time.perf_counter() - q0) * 1e3)
            found.append(ids[0])
        recall = statistics.fmean(
            len(set(found[i]) & set(truth[i])) / 10 for i in range(len(queries))
        )
        lat.sort()
        rows.append(
            {
                knob: v,
                "recall@10": round(recall, 4),
                "query_ms_p50": round(lat[len(lat) // 2], 3),
                "query_ms_p95": round(lat[min(len(lat) - 1, int(0.95 * len(lat)))], 3),
            }
        )
    result = {
        "name": name,
        "config": cfg.model_dump(),
        "knob": knob,
        "build_s": round(build_s, 2),
        "bytes_per_vector": round(index_bytes / len(base), 2),
        "float32_bytes_per_vector": 4 * base.shape[1],
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "vectors_bytes_mb": round(base.nbytes / 2**20, 1),
        "search": rows,
        "smallest_meeting_target": next(
            (r[knob] for r in rows if r["recall@10"] >= TARGET_RECALL), None
        ),
    }
    out.write_text(json.dumps(result), encoding="utf-8")


def _in_child(target, *args) -> None:
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=target, args=args)
    p.start()
    p.join()
    if p.exitcode != 0:
        raise RuntimeError(f"{target.__name__}{args[1:2]} failed with exit code {p.exitcode}")


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--clusters", type=int, default=1000)
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--threads", type=int, default=2, help="threads for building")
    p.add_argument("--search-threads", type=int, default=1, help="threads per query")
    p.add_argument(
        "--config",
        action="append",
        default=None,
        metavar="JSON",
        help='replace the configurations: {"name": .., "dense": {..}, "knob": "nprobe" | '
        '"ef_search", "values": [..]} (repeatable)',
    )
    # run_all passes these to every benchmark; this one generates its data
    p.add_argument("--params", type=Path, default=None, help="unused (synthetic data)")
    p.add_argument("--dataset-root", type=Path, default=None, help="unused (synthetic data)")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    C.setup_env()
    configs = (
        [(c["name"], c["dense"], c["knob"], c["values"]) for c in map(json.loads, args.config)]
        if args.config
        else DEFAULT_CONFIGS
    )
    shared = {
        k: getattr(args, k)
        for k in ("n", "dim", "clusters", "queries", "seed", "threads", "search_threads")
    }
    results = []
    with tempfile.TemporaryDirectory(prefix="ragrig-index-scale-") as tmp:
        gt = Path(tmp) / "truth.npy"
        _in_child(_exact, shared, gt)
        exact = json.loads(gt.with_suffix(".json").read_text())
        for name, section, knob, values in configs:
            out = Path(tmp) / f"{name}.json"
            print(f"building {name} over {args.n:,} vectors ...", flush=True)
            _in_child(_measure, shared, name, section, knob, values, gt, out)
            results.append(json.loads(out.read_text()))
    rows = [
        [
            r["name"],
            f"{r['knob']}={s[r['knob']]}",
            s["recall@10"],
            s["query_ms_p50"],
            s["query_ms_p95"],
            r["build_s"],
            r["bytes_per_vector"],
            r["peak_rss_mb"],
        ]
        for r in results
        for s in r["search"]
    ]
    C.print_table(
        f"{args.n:,} clustered {args.dim}-d vectors, {args.queries} queries, recall@10 vs exact "
        f"search ({exact['exact_search_s']:.1f} s for all queries)",
        ["index", "search", "recall@10", "ms p50", "ms p95", "build s", "B/vector", "peak MB"],
        rows,
    )
    for r in results:
        print(
            f"{r['name']}: smallest {r['knob']} with recall@10 >= {TARGET_RECALL}: "
            f"{r['smallest_meeting_target']}"
        )
    result = {
        **C.header("index_scale", ["faiss-cpu", "numpy"]),
        "config": shared,
        "exact": exact,
        "results": results,
        "target_recall@10": TARGET_RECALL,
    }
    C.write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
