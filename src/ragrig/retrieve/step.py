"""The retrieve stage's computation."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ragrig.retrieve.base import Hits, fuse, to_documents
from ragrig.retrieve.filters import FilterPlan


def lanes_of(method: str) -> tuple[str, ...]:
    return {
        "dense": ("dense",),
        "bm25": ("bm25",),
        "hybrid_rrf": ("dense", "bm25"),
        "hybrid_convex": ("dense", "bm25"),
    }[method]


def retrieve_all(
    cfg: Any,
    query_ids: list[str],
    query_texts: list[str],
    query_vectors: np.ndarray | None,
    dense_index: Any | None,
    sparse_index: Any | None,
    chunk_doc: np.ndarray,
    chunk_ids: np.ndarray,
    progress: bool = True,
    plan: FilterPlan | None = None,
    label: str = "",
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Run the configured method query by query. Returns (final run, lanes, latency).

    `plan`: each query's metadata filter (ragrig.retrieve.filters): its hard predicate restricts
    the chunk rows both lanes search, its soft boosts re-rank the final list."""
    from ragrig.core.progress import track
    from ragrig.index.dense import search, search_within, set_search_params

    lanes_wanted = lanes_of(cfg.method)
    if "dense" in lanes_wanted:
        set_search_params(dense_index, cfg.ef_search, cfg.nprobe)
    run_rows, lane_rows, lat_rows = [], [], []
    title = f"retrieve {cfg.method}" + (f" ({label})" if label else "")
    qids = track(query_ids, title, "queries") if progress else query_ids
    for i, qid in enumerate(qids):
        t0 = time.perf_counter()
        allowed = plan.queries[qid].rows if plan is not None and qid in plan.queries else None
        lanes: dict[str, list[tuple[str, str, float]]] = {}
        if "dense" in lanes_wanted:
            q = query_vectors[i : i + 1]
            scores, rows = (
                search(dense_index, q, cfg.chunk_depth)
                if allowed is None
                else search_within(
                    dense_index, q, cfg.chunk_depth, allowed, cfg.ef_search, cfg.nprobe
                )
            )
            lanes["dense"] = to_documents(Hits(rows[0], scores[0]), chunk_doc, chunk_ids, cfg.depth)
        if "bm25" in lanes_wanted:
            scores, rows = (
                sparse_index.search([query_texts[i]], cfg.chunk_depth)
                if allowed is None
                else sparse_index.search([query_texts[i]], cfg.chunk_depth, allowed)
            )
            lanes["bm25"] = to_documents(Hits(rows[0], scores[0]), chunk_doc, chunk_ids, cfg.depth)
        final = lanes[lanes_wanted[0]] if len(lanes_wanted) == 1 else fuse(cfg.method, lanes, cfg)
        if plan is not None:
            final = plan.boost(qid, final)
        lat_rows.append(
            {"qid": qid, "stage": "retrieve", "latency_ms": (time.perf_counter() - t0) * 1e3}
        )
        for rank, (doc, chunk, score) in enumerate(final, start=1):
            run_rows.append(
                {"qid": qid, "doc_id": doc, "chunk_id": chunk, "score": score, "rank": rank}
            )
        for name, lane in lanes.items():
            for rank, (doc, chunk, score) in enumerate(lane, start=1):
                lane_rows.append(
                    {
                        "lane": name,
                        "qid": qid,
                        "doc_id": doc,
                        "chunk_id": chunk,
                        "score": score,
                        "rank": rank,
                    }
                )
    cols = ["qid", "doc_id", "chunk_id", "score", "rank"]
    return (
        pd.DataFrame(run_rows, columns=cols),
        pd.DataFrame(lane_rows, columns=["lane", *cols]),
        pd.DataFrame(lat_rows, columns=["qid", "stage", "latency_ms"]),
    )


def ann_recall(
    approx_index: Any,
    exact_index: Any,
    query_ids: list[str],
    query_vectors: np.ndarray,
    ks: list[int],
) -> tuple[pd.DataFrame, dict[str, float]]:
    """Recall@k of the approximate index's chunk neighbours against exact search, per query and
    k, with mean per-query latency (ms) of each index searched one query at a time at max(ks)."""
    from ragrig.index.dense import search

    rows = []
    t_approx = t_exact = 0.0
    depth = max(ks)
    for i, qid in enumerate(query_ids):
        t0 = time.perf_counter()
        _, a = search(approx_index, query_vectors[i : i + 1], depth)
        t1 = time.perf_counter()
        _, e = search(exact_index, query_vectors[i : i + 1], depth)
        t2 = time.perf_counter()
        t_approx += t1 - t0
        t_exact += t2 - t1
        for k in sorted(set(ks)):
            truth = set(e[0][:k][e[0][:k] >= 0].tolist())
            found = set(a[0][:k][a[0][:k] >= 0].tolist())
            rows.append(
                {"qid": qid, "k": k, "recall": len(truth & found) / len(truth) if truth else 1.0}
            )
    n = max(len(query_ids), 1)
    timing = {"approx_ms": t_approx / n * 1e3, "exact_ms": t_exact / n * 1e3}
    return pd.DataFrame(rows, columns=["qid", "k", "recall"]), timing


def check_ann(
    cfg: Any,
    dense_index: Any | None,
    chunk_vectors: np.ndarray,
    query_ids: list[str],
    query_vectors: np.ndarray | None,
) -> tuple[pd.DataFrame | None, dict[str, Any]]:
    """ANN recall of the dense index against exact search over the same chunk vectors.

    Returns (per-query table or None, manifest fields). No dense lane: `exact_dense` None, no
    table. An exact (flat) index: `exact_dense` True, no table. An approximate index: recall at
    the reported k (`ann_recall_k`) and at the depth each lane fetches (`chunk_depth`), with
    `ann_recall_mean` at the reported k and the mean per-query latency of both indexes.
    `chunk_vectors` is only read for an approximate index (a memory-mapped array costs nothing
    otherwise).
    """
    from ragrig.index.dense import build_flat, is_exact, set_search_params

    if dense_index is None:
        return None, {"exact_dense": None}
    if is_exact(dense_index):
        return None, {"exact_dense": True}
    exact = build_flat(np.ascontiguousarray(chunk_vectors, dtype=np.float32), None)
    set_search_params(dense_index, cfg.ef_search, cfg.nprobe)
    ks = sorted({cfg.ann_recall_k, cfg.chunk_depth})
    table, timing = ann_recall(dense_index, exact, query_ids, query_vectors, ks)
    mean = float(table.loc[table["k"] == cfg.ann_recall_k, "recall"].mean())
    return table, {"exact_dense": False, "ann_recall_mean": mean, **timing}


@dataclass(frozen=True)
class Filtered:
    """The filters of one retrieve run: the plan it applies and the tables the report reads."""

    plan: FilterPlan
    metadata: pd.DataFrame  # doc_metadata
    predicates: pd.DataFrame  # predicates
    manifest: dict[str, Any]
    by_query: dict[str, dict[str, Any]]  # qid -> predicate


def prepare_filters(
    fcfg: Any,
    queries: pd.DataFrame,
    documents: pd.DataFrame,
    qrels: pd.DataFrame,
    chunk_doc: np.ndarray,
) -> Filtered:
    """Documents' metadata, queries' predicates and the configured plan (filters.enabled)."""
    from ragrig.retrieve.filters import (
        build_plan,
        document_metadata,
        metadata_table,
        predicates_table,
        query_predicates,
    )

    metadata = document_metadata(documents, fcfg)
    positive = qrels[qrels["relevance"] > 0]
    gold = {str(q): [str(d) for d in g["doc_id"]] for q, g in positive.groupby("qid", sort=True)}
    predicates = query_predicates(queries, gold, metadata, fcfg)
    plan = build_plan(predicates, metadata, fcfg, chunk_doc)
    before = [q for q, f in plan.queries.items() if f.rows is not None]
    manifest = {
        "metadata_fields": sorted({f for m in metadata.values() for f in m}),
        "eligibility": dict(fcfg.eligibility),
        "eligibility_enforced": fcfg.enforce_eligibility,
        "modes": dict(plan.modes),
        "queries_with_predicate": sum(1 for p in predicates.values() if p),
        "queries_filtered_before_search": len(before),
        "queries_soft_boosted": sum(1 for f in plan.queries.values() if f.soft),
    }
    table = predicates_table(predicates, plan.modes)
    return Filtered(plan, metadata_table(metadata), table, manifest, predicates)


def filter_variant_runs(
    fcfg: Any,
    filtered: Filtered,
    chunk_doc: np.ndarray,
    retrieve: Callable[[FilterPlan, str], pd.DataFrame],
) -> pd.DataFrame:
    """Each preference retrieved hard and soft (the others as configured) on the same queries:
    the runs the report's hard-or-soft rule compares. `retrieve(plan, label)` gives a run."""
    from ragrig.retrieve.filters import build_plan, variant_modes

    frames = []
    for name, modes in variant_modes(fcfg).items():
        plan = build_plan(filtered.by_query, filtered.plan.metadata, fcfg, chunk_doc, modes)
        frames.append(retrieve(plan, name).assign(variant=name))
    cols = ["variant", "qid", "doc_id", "chunk_id", "score", "rank"]
    if not frames:
        return pd.DataFrame(columns=cols)
    return pd.concat(frames, ignore_index=True)[cols]
