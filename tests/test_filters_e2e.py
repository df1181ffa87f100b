"""Metadata filters on the fixture run (tiny_run): `filters=tenant_locale` reruns retrieve and
what follows it (parse to index stay cached), no retrieved document breaks eligibility or its
query's hard predicate, and the report's false-exclusion rate, Recall@10 and hard-vs-soft block
are what the measures give on the stage's own tables."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pandas as pd

from ragrig.core.predicates import matches, passing
from ragrig.metrics.filters import false_exclusion, recall_at_k

from .conftest import BIN, copy_run, sh

PY = str(BIN / "python")


def _ran(ws: Path) -> set[str]:
    path = ws / ".ragrig" / "stage_log.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    events = [json.loads(x) for x in lines if x.strip()]
    return {e["stage"] for e in events if e["status"] == "ok"}


def test_filters_apply_before_search_and_the_report_measures_their_cost(tmp_path, tiny_run):
    ws = copy_run(tiny_run, tmp_path / "ws")
    (ws / ".ragrig" / "stage_log.jsonl").unlink(missing_ok=True)
    sh([PY, "-m", "ragrig", "params", "write", "dataset=tiny", "generate=extractive",
        "filters=tenant_locale"], ws)  # fmt: skip
    out = sh(["dvc", "repro"], ws).stdout
    assert _ran(ws) == {"retrieve", "rerank", "generate", "judge", "report"}
    assert "filters: 9 queries filtered before search, 0 soft-boosted" in out

    retrieve = ws / "data" / "retrieve"
    meta_table = pd.read_parquet(retrieve / "doc_metadata.parquet")
    metadata = {r.doc_id: {"tenant": r.tenant, "locale": r.locale} for r in meta_table.itertuples()}
    assert len(metadata) == 20 and {m["tenant"] for m in metadata.values()} == {"acme", "globex"}
    hard = {
        r.qid: json.loads(r.hard)
        for r in pd.read_parquet(retrieve / "predicates.parquet").itertuples()
    }
    run = pd.read_parquet(retrieve / "run.parquet")
    for row in run.itertuples():  # the invariant: nothing outside eligibility or the predicate
        assert matches(metadata[row.doc_id], {"tenant": "acme", **hard[row.qid]}), row

    qrels = pd.read_parquet(ws / "data" / "parse" / "qrels.parquet")
    gold = {
        q: g["doc_id"].tolist()
        for q, g in qrels[qrels["relevance"] > 0].groupby("qid")
        if q in hard
    }
    expected = false_exclusion(gold, hard, metadata, {"tenant": "acme"})
    rankings = {q: g.sort_values("rank")["doc_id"].tolist() for q, g in run.groupby("qid")}
    eligible = passing(metadata, {"tenant": "acme"})
    got = json.loads((ws / "reports" / "metrics.json").read_text())["filters"]
    assert got["false_exclusion_rate"] == expected.rate
    assert got["eligible_queries"] == expected.eligible_queries
    assert got["recall@10"] == recall_at_k(rankings, gold, eligible, 10)
    assert got["eligibility_violations"] == 0
    block = got["hard_vs_soft"]["locale"]
    assert block["queries"] == expected.eligible_queries
    assert block["exclusion_rate"] == expected.rate  # locale is the only hard field here
    variants = pd.read_parquet(retrieve / "filter_runs.parquet")
    assert collections.Counter(variants["variant"].unique()) == {"locale=hard": 1, "locale=soft": 1}
    # the configured run is the locale=hard variant, row for row
    same = variants[variants["variant"] == "locale=hard"].drop(columns="variant")
    pd.testing.assert_frame_equal(same.reset_index(drop=True), run.reset_index(drop=True))
    table = pd.read_csv(ws / "reports" / "run" / "filters.csv")
    assert int(table["excluded"].sum()) == len(expected.excluded_queries)
    summary = (ws / "reports" / "run" / "summary.txt").read_text()
    assert f"filters: false exclusion {expected.rate:.4f}" in summary
    assert "filters: locale hard vs soft on" in summary
