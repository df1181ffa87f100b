"""Metadata filters and the position probe on the fixture run (tiny_run), one `dvc repro` of
both: `filters=tenant_locale` reruns retrieve and what follows it (parse to index stay cached),
no retrieved document breaks eligibility or its query's hard predicate, and the report's
false-exclusion rate, Recall@10 and hard-vs-soft block are what the measures give on the stage's
own tables; the lost-in-the-middle probe answers every probed query in four contexts, a context
the pipeline already answered takes its answer, and the report measures each position."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pandas as pd
import pytest

from ragrig.core.predicates import matches, passing
from ragrig.metrics.filters import false_exclusion, recall_at_k

from .conftest import BIN, copy_run, sh

PY = str(BIN / "python")


def _ran(ws: Path) -> set[str]:
    path = ws / ".ragrig" / "stage_log.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    events = [json.loads(x) for x in lines if x.strip()]
    return {e["stage"] for e in events if e["status"] == "ok"}


@pytest.fixture(scope="module")
def repro(tmp_path_factory, tiny_run) -> tuple[Path, str]:
    ws = copy_run(tiny_run, tmp_path_factory.mktemp("filters") / "ws")
    (ws / ".ragrig" / "stage_log.jsonl").unlink(missing_ok=True)
    sh([PY, "-m", "ragrig", "params", "write", "dataset=tiny", "generate=extractive",
        "filters=tenant_locale", "generate.position_probe.enabled=true"], ws)  # fmt: skip
    return ws, sh(["dvc", "repro"], ws).stdout


def test_filters_apply_before_search_and_the_report_measures_their_cost(repro):
    ws, out = repro
    assert _ran(ws) == {"retrieve", "rerank", "estimate", "generate", "judge", "report"}
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


def test_the_probe_moves_the_gold_passage_and_reuses_the_pipelines_own_answers(repro):
    ws, out = repro
    gen = ws / "data" / "generate"
    counts = json.loads((gen / "manifest.json").read_text())["position_probe"]
    probe = pd.read_parquet(gen / "position_probe.parquet")
    answers = pd.read_parquet(gen / "generations.parquet").set_index("qid")
    assert counts["context_size"] == 3  # null: the pipeline's n_passages
    assert counts["answers"] == len(probe) == 4 * counts["queries"] > 0
    assert counts["queries"] + counts["no_gold"] + counts["too_few_distractors"] == len(answers)
    assert sorted(probe["position"].unique()) == ["first", "last", "middle", "reorder"]
    prompts = collections.Counter()
    for row in probe.itertuples():
        ids = json.loads(row.context_chunk_ids)
        prompts[(row.query_qid, tuple(ids))] += 1
        assert len(ids) == 3 and ids[row.gold_at - 1] == row.gold_chunk_id
        # a context identical to the pipeline's took its answer; no other did
        same = ids == json.loads(answers.loc[row.query_qid, "context_chunk_ids"])
        assert row.pipeline_answer == (same and answers.loc[row.query_qid, "status"] == "ok")
        if row.pipeline_answer:
            assert row.answer == answers.loc[row.query_qid, "answer"]
    assert counts["pipeline_answers"] == int(probe["pipeline_answer"].sum())
    # an identical context of another position of the same query: answered once
    assert counts["repeated_contexts"] == sum(n - 1 for n in prompts.values())
    assert f"{counts['pipeline_answers']} of them the pipeline's own" in out
    judged = pd.read_parquet(ws / "data" / "judge" / "position_judgments.parquet")
    assert sorted(judged["qid"]) == sorted(probe["qid"])
    position = json.loads((ws / "reports" / "metrics.json").read_text())["position"]
    assert position["queries"] == counts["queries"]
    assert position["by_position"]["middle"]["correctness"]["n"] <= counts["queries"]
    table = pd.read_csv(ws / "reports" / "run" / "position.csv")
    assert len(table) == len(probe)
    summary = (ws / "reports" / "run" / "summary.txt").read_text()
    assert f"position probe: {counts['queries']} queries" in summary
