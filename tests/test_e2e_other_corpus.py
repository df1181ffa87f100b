"""End to end through real DVC on a corpus shaped like the ones users bring: no claim files,
query metadata, and queries without judgments (items: slices from the data, unjudged counted)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .conftest import FIXTURE, copy_project, sh
from .test_e2e import _python

pytestmark = [pytest.mark.e2e, pytest.mark.full]

TOPICS = {"1": "space", "2": "space", "7": "earth", "9": "space"}  # the rest: "health"


def _corpus_like_a_users(dest: Path) -> Path:
    """The tiny fixture without claim files; every query gets a `topic` and a numeric
    `difficulty` in its metadata, a nested field (ignored) and a constant one (one bucket);
    five more queries have no judgment in the split."""
    shutil.copytree(FIXTURE, dest, ignore=shutil.ignore_patterns("original"))
    lines = [json.loads(x) for x in (dest / "queries.jsonl").read_text().splitlines()]
    lines += [
        {"_id": f"u{i}", "text": f"An unjudged question number {i} about moons.", "metadata": {}}
        for i in range(5)
    ]
    for i, rec in enumerate(lines):
        rec["metadata"] = {
            "topic": TOPICS.get(rec["_id"], "health"),
            "difficulty": i % 4,
            "source": "forum",
            "evidence": {"d01": [0]},
        }
    (dest / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return dest


def test_metadata_slices_and_unjudged_queries_on_another_corpus(tmp_path):
    data = _corpus_like_a_users(tmp_path / "my corpus")  # a space in the path too
    ws = copy_project(tmp_path / "ws")
    py = _python(ws)
    sh([py, "-m", "ragrig", "init-dvc"], ws)
    sh(
        [
            py,
            "-m",
            "ragrig",
            "params",
            "write",
            "dataset=beir",
            f"dataset.root='{data}'",
            "dataset.name=mine",
            "generate=extractive",
        ],
        ws,
    )
    proc = sh(["dvc", "repro"], ws)
    assert "parse: queries: 8 scored, 6 unjudged" in proc.stdout  # '90' and u0..u4
    assert "query metadata as slice columns: meta_difficulty, meta_source, meta_topic" in (
        proc.stdout
    )

    metrics = json.loads((ws / "reports" / "metrics.json").read_text())
    c = metrics["counts"]
    assert (c["queries"], c["scored"], c["no_positive"], c["unjudged"]) == (9, 8, 1, 6)
    slices = metrics["slices"]
    # SciFact's claim labels are one 'unknown' bucket here, the constant field one 'forum'
    # bucket: both dropped with their reason; the metadata slices stay
    assert set(metrics["slices_dropped"]) == {"claim_label", "query_length", "source"}
    assert "one bucket" in metrics["slices_dropped"]["claim_label"]
    assert set(slices) == {"n_gold", "topic", "difficulty"}
    assert {v: e["n_queries"] for v, e in slices["topic"].items()} == {
        "earth": 1,
        "health": 5,
        "space": 3,
    }
    assert sum(e["n_queries"] for e in slices["difficulty"].values()) == 9
    # four values, more than report.quantile_bins (3): quantile buckets chosen from the data
    assert set(slices["difficulty"]) == {"<1", "1", ">=2"}
    assert metrics["slice_bins"]["difficulty"] == [1, 2]
    summary = (ws / "reports" / "run" / "summary.txt").read_text()
    assert "unjudged (no qrels in the split, not scored) 6" in summary
    assert "slice topic:" in summary
