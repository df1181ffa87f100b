"""What every report backend shares: its types, protocol and backend registry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from ragrig.report.scorecard import (
    Vectors,
)


@dataclass(frozen=True)
class ReportInputs:
    queries: pd.DataFrame
    qrels: pd.DataFrame
    retrieved: pd.DataFrame  # run before rerank
    lanes: pd.DataFrame
    reranked: pd.DataFrame
    ann: pd.DataFrame | None
    ann_timing: dict[str, float] | None
    latency: pd.DataFrame  # qid, stage, latency_ms (embed_query, retrieve, rerank)
    generations: pd.DataFrame
    judgments: pd.DataFrame
    # queries of the dataset's queries file that parse left out for having no judgment in the
    # split (data/parse/manifest.json `queries_unjudged`): counted, never silently gone
    unjudged_not_parsed: int = 0
    # a documents folder's files (data/parse/manifest.json `files`, `not_parsed`): how many were
    # parsed, failed, skipped or timed out, per cause with the first files named; None: the
    # corpus is not a documents folder
    parse_files: dict[str, Any] | None = None
    # embed-stage vectors, for the relevance axis's semantic similarity (None: that part is
    # left out, and the scorecard notes say so)
    vectors: Vectors | None = None
    # configured faithfulness weights (data/judge/manifest.json), to say when they were renormalised
    judge_weights: dict[str, float] | None = None
    # the hard checks that decided answers (data/judge/manifest.json `decision.veto`), to name
    # each unfaithful answer's deciding finding (ragrig.metrics.reasons); None: not recorded
    judge_veto: tuple[str, ...] | None = None
    # people's labels of the judged answers (ragrig.dataset.labels.read_labels: qid -> {"human": 1|0})
    # and the file they came from; None: no labels
    labels: dict[str, dict] | None = None
    labels_file: str | None = None
    # the retrieve stage's metadata filters (ragrig.report.filters.FilterInputs); None: none
    filters: Any = None
    # the lost-in-the-middle probe: (its generations, their judgments); None: not run
    position: tuple[pd.DataFrame, pd.DataFrame] | None = None
    # the team's answers (generate=answers_file / rag_http): the passages they used that the
    # run does not rank (data/generate/context_run.parquet); None: the pipeline's own generator
    context_run: pd.DataFrame | None = None
    # the judge's claim-level correctness against a reference (data/judge/correctness.parquet,
    # ragrig.judge.correctness); None: judge.correctness was off
    claims: pd.DataFrame | None = None
    # the parsed documents, read only for report.coverage's document type; None: not read
    documents: pd.DataFrame | None = None

    @property
    def contexts_run(self) -> pd.DataFrame:
        """The run the answers' contexts came from: the reranked run, plus the passages an
        external system used that it does not rank (ragrig.generate.external)."""
        if self.context_run is None or not len(self.context_run):
            return self.reranked
        return pd.concat([self.reranked, self.context_run], ignore_index=True)


@dataclass(frozen=True)
class Report:
    per_query: pd.DataFrame  # qid, measure, value + slice columns
    slices: pd.DataFrame  # slice, slice_value, measure, mean, n
    metrics: dict[str, Any]
    scorecard: pd.DataFrame | None = None  # per answered query: axes, gate, diagnosis
