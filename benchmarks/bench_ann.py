"""Dense ANN on SciFact: HNSW and IVF vs exact IndexFlatIP, and dense / BM25 / hybrid quality.

The SciFact chunk embeddings (one chunk per document, content = title + '. ' + text) are computed
once with ragrig's embedder and the embed section of params.yaml, and cached as .npy under
--cache-dir (keyed by model, settings and a digest of the texts). Queries are encoded one at a
time, as the embed stage does.

* HNSW (M and efConstruction from params.yaml's index.dense, default 32 / 200) for each efSearch:
  recall@10 against exact search and mean per-query latency of both, one query at a time,
  measured side by side by ragrig.retrieve.ann_recall; medians of interleaved repeats.
* IVF (nlist=64) for each nprobe, the same way.
* nDCG@10 / Recall@100 of dense (HNSW, the pipeline's default efSearch), BM25 (bm25s), hybrid RRF
  and hybrid convex through ragrig.retrieve.retrieve_all. Check: hybrid RRF nDCG@10 >= the better
  lane.
* A plot of recall@10 vs latency (benchmarks/ann_recall_latency.png by default).

    python benchmarks/bench_ann.py [--ef 16 32 64 128 256] [--nprobe 1 4 8 16] [--repeats 5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import _common as C

DEFAULT_CACHE = Path("/tmp/ragrig-bench-cache")
DEFAULT_PLOT = Path(__file__).resolve().parent / "ann_recall_latency.png"
METHODS = ["dense", "bm25", "hybrid_rrf", "hybrid_convex"]
MEASURES = ["ndcg@10", "recall@100"]


def embeddings(data, cfg, cache_dir: Path, threads: int):
    """(chunk vectors, query vectors, per-query encode ms, seconds spent, cache hit?)."""
    import numpy as np

    from ragrig.embed import encode_queries_timed, make_embedder
    from ragrig.weights.models import model_fingerprint

    texts = data.chunks["text"].tolist()
    digest = hashlib.sha256()
    for t in [*texts, "\x00queries\x00", *data.query_texts]:
        digest.update(t.encode("utf-8") + b"\x00")
    fingerprint = model_fingerprint(cfg.model)
    key = hashlib.sha256(
        json.dumps(
            {"cfg": cfg.model_dump(), "model": fingerprint, "texts": digest.hexdigest()},
            sort_keys=True,
        ).encode()
    ).hexdigest()[:16]
    folder = cache_dir / f"emb-{key}"
    print(f"embeddings cache: {folder}", flush=True)
    if (folder / "chunks.npy").exists() and (folder / "queries.npy").exists():
        meta = json.loads((folder / "meta.json").read_text())
        return (
            np.load(folder / "chunks.npy"),
            np.load(folder / "queries.npy"),
            meta["query_ms"],
            0.0,
            True,
        )
    t0 = time.perf_counter()
    passages = make_embedder(cfg, role="passage")
    chunk_vecs = passages.encode(texts)
    query_vecs, query_ms = encode_queries_timed(
        passages.with_prefix(cfg.query_prefix), data.query_texts, progress=False
    )
    seconds = time.perf_counter() - t0
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "chunks.npy", chunk_vecs)
    np.save(folder / "queries.npy", query_vecs)
    (folder / "meta.json").write_text(
        json.dumps(
            {
                "cfg": cfg.model_dump(),
                "model": fingerprint,
                "seconds": seconds,
                "threads": threads,
                "query_ms": query_ms,
            }
        )
    )
    return chunk_vecs, query_vecs, query_ms, seconds, False


def sweep(index, exact, qids, qvecs, k, settings, param, repeats, deep_k, dense_quality):
    """Per setting: recall@k (deterministic) and median approx / exact latency over repeats;
    then, untimed, recall@deep_k (the retrieve stage's chunk_depth) and the dense lane's quality."""
    from ragrig.index.dense import set_search_params
    from ragrig.retrieve import ann_recall

    timings = {s: {"approx_ms": [], "exact_ms": []} for s in settings}
    recall = {}
    for r in range(repeats):
        for s in settings if r % 2 == 0 else settings[::-1]:
            set_search_params(index, ef_search=s, nprobe=s)  # each index reads only its own
            table, timing = ann_recall(index, exact, qids, qvecs, [k])
            recall[s] = float(table["recall"].mean())
            for key in ("approx_ms", "exact_ms"):
                timings[s][key].append(timing[key])
    out = []
    for s in settings:
        set_search_params(index, ef_search=s, nprobe=s)
        deep, _ = ann_recall(index, exact, qids, qvecs, [deep_k])
        quality = dense_quality(index, s)
        a, e = C.median(timings[s]["approx_ms"]), C.median(timings[s]["exact_ms"])
        out.append(
            {
                param: s,
                f"recall@{k}": round(recall[s], 4),
                "approx_ms": round(a, 4),
                "exact_ms": round(e, 4),
                "speedup_vs_exact": round(e / a, 2),
                f"recall@{deep_k}": round(float(deep["recall"].mean()), 4),
                "dense_ndcg@10": quality["ndcg@10"],
                "dense_recall@100": quality["recall@100"],
                "approx_ms_runs": [round(x, 4) for x in timings[s]["approx_ms"]],
                "exact_ms_runs": [round(x, 4) for x in timings[s]["exact_ms"]],
            }
        )
    return out


def _table_rows(rows: list[dict], param: str, k: int, deep_k: int) -> list[list]:
    keys = [
        param,
        f"recall@{k}",
        "approx_ms",
        "exact_ms",
        "speedup_vs_exact",
        f"recall@{deep_k}",
        "dense_ndcg@10",
        "dense_recall@100",
    ]
    return [[r[key] for key in keys] for r in rows]


def plot(path: Path, hnsw_rows, ivf_rows, exact_ms, k, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for rows, param, label, marker in (
        (hnsw_rows, "efSearch", "HNSW", "o"),
        (ivf_rows, "nprobe", "IVF", "s"),
    ):
        xs = [r["approx_ms"] for r in rows]
        ys = [r[f"recall@{k}"] for r in rows]
        ax.plot(xs, ys, marker=marker, label=label)
        for r, x, y in zip(rows, xs, ys, strict=True):
            ax.annotate(
                f"{param}={r[param]}",
                (x, y),
                textcoords="offset points",
                xytext=(4, -10),
                fontsize=7,
            )
    ax.axvline(
        exact_ms, color="grey", linestyle="--", label=f"exact IndexFlatIP ({exact_ms:.3f} ms)"
    )
    ax.set_xlabel("mean latency per query (ms, one query at a time)")
    ax.set_ylabel(f"recall@{k} vs exact")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.margins(x=0.15)
    ax.legend(loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    C.add_common_args(p)
    p.add_argument(
        "--ef", type=int, nargs="+", default=[16, 32, 64, 128, 256], help="HNSW efSearch values"
    )
    p.add_argument("--nprobe", type=int, nargs="+", default=[1, 4, 8, 16], help="IVF nprobe values")
    p.add_argument("--nlist", type=int, default=64, help="IVF lists")
    p.add_argument("--k", type=int, default=None, help="recall@k (default: retrieve.ann_recall_k)")
    p.add_argument("--repeats", type=int, default=5, help="timed passes per setting (interleaved)")
    p.add_argument(
        "--cache-dir", type=Path, default=DEFAULT_CACHE, help="where embeddings are cached"
    )
    p.add_argument("--plot", type=Path, default=DEFAULT_PLOT, help="recall vs latency plot (PNG)")
    args = p.parse_args(argv)

    C.setup_env()
    threads = C.apply_threads(args.params, torch=True)

    import faiss

    from ragrig.core.config import load_params, load_section, validate_section
    from ragrig.core.registry import resolve
    from ragrig.index import SPARSE_INDEXES
    from ragrig.index.config import DenseHnsw, DenseIvf
    from ragrig.index.dense import build_flat, build_hnsw, build_ivf, set_search_params
    from ragrig.metrics.ir import mean_measures, rankings_from_run
    from ragrig.retrieve import retrieve_all

    embed_cfg = load_section("embed", args.params)
    index_cfg = load_section("index", args.params)
    retrieve_raw = load_params(args.params)["retrieve"]
    hnsw_cfg = index_cfg.dense if isinstance(index_cfg.dense, DenseHnsw) else DenseHnsw()
    ivf_cfg = DenseIvf(nlist=args.nlist)
    k = args.k or int(retrieve_raw.get("ann_recall_k", 10))

    data = C.load_dataset(args.dataset_root, args.params)
    vecs, qvecs, query_ms, embed_s, cached = embeddings(data, embed_cfg, args.cache_dir, threads)
    print(
        f"embeddings: {vecs.shape[0]} x {vecs.shape[1]} ({'cache' if cached else f'{embed_s:.0f} s'})",
        flush=True,
    )
    qids = data.query_ids

    builds = {}
    t0 = time.perf_counter()
    exact = build_flat(vecs, None)
    builds["flat"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    hnsw = build_hnsw(vecs, hnsw_cfg)
    builds["hnsw"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ivf = build_ivf(vecs, ivf_cfg)
    builds["ivf"] = time.perf_counter() - t0
    print("builds: " + ", ".join(f"{n} {s:.2f} s" for n, s in builds.items()), flush=True)

    common = {
        key: retrieve_raw[key]
        for key in ("depth", "chunk_depth", "ann_recall_k")
        if key in retrieve_raw
    }
    dense_search = {
        key: retrieve_raw[key] for key in ("ef_search", "nprobe") if key in retrieve_raw
    }
    chunk_doc = data.chunks["doc_id"].to_numpy()
    chunk_ids = data.chunks["chunk_id"].to_numpy()
    deep_k = validate_section("retrieve", {"method": "dense", **common}).chunk_depth

    def dense_quality(index, setting):
        """nDCG@10 / R@100 of the dense lane through retrieve_all at this efSearch / nprobe."""
        cfg = validate_section(
            "retrieve", {"method": "dense", **common, "ef_search": setting, "nprobe": setting}
        )
        run, _, _ = retrieve_all(
            cfg, qids, data.query_texts, qvecs, index, None, chunk_doc, chunk_ids, progress=False
        )
        return {
            m: round(v, 4)
            for m, v in mean_measures(rankings_from_run(run), data.qrels, MEASURES).items()
        }

    hnsw_rows = sweep(
        hnsw, exact, qids, qvecs, k, list(args.ef), "efSearch", args.repeats, deep_k, dense_quality
    )
    ivf_rows = sweep(
        ivf, exact, qids, qvecs, k, list(args.nprobe), "nprobe", args.repeats, deep_k, dense_quality
    )
    exact_ms = C.median([r["exact_ms"] for r in hnsw_rows + ivf_rows])

    # Retrieval quality through the retrieve stage's own code path.
    sparse = resolve(SPARSE_INDEXES, index_cfg.sparse.method, "sparse index").build(
        data.chunks["text"].tolist(), index_cfg.sparse
    )
    quality = []
    for dense_name, dense_index in (("hnsw", hnsw), ("exact", exact)):
        for method in METHODS:
            if dense_name == "exact" and method == "bm25":
                continue
            raw = {"method": method, **common, **({} if method == "bm25" else dense_search)}
            if method == "hybrid_rrf" and "rrf_k" in retrieve_raw:
                raw["rrf_k"] = retrieve_raw["rrf_k"]
            cfg = validate_section("retrieve", raw)
            # As the retrieve stage: a BM25-only run gets no dense index (retrieve_all would read
            # ef_search from a config that has none).
            run, _, lat = retrieve_all(
                cfg,
                qids,
                data.query_texts,
                qvecs,
                None if method == "bm25" else dense_index,
                sparse,
                chunk_doc,
                chunk_ids,
                progress=False,
            )
            m = mean_measures(rankings_from_run(run), data.qrels, MEASURES)
            quality.append(
                {
                    "method": method,
                    "dense_index": "-" if method == "bm25" else dense_name,
                    "ndcg@10": round(m["ndcg@10"], 4),
                    "recall@100": round(m["recall@100"], 4),
                    "median_retrieve_ms": round(float(lat["latency_ms"].median()), 4),
                    "config": cfg.model_dump(),
                }
            )
    set_search_params(hnsw, dense_search.get("ef_search", 128), dense_search.get("nprobe", 8))

    by = {(q["method"], q["dense_index"]): q["ndcg@10"] for q in quality}
    rrf_check = {}
    for dense_name in ("hnsw", "exact"):
        best_lane = max(by[("dense", dense_name)], by[("bm25", "-")])
        rrf = by[("hybrid_rrf", dense_name)]
        rrf_check[dense_name] = {
            "hybrid_rrf_ndcg@10": rrf,
            "best_lane_ndcg@10": best_lane,
            "met": rrf >= best_lane,
        }

    title = (
        f"{args.dataset_root.name} {vecs.shape[0]} x {vecs.shape[1]}, recall@{k} vs exact, {threads} threads, "
        f"median of {args.repeats}"
    )
    plot(args.plot, hnsw_rows, ivf_rows, exact_ms, k, title)

    result = {
        **C.header("ann", ["faiss-cpu", "sentence-transformers", "torch", "bm25s", "matplotlib"]),
        "config": {
            "vectors": int(vecs.shape[0]),
            "dim": int(vecs.shape[1]),
            "queries": len(qids),
            "k": k,
            "chunk_depth": deep_k,
            "repeats": args.repeats,
            "threads": threads,
            "faiss_omp_threads": faiss.omp_get_max_threads(),
            "hnsw": hnsw_cfg.model_dump(),
            "ivf": ivf_cfg.model_dump(),
            "embed": embed_cfg.model_dump(),
            "embeddings_cached": cached,
            "embed_seconds": round(embed_s, 2),
        },
        "median_query_encode_ms": round(C.median(query_ms), 3),
        "build_s": {n: round(s, 4) for n, s in builds.items()},
        "exact_ms_median": round(exact_ms, 4),
        "hnsw": hnsw_rows,
        "ivf": ivf_rows,
        "quality": quality,
        "hybrid_rrf_at_least_best_lane": rrf_check,
        "target_met": all(v["met"] for v in rrf_check.values()),
        "plot": str(args.plot),
    }

    C.print_table(
        f"HNSW M={hnsw_cfg.m} efConstruction={hnsw_cfg.ef_construction} vs exact IndexFlatIP "
        f"({vecs.shape[0]} vectors, {len(qids)} queries, one at a time, median of {args.repeats})",
        [
            "efSearch",
            f"recall@{k}",
            "HNSW ms/q",
            "exact ms/q",
            "speed-up",
            f"recall@{deep_k}",
            "dense nDCG@10",
            "dense R@100",
        ],
        _table_rows(hnsw_rows, "efSearch", k, deep_k),
    )
    C.print_table(
        f"IVF nlist={ivf_cfg.nlist} vs exact IndexFlatIP",
        [
            "nprobe",
            f"recall@{k}",
            "IVF ms/q",
            "exact ms/q",
            "speed-up",
            f"recall@{deep_k}",
            "dense nDCG@10",
            "dense R@100",
        ],
        _table_rows(ivf_rows, "nprobe", k, deep_k),
    )
    print("index build s: " + ", ".join(f"{n} {s:.3f}" for n, s in builds.items()))
    C.print_table(
        f"Retrieval quality on {args.dataset_root.name} (retrieve_all; efSearch "
        f"{dense_search.get('ef_search')}, depth {common.get('depth')})",
        ["method", "dense index", "nDCG@10", "R@100", "median ms/q"],
        [
            [q["method"], q["dense_index"], q["ndcg@10"], q["recall@100"], q["median_retrieve_ms"]]
            for q in quality
        ],
    )
    for dense_name, chk in rrf_check.items():
        print(
            f"hybrid RRF ({dense_name}) nDCG@10 {chk['hybrid_rrf_ndcg@10']:.4f} vs best lane "
            f"{chk['best_lane_ndcg@10']:.4f}: {'met' if chk['met'] else 'NOT met'}"
        )
    print(f"plot: {args.plot}")
    C.write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
