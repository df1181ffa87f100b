"""End to end through real DVC on the documents golden set: `dvc exp run -S dataset=docs` parses
docling's test documents and the committed public ones, chunks, embeds, retrieves, generates,
judges and reports, with retrieval scored at section level (data/golden/docs)."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest
import yaml

from .conftest import SHARED, copy_project, sh
from .test_e2e import _mlflow_runs, _python

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DOCLING_DOCS = SHARED / "datasets" / "docling_test_docs"


def _trec(path: Path) -> dict[str, list[str]]:
    """qid -> doc ids in rank order of a TREC run file (`qid Q0 docid rank score tag`)."""
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    ranked: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for qid, _, doc, rank, *_ in rows:
        ranked[qid].append((int(rank), doc))
    return {q: [d for _, d in sorted(v)] for q, v in ranked.items()}


def _ndcg_recall_at_10(run: dict[str, list[str]], gold: dict[str, set[str]]) -> tuple[float, float]:
    """Binary-relevance nDCG@10 and Recall@10 over the judged queries (no run: 0)."""
    ndcg = recall = 0.0
    for qid, rel in gold.items():
        top = run.get(qid, [])[:10]
        dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(top) if d in rel)
        ideal = sum(1 / math.log2(i + 2) for i in range(min(len(rel), 10)))
        ndcg += dcg / ideal
        recall += len(rel & set(top)) / len(rel)
    return ndcg / len(gold), recall / len(gold)


def test_dvc_exp_run_dataset_docs_end_to_end_at_section_level(tmp_path):
    if not DOCLING_DOCS.is_dir():
        pytest.skip(f"{DOCLING_DOCS} not present")
    ws = copy_project(tmp_path / "ws")
    sh([_python(ws), "-m", "ragrig", "init-dvc"], ws)
    # the dataset's root as an absolute path: this copy has no ../shared beside it;
    # the extractive generator keeps the run short (dataset=docs alone chooses SmolLM2)
    proc = sh(
        [
            "dvc",
            "exp",
            "run",
            "-S",
            "dataset=docs",
            "-S",
            f"dataset.root='{DOCLING_DOCS}'",
            "-S",
            "generate=extractive",
        ],
        ws,
    )
    _check_docs_run(ws, proc.stdout)


def _check_docs_run(ws: Path, out: str) -> None:
    # choosing the dataset chose the docling parser, token windows and the reference answers
    params = yaml.safe_load((ws / "params.yaml").read_text())
    assert params["dataset"]["name"] == "docs"
    assert params["dataset"]["documents"] == [str(DOCLING_DOCS), "data/golden/docs/documents"]
    assert (params["parse"]["method"], params["chunk"]["method"]) == ("docling", "recursive")
    assert params["report"]["scorecard"]["reference_column"] == "meta_answer"

    # parse: every document file converted (14 shared, 3 committed); the reference Markdown
    # and the provenance notes left out by parse.exclude
    report = json.loads((ws / "data/parse/parse_report.json").read_text())
    assert report["counts"] == {"parsed": 17, "failed": 0, "skipped": 15, "timed_out": 0}
    skipped = {f["path"] for f in report["files"] if f["status"] == "skipped"}
    assert skipped == {"PROVENANCE.md"} | {
        f"groundtruth/{p.name}" for p in (DOCLING_DOCS / "groundtruth").iterdir()
    }
    assert "parse: queries: 55 scored" in out

    # section level: a query's gold is the documents rows of its section and subsections
    docs = pd.read_parquet(ws / "data/parse/documents.parquet")
    qrels = pd.read_parquet(ws / "data/parse/qrels.parquet")
    assert set(qrels["doc_id"]) <= set(docs["doc_id"])
    gold = {q: set(g["doc_id"]) for q, g in qrels[qrels["relevance"] > 0].groupby("qid", sort=True)}
    assert len(gold) == 55
    by_id = docs.set_index("doc_id")
    feeding = by_id.loc[sorted(gold["duck-06"])]
    assert list(zip(feeding["path"], feeding["section"], strict=True)) == [
        ("html/wiki_duck.html", "Behaviour > Feeding")
    ]
    swim = by_id.loc[sorted(gold["docx-02"])]  # a section with one subsection
    assert sorted(swim["section"]) == ["Let’s swim!", "Let’s swim! > Let’s eat"]
    pdf = by_id.loc[sorted(gold["pdf-01"])]  # no headings: the whole file, one row
    assert list(pdf["path"]) == ["pdf/multi_page.pdf"] and list(pdf["section"]) == [""]

    # the report scores the final ranking against those section ids: recomputed here from its
    # TREC files, the same nDCG@10 and Recall@10
    metrics = json.loads((ws / "reports/metrics.json").read_text())
    c = metrics["counts"]
    assert (c["queries"], c["scored"], c["missing_runs"]) == (55, 55, 0)
    run = _trec(ws / "reports/run/trec/final.run")
    assert {d for ranked in run.values() for d in ranked} <= set(docs["doc_id"])
    ndcg, recall = _ndcg_recall_at_10(run, gold)
    assert metrics["retrieval"]["ndcg@10"] == pytest.approx(ndcg, abs=1e-4)
    assert metrics["retrieval"]["recall@10"] == pytest.approx(recall, abs=1e-4)
    # 101 section rows: a ranking by chance would put the gold section in the top 10 about
    # one time in ten; the hybrid retriever finds most of them
    assert recall > 0.6 and ndcg > 0.4

    # generated, judged, scored against the reference answers, logged to MLflow
    assert c["generated"] == 50 and sum(c["judgment_status"].values()) == 50
    correctness = metrics["scorecard"]["axes"]["correctness"]
    assert correctness["n"] > 0 and 0.0 <= correctness["value"] <= 1.0
    slices = metrics["slices"]
    assert {v: e["n_queries"] for v, e in slices["format"].items()} == {
        "html": 16,
        "jats": 12,
        "docx": 2,
        "pdf": 13,
        "md": 6,
        "pptx": 4,
        "xlsx": 2,
    }
    runs = _mlflow_runs(ws)
    assert len(runs) == 1 and runs.iloc[0]["params.dataset.name"] == "docs"
