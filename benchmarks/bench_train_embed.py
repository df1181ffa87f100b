"""The bi-encoder the pipeline adapts (stage train_embed) against the packaged MiniLM it starts
from: dense, hybrid RRF and convex nDCG@10 / Recall@100 / MRR on the evaluated split, with the
committed first-stage settings (BM25 k1/b of the index section, retrieve/hybrid_rrf.yaml's rrf_k,
retrieve/hybrid_convex.yaml's alpha, all chosen on the train split), and per method the paired
per-query deltas (trained - packaged) with their 95% interval (`ragrig.metrics.deltas`).

The corpus is parsed, chunked, embedded and indexed by the pipeline's own code
(`ragrig.tools.tune_first_stage`). `--base-vectors` / `--trained-vectors` name folders holding a
chunks.npy (+ chunk_ids.parquet) already written for this corpus by each model, e.g. the embed
stage's data/embed; they are checked on a sample against a fresh encoding. Without them each
model embeds the corpus once (SciFact: ~150-200 s per model on 2 idle cores).

    python benchmarks/bench_train_embed.py --model data/train_embed/model
        [--base-vectors DIR] [--trained-vectors DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import yaml

import _common as C

METHODS = ("dense", "hybrid_rrf", "hybrid_convex")
TARGET_NDCG10 = 0.74  # issue 8: SciFact test, best CPU-only configuration


def _params_with_model(params: Path, name: str, model: str, tmp: Path) -> Path:
    raw = yaml.safe_load(params.read_text())
    raw["embed"] = {**raw["embed"], "method": "sentence_transformers", "model": model}
    out = tmp / f"params_{name}.yaml"
    out.write_text(yaml.safe_dump(raw, sort_keys=False))
    return out


def measure(
    params: Path, root: Path | None, base: str, trained: str, vectors: dict[str, Path | None]
) -> dict:
    from ragrig.core.config import load_section
    from ragrig.metrics.deltas import compare_runs
    from ragrig.retrieve.tuning import documents_fingerprint
    from ragrig.runtime import stage
    from ragrig.tools.tune_first_stage import Lanes, _composed, build_corpus, load_split, runs_of

    conf = C.PROJECT_ROOT / "conf"  # the committed RRF k and alpha (params may be elsewhere)
    sparse = load_section("index", params).sparse
    documents, split = load_split(params, load_section("dataset", params).split, root)
    corpus = documents_fingerprint(documents)  # a tuned value applies to its own corpus only
    setting = {
        "k1": sparse.k1,
        "b": sparse.b,
        "rrf_k": _composed(str(conf), "hybrid_rrf", "rrf_k", corpus),
        "alpha": _composed(str(conf), "hybrid_convex", "alpha", corpus),
    }
    runs, figures, embed_s = {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, model in (("packaged", base), ("trained", trained)):
            p = _params_with_model(params, name, model, Path(tmp))
            folder = vectors.get(name)
            corpus = build_corpus(
                documents, p, chunk_vectors=folder / "chunks.npy" if folder else None
            )
            embed_s[name] = round(corpus.embed_s, 1)
            lanes = Lanes(corpus, split, p)
            runs[name] = runs_of(lanes, setting)
            figures[name] = {m: lanes.measure(runs[name][m]) for m in ("bm25", *METHODS)}
    seed = stage.read_runtime(params, "seed")
    deltas = {
        m: compare_runs(
            runs["packaged"][m],
            runs["trained"][m],
            split.qrels,
            seed=seed,
            names=("packaged", "trained"),
            measures=("ndcg@10", "recall@100", "rr", "p@1"),
        ).metrics()
        for m in METHODS
    }
    return {
        "split": split.name,
        "queries": len(split.query_ids),
        "setting": setting,
        "models": {"packaged": base, "trained": trained},
        "figures": figures,
        "paired_deltas": deltas,
        "embed_s": embed_s,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", type=Path, default=C.DEFAULT_PARAMS)
    ap.add_argument("--dataset-root", type=Path, default=None)
    ap.add_argument("--base", default="packaged:all-MiniLM-L6-v2")
    ap.add_argument("--model", default="data/train_embed/model", help="the trained model folder")
    ap.add_argument("--base-vectors", type=Path, default=None)
    ap.add_argument("--trained-vectors", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    manifest = Path(args.model).parent / "manifest.json"
    out = {**C.header("train_embed", ["sentence-transformers", "faiss-cpu"])}
    out |= measure(
        args.params,
        args.dataset_root,
        args.base,
        args.model,
        {"packaged": args.base_vectors, "trained": args.trained_vectors},
    )
    if manifest.is_file():
        m = json.loads(manifest.read_text())
        out["training"] = {
            k: m.get(k)
            for k in (
                "examples",
                "train_seconds",
                "train_cpu_seconds",
                "pairs_per_s",
                "texts_per_s",
                "train_loss",
                "weights_sha256",
                "config",
                "dropped_eval_overlap",
                "threads",
            )
        }
    print(f"{out['split']} split, {out['queries']} queries; settings {out['setting']}")
    print(f"{'method':<14} {'model':<9} {'nDCG@10':>8} {'R@100':>7} {'MRR':>7}")
    for method in ("bm25", *METHODS):
        for name in ("packaged", "trained"):
            f = out["figures"][name][method]
            print(
                f"{method:<14} {name:<9} {f['ndcg@10']:8.4f} {f['recall@100']:7.4f} {f['rr']:7.4f}"
            )
    print("paired deltas trained - packaged (95% bootstrap interval, randomisation p):")
    for method, measures in out["paired_deltas"].items():
        for key in ("ndcg@10", "recall@100"):
            d = measures.get(key)
            if d:
                print(
                    f"  {method:<14} {key:<10} {d['delta']:+.4f} "
                    f"[{d.get('ci_low', float('nan')):+.4f}, {d.get('ci_high', float('nan')):+.4f}]"
                    f" p {d.get('p_value', float('nan')):.3f}"
                )
    best = max(
        ((n, m, out["figures"][n][m]["ndcg@10"]) for n in out["figures"] for m in METHODS),
        key=lambda t: t[2],
    )
    print(
        f"best: {best[1]} with the {best[0]} embedder, nDCG@10 {best[2]:.4f} "
        f"(target {TARGET_NDCG10})"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
