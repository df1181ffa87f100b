"""DVC stage retrieve: queries -> document runs per lane and fused; ANN recall against exact."""

from __future__ import annotations

import _bootstrap  # noqa: F401  (this checkout's src/ first on sys.path)
from ragrig.runtime import stage


def main() -> None:
    args = stage.parser(__doc__).parse_args()
    from ragrig.core.config import load_section

    stage.apply_threads(stage.read_runtime(args.params, "threads"))

    from ragrig.core.config import validate_section
    from ragrig.core.io import (
        atomic_dir,
        load_array,
        loading,
        read_faiss,
        read_json,
        read_table,
        verify_tree,
        write_json,
        write_table,
    )
    from ragrig.core.registry import resolve
    from ragrig.index import SPARSE_INDEXES
    from ragrig.retrieve import (
        check_ann,
        filter_variant_runs,
        lanes_of,
        prepare_filters,
        retrieve_all,
    )

    parse_dir, chunk_dir, embed_dir, index_dir = args.inputs
    cfg = load_section("retrieve", args.params)
    if cfg.method == "run_file":
        return from_file(args, cfg)
    index_manifest = read_json(index_dir / "manifest.json")
    sparse_cfg = validate_section(
        "index", {"dense": index_manifest["dense"], "sparse": index_manifest["sparse"]}
    ).sparse
    queries = read_table(parse_dir / "queries.parquet", "queries")
    chunks = read_table(chunk_dir / "chunks.parquet", "chunks")
    lanes = lanes_of(cfg.method)
    fusion = None
    if len(lanes) > 1:  # a tuned fusion setting applies to the corpus it was tuned on only
        from ragrig.retrieve.tuning import choose_fusion, documents_fingerprint

        corpus = documents_fingerprint(read_table(parse_dir / "documents.parquet", "documents"))
        cfg, fusion = choose_fusion(cfg, corpus)
        print(f"retrieve: {fusion.line()}")
    dense = read_faiss(index_dir / "dense.faiss") if "dense" in lanes else None
    sparse = None
    if "bm25" in lanes:
        verify_tree(index_dir / "sparse")
        with loading(index_dir / "sparse", f"{sparse_cfg.method} index"):
            sparse = resolve(SPARSE_INDEXES, sparse_cfg.method, "sparse index").load(
                index_dir / "sparse", sparse_cfg
            )
    qvecs = load_array(embed_dir / "queries.npy") if dense is not None else None
    fcfg = load_section("filters", args.params)
    chunk_doc = chunks["doc_id"].to_numpy()

    def retrieve(plan=None, label=""):
        return retrieve_all(
            cfg,
            queries["qid"].tolist(),
            queries["text"].tolist(),
            qvecs,
            dense,
            sparse,
            chunk_doc,
            chunks["chunk_id"].to_numpy(),
            plan=plan,
            label=label,
        )

    filtered = variants = None
    if fcfg.enabled:
        filtered = prepare_filters(
            fcfg,
            queries,
            read_table(parse_dir / "documents.parquet", "documents"),
            read_table(parse_dir / "qrels.parquet", "qrels"),
            chunk_doc,
        )
    run, lane_runs, latency = retrieve(filtered.plan if filtered else None)
    if filtered is not None and fcfg.compare and fcfg.preferences:
        variants = filter_variant_runs(
            fcfg, filtered, chunk_doc, lambda plan, label: retrieve(plan, label)[0]
        )
    ann, ann_fields = check_ann(
        cfg,
        dense,
        load_array(embed_dir / "chunks.npy", mmap_mode="r"),
        queries["qid"].tolist(),
        qvecs,
    )
    summary = {"method": cfg.method, "queries": len(queries), **ann_fields}
    if fusion is not None:
        summary["fusion"] = {**fusion.to_dict(), "corpus_sha256": corpus}
    if filtered is not None:
        summary["filters"] = filtered.manifest
    with atomic_dir(args.out) as out:
        write_table(run, out / "run.parquet", "run")
        write_table(lane_runs, out / "lanes.parquet", "lanes")
        write_table(latency, out / "latency.parquet", "latency")
        if ann is not None:
            write_table(ann, out / "ann_recall.parquet", "ann_recall")
        if filtered is not None:
            write_table(filtered.metadata, out / "doc_metadata.parquet", "doc_metadata")
            write_table(filtered.predicates, out / "predicates.parquet", "predicates")
        if variants is not None:
            write_table(variants, out / "filter_runs.parquet", "filter_runs")
        write_json(out / "manifest.json", summary)
    msg = f"retrieve: {cfg.method}, {run['qid'].nunique()} queries"
    if ann is not None:
        msg += f", ANN recall@{cfg.ann_recall_k} vs exact {summary['ann_recall_mean']:.4f}"
    if filtered is not None:
        f = filtered.manifest
        msg += (
            f"; filters: {f['queries_filtered_before_search']} queries filtered before search, "
            f"{f['queries_soft_boosted']} soft-boosted"
            + (
                f", {variants['variant'].nunique()} hard/soft variants"
                if variants is not None
                else ""
            )
        )
    print(msg)


def from_file(args, cfg) -> None:
    """retrieve=run_file: the team's rankings (system.run_file), checked and written as a run."""
    from pathlib import Path

    from ragrig.core.config import load_section, refuse_placeholder
    from ragrig.core.errors import ConfigError
    from ragrig.core.io import atomic_dir, load_array, read_table, write_json, write_table
    from ragrig.core.schemas import empty_table
    from ragrig.retrieve.run_file import read_run_file, run_from_file

    parse_dir, chunk_dir, embed_dir, _ = args.inputs
    if load_section("filters", args.params).enabled:
        raise ConfigError(
            "filters apply inside the pipeline's own search: retrieve=run_file reads rankings "
            "already made (set filters=none)"
        )
    path = Path(stage.read_system(args.params, "run_file"))
    refuse_placeholder(path, "system.run_file")
    queries = read_table(parse_dir / "queries.parquet", "queries")
    chunks = read_table(chunk_dir / "chunks.parquet", "chunks")
    qids = read_table(embed_dir / "query_ids.parquet", "ids")["id"].tolist()
    cids = read_table(embed_dir / "chunk_ids.parquet", "ids")["id"].tolist()
    qvecs = load_array(embed_dir / "queries.npy", mmap_mode="r")
    cvecs = load_array(embed_dir / "chunks.npy", mmap_mode="r")
    run, counts = run_from_file(
        read_run_file(path, cfg.format),
        path,
        queries["qid"].tolist(),
        chunks,
        cfg.depth,
        dict(zip(qids, qvecs, strict=True)),
        dict(zip(cids, cvecs, strict=True)),
    )
    lanes, latency = empty_table("lanes"), empty_table("latency")
    with atomic_dir(args.out) as out:
        write_table(run, out / "run.parquet", "run")
        write_table(lanes, out / "lanes.parquet", "lanes")
        write_table(latency, out / "latency.parquet", "latency")
        write_json(
            out / "manifest.json",
            {"method": cfg.method, "queries": len(queries), "exact_dense": None, "file": str(path),
             "run_file": counts},
        )  # fmt: skip
    print(
        f"retrieve: run_file {path}: {counts['queries_ranked']} queries ranked "
        f"({counts['queries_without_ranking']} without a ranking), {counts['ties']} score ties "
        f"ordered as trec_eval orders them, {counts['cut_at_depth']} rows past depth {cfg.depth}"
    )


if __name__ == "__main__":
    stage.run("retrieve", main)
