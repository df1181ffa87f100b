"""The rerank stage's computation."""

from __future__ import annotations

import time

import pandas as pd

from ragrig.rerank.base import Candidate, Reranker


def rerank_run(
    run: pd.DataFrame,
    queries: dict[str, str],
    chunk_text: dict[str, str],
    reranker: Reranker,
    depth: int | None,
    progress: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rerank the top `depth` documents of every query; the tail keeps its order below them.

    Returns (run, latency). The candidate set per query is identical before and after.
    """
    from ragrig.core.progress import track

    rows, lat = [], []
    ordered = run.sort_values(["qid", "rank"], kind="mergesort")
    groups = ordered.groupby("qid", sort=True)
    for qid, group in track(groups, "rerank", "queries") if progress else groups:
        cands = [
            Candidate(d, c, chunk_text[c], float(s))
            for d, c, s in zip(group["doc_id"], group["chunk_id"], group["score"], strict=True)
        ]
        cut = len(cands) if depth is None else min(depth, len(cands))
        t0 = time.perf_counter()
        head = reranker.rerank(queries[qid], cands[:cut])
        lat.append({"qid": qid, "stage": "rerank", "latency_ms": (time.perf_counter() - t0) * 1e3})
        if sorted(c.doc_id for c in head) != sorted(c.doc_id for c in cands[:cut]):
            raise RuntimeError(f"reranker changed the candidate set of query {qid!r}")
        for rank, c in enumerate(head + cands[cut:], start=1):
            rows.append(
                {
                    "qid": qid,
                    "doc_id": c.doc_id,
                    "chunk_id": c.chunk_id,
                    "score": c.score,
                    "rank": rank,
                }
            )
    return (
        pd.DataFrame(rows, columns=["qid", "doc_id", "chunk_id", "score", "rank"]),
        pd.DataFrame(lat, columns=["qid", "stage", "latency_ms"]),
    )
