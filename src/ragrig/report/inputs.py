"""What the report reads: the upstream stages' tables and manifests, and people's labels."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pandas as pd

from ragrig.core.io import load_array, read_json, read_table
from ragrig.report.base import ReportInputs
from ragrig.report.filters import read_filter_inputs
from ragrig.report.scorecard import Vectors


def parse_files(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The file counts of a documents folder's parse manifest (parse=docling), else None."""
    if not isinstance(manifest.get("files"), dict):
        return None
    return {"counts": manifest["files"], "not_parsed": manifest.get("not_parsed", {})}


def read_inputs(
    parse_dir: Path,
    embed_dir: Path,
    retrieve_dir: Path,
    rerank_dir: Path,
    generate_dir: Path,
    judge_dir: Path,
    labels_file: Path,
    documents: bool = False,
) -> ReportInputs:
    """Every input of the report, checked against its schema; the labels only when their file
    exists (`ragrig label`), checked whole against the run's answers."""
    ann_path = retrieve_dir / "ann_recall.parquet"
    manifest = read_json(retrieve_dir / "manifest.json")
    parsed = read_json(parse_dir / "manifest.json")
    judge_manifest = read_json(judge_dir / "manifest.json")
    inputs = ReportInputs(
        queries=read_table(parse_dir / "queries.parquet", "queries"),
        qrels=read_table(parse_dir / "qrels.parquet", "qrels"),
        retrieved=read_table(retrieve_dir / "run.parquet", "run"),
        lanes=read_table(retrieve_dir / "lanes.parquet", "lanes"),
        reranked=read_table(rerank_dir / "run.parquet", "run"),
        ann=read_table(ann_path, "ann_recall") if ann_path.exists() else None,
        ann_timing={k: manifest[k] for k in ("approx_ms", "exact_ms") if k in manifest} or None,
        latency=pd.concat(
            [
                read_table(d / "latency.parquet", "latency")
                for d in (embed_dir, retrieve_dir, rerank_dir)
            ],
            ignore_index=True,
        ),
        generations=read_table(generate_dir / "generations.parquet", "generations"),
        judgments=read_table(judge_dir / "judgments.parquet", "judgments"),
        unjudged_not_parsed=parsed.get("queries_unjudged", 0),
        parse_files=parse_files(parsed),
        vectors=Vectors(
            query_ids=read_table(embed_dir / "query_ids.parquet", "ids")["id"].tolist(),
            queries=load_array(embed_dir / "queries.npy", mmap_mode="r"),
            chunk_ids=read_table(embed_dir / "chunk_ids.parquet", "ids")["id"].tolist(),
            chunks=load_array(embed_dir / "chunks.npy", mmap_mode="r"),
        ),
        judge_weights=judge_manifest.get("weights"),
        judge_veto=_veto(judge_manifest),
        filters=read_filter_inputs(retrieve_dir),
        position=(
            (
                read_table(generate_dir / "position_probe.parquet", "generations"),
                read_table(judge_dir / "position_judgments.parquet", "judgments"),
            )
            if (judge_dir / "position_judgments.parquet").exists()
            else None
        ),
        context_run=(
            read_table(generate_dir / "context_run.parquet", "run")
            if (generate_dir / "context_run.parquet").exists()
            else None
        ),
        claims=(
            read_table(judge_dir / "correctness.parquet", "correctness")
            if (judge_dir / "correctness.parquet").exists()
            else None
        ),
        documents=read_table(parse_dir / "documents.parquet", "documents") if documents else None,
    )
    if labels_file.exists():
        from ragrig.dataset.labels import read_labels, run_answers

        answers = run_answers(inputs.generations, inputs.judgments)
        inputs = dataclasses.replace(
            inputs, labels=read_labels(labels_file, answers), labels_file=str(labels_file)
        )
    return inputs


def precision_decisions(embed_dir: Path, generate_dir: Path, judge_dir: Path) -> dict:
    """Each torch stage's resolved precision and the CPU flags that decided it."""
    return {
        name: read_json(folder / "manifest.json").get("precision_decision")
        for name, folder in (("embed", embed_dir), ("generate", generate_dir), ("judge", judge_dir))
    }


def _veto(judge_manifest: dict) -> tuple[str, ...] | None:
    veto = (judge_manifest.get("decision") or {}).get("veto")
    return None if veto is None else tuple(veto)
