"""Report outputs for other tools and for paired comparison: the reranker's deltas against no
reranking, and every run (each lane, the fused retrieve run, the final run) as TREC files.

The rerank stage reorders the retrieve stage's candidates, so the retrieve run and the rerank
run hold the same queries and the same candidate sets: their per-query delta is the reranker's
effect alone (with `rerank=identity` it is exactly 0 for every query).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from ragrig.core.io import atomic_write_text
from ragrig.metrics.deltas import Comparison, compare_runs
from ragrig.metrics.ir import qrels_from_table, rankings_from_run
from ragrig.metrics.trec import write_trec_qrels, write_trec_run

RERANK_NAMES = ("retrieve", "rerank")
TREC_DIR = "trec"
FINAL_RUN = "final.run"  # the run after rerank, which the report's retrieval metrics measure
QRELS_FILE = "qrels.txt"


def rerank_comparison(inp: Any, report: Any, seed: int) -> Comparison:
    """Paired deltas of the rerank run against the retrieve run, overall and per report slice."""
    names = list(report.metrics.get("slices", {}))
    slices = report.per_query[["qid", *names]].drop_duplicates("qid") if names else None
    return compare_runs(
        rankings_from_run(inp.retrieved),
        rankings_from_run(inp.reranked),
        qrels_from_table(inp.qrels),
        seed=seed,
        names=RERANK_NAMES,
        slices=slices,
        slice_names=names,
    )


def write_deltas(c: Comparison, out: Path) -> list[Path]:
    """deltas.csv (one row per slice, value and measure) and deltas.json; returns their paths."""
    csv_path, json_path = out / "deltas.csv", out / "deltas.json"
    c.summary.to_csv(csv_path, index=False, float_format="%.6f")
    atomic_write_text(json_path, json.dumps(c.as_dict(), indent=2, sort_keys=False) + "\n")
    return [csv_path, json_path]


def write_trec_files(inp: Any, out: Path) -> list[Path]:
    """trec/<lane>.run for each retrieval lane, trec/retrieve.run (before rerank),
    trec/final.run (after rerank) and trec/qrels.txt; returns their paths."""
    folder = out / TREC_DIR
    runs: dict[str, pd.DataFrame] = {
        f"lane_{lane}": g for lane, g in inp.lanes.groupby("lane", sort=True)
    }
    runs["retrieve"] = inp.retrieved
    runs["final"] = inp.reranked
    paths = []
    for name, run in runs.items():
        path = folder / f"{name}.run"
        write_trec_run(run, path, f"ragrig-{name}")
        paths.append(path)
    write_trec_qrels(inp.qrels, folder / QRELS_FILE)
    return [*paths, folder / QRELS_FILE]
