"""Report aggregation: slices with counts, no NaN means, latency quantiles, cost, MLflow keys."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from ragrig.config import validate_section
from ragrig.metrics.aggregate import (
    aggregate,
    bucket_length,
    bucket_n_gold,
    flatten,
    mlflow_key,
    quantiles,
)
from ragrig.report import ReportInputs, build_report
from ragrig.report.tracking import flatten_params, project_root, tracking_uri


def test_buckets():
    assert [bucket_n_gold(n) for n in (0, 1, 2, 5)] == ["0", "1", "2", "3+"]
    assert [bucket_length(n, [10, 16]) for n in (3, 10, 15, 16, 40)] == [
        "<10",
        "10-15",
        "10-15",
        ">=16",
        ">=16",
    ]


def test_mlflow_keys_are_legal():
    assert mlflow_key("retrieval", "ndcg@10", "all") == "retrieval/ndcg_at_10/all"
    assert mlflow_key("slices", "n_gold", "3+") == "slices/n_gold/3plus"
    assert mlflow_key("slices", "query_length", ">=16") == "slices/query_length/ge16"
    assert flatten({"a": {"b@1": 0.5, "s": "text", "nan": float("nan"), "ok": True}}) == {
        "a/b_at_1": 0.5,
        "a/ok": 1.0,
    }
    assert flatten_params({"index": {"dense": {"m": 32}}, "l": [1, 2]}) == {
        "index.dense.m": "32",
        "l": "[1, 2]",
    }


def test_aggregate_has_all_slice_and_own_denominators():
    long = pd.DataFrame(
        {
            "qid": ["a", "b", "c", "a"],
            "measure": ["m", "m", "m", "f"],
            "value": [1.0, 0.0, 0.5, 0.8],
        }
    )
    slices = pd.DataFrame({"qid": ["a", "b", "c"], "label": ["x", "x", "y"]})
    agg = aggregate(long, slices, ["label"]).set_index(["slice", "slice_value", "measure"])
    assert agg.loc[("all", "all", "m"), "mean"] == pytest.approx(0.5)
    assert agg.loc[("all", "all", "m"), "n"] == 3
    assert agg.loc[("all", "all", "f"), "n"] == 1  # measured for one query only: n says so
    assert agg.loc[("label", "x", "m"), "mean"] == pytest.approx(0.5)
    assert agg.loc[("label", "y", "m"), "n"] == 1
    assert not agg["mean"].isna().any()


def test_quantiles():
    assert quantiles(list(range(1, 101)), [0.5, 0.99]) == {
        "p50": pytest.approx(50.5),
        "p99": pytest.approx(99.01),
    }
    assert quantiles([], [0.5]) == {}


def _inputs() -> ReportInputs:
    queries = pd.DataFrame(
        {
            "qid": ["q1", "q2", "q3"],
            "text": ["a", "b", "c"],
            "claim_label": ["SUPPORT", "CONTRADICT", "SUPPORT"],
            "n_gold": [1, 2, 0],
            "n_words": [5, 12, 20],
        }
    )
    qrels = pd.DataFrame(
        {
            "qid": ["q1", "q2", "q2", "q3"],
            "doc_id": ["d1", "d2", "d3", "d1"],
            "relevance": [1, 1, 1, 0],
        }
    )
    run = pd.DataFrame(
        {
            "qid": ["q1", "q1", "q2", "q2"],
            "doc_id": ["d2", "d1", "d2", "d9"],
            "chunk_id": ["d2#0", "d1#0", "d2#0", "d9#0"],
            "score": [2.0, 1.0, 2.0, 1.0],
            "rank": [1, 2, 1, 2],
        }
    )
    reranked = run.assign(
        doc_id=["d1", "d2", "d2", "d9"], chunk_id=["d1#0", "d2#0", "d2#0", "d9#0"]
    )
    lanes = run.assign(lane="dense")
    gens = pd.DataFrame(
        {
            "qid": ["q1", "q2"],
            "status": ["ok", "ok"],
            "answer": ["x", "I cannot answer"],
            "context_chunk_ids": ["[]", "[]"],
            "contexts": ["[]", "[]"],
            "citations": ["[1]", "[]"],
            "model": ["api-model", "api-model"],
            "prompt_tokens": [1000, 3000],
            "completion_tokens": [100, 0],
            "latency_ms": [10.0, 30.0],
            "error": ["", ""],
        }
    )
    judg = pd.DataFrame(
        {
            "qid": ["q1", "q2"],
            "status": ["scored", "no_claims"],
            "n_claims": [2, 0],
            "n_supported": [1, 0],
            "faithfulness": [0.5, None],
            "claims": ["[]", "[]"],
            "latency_ms": [1.0, 2.0],
            "error": ["", "refusal"],
        }
    )
    latency = pd.DataFrame(
        {"qid": ["q1", "q2"], "stage": ["retrieve", "retrieve"], "latency_ms": [1.0, 3.0]}
    )
    return ReportInputs(queries, qrels, run, lanes, reranked, None, None, latency, gens, judg)


def test_build_report_end_to_end_values():
    cfg = validate_section(
        "report",
        {
            "k_values": [10],
            "prices": {"api-model": {"input_per_mtok": 1.0, "output_per_mtok": 10.0}},
        },
    )
    rep = build_report(_inputs(), cfg)
    m = rep.metrics
    assert m["counts"] == {
        "queries": 3,
        "answerable": 2,
        "no_gold": 1,
        "missing_runs": 1,
        "generated": 2,
        "generation_status": {"ok": 2, "empty": 0, "error": 0},
        "judgment_status": {
            "scored": 1,
            "no_claims": 1,
            "invalid": 0,
            "error": 0,
            "skipped": 0,
        },
    }
    # q1 gold d1 at rank 2 before rerank, rank 1 after; q2 gold {d2, d3}: d2 at rank 1
    assert m["retrieval"]["rr"] == pytest.approx(1.0)
    assert m["lanes"]["dense"]["rr"] == pytest.approx(0.75)
    assert m["rerank"]["delta_rr"] == pytest.approx(0.25)
    assert m["retrieval"]["recall@10"] == pytest.approx(0.75)
    assert m["judge"] == {
        "faithfulness": 0.5,
        "n_scored": 1,
        "no_claims": 1,
    }  # the refusal is not a 0
    assert m["cost_usd_per_query"]["mean"] == pytest.approx(((1000 + 1000) + 3000) / 1e6 / 2)
    assert m["latency_ms"]["retrieve"]["p50"] == pytest.approx(2.0)
    assert m["slices"]["claim_label"]["SUPPORT"]["n_queries"] == 2
    assert m["slices"]["n_gold"]["0"]["n_queries"] == 1
    assert all(not (isinstance(v, float) and math.isnan(v)) for v in flatten(m).values())
    assert json.loads(json.dumps(m)) == m


def test_missing_price_is_an_error():
    cfg = validate_section("report", {"k_values": [10]})
    with pytest.raises(KeyError, match="no price for model 'api-model'"):
        build_report(_inputs(), cfg)


def test_tracking_uri_resolution(monkeypatch, tmp_path):
    exp_copy = tmp_path / "proj" / ".dvc" / "tmp" / "exps" / "tmpabc"
    exp_copy.mkdir(parents=True)
    assert project_root(exp_copy) == (tmp_path / "proj").resolve()
    monkeypatch.delenv("RAGRIG_MLFLOW_URI", raising=False)
    assert (
        tracking_uri(None, exp_copy) == f"sqlite:///{(tmp_path / 'proj').resolve() / 'mlflow.db'}"
    )
    monkeypatch.setenv("RAGRIG_MLFLOW_URI", "sqlite:////x/y.db")
    assert tracking_uri(None, Path(".")) == "sqlite:////x/y.db"
    assert tracking_uri("http://127.0.0.1:5000", Path(".")) == "http://127.0.0.1:5000"


def test_console_summary_orders_buckets_naturally_and_shows_counts():
    from ragrig.report.summary import format_summary

    cfg = validate_section(
        "report",
        {
            "k_values": [10],
            "prices": {"api-model": {"input_per_mtok": 1.0, "output_per_mtok": 10.0}},
        },
    )
    metrics = build_report(_inputs(), cfg).metrics
    text = format_summary(json.loads(json.dumps(metrics, sort_keys=True)))
    lines = text.splitlines()
    assert lines[0] == "queries 3 (answerable 2, no gold 1, missing runs 1)"
    lengths = [
        ln.split()[0]
        for ln in lines[
            lines.index(next(x for x in lines if x.startswith("slice query_length"))) + 1 :
        ]
    ]
    assert lengths == ["<10", "10-15", ">=16"]
    assert (
        "faithfulness (overlap judge): 0.5000 over 1 scored answers; 1 answers with no checkable claim"
        in text
    )
