"""Report aggregation: slices with counts, no NaN means, latency quantiles, cost, MLflow keys."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from ragrig.core.config import validate_section
from ragrig.core.errors import ConfigError
from ragrig.metrics.aggregate import (
    aggregate,
    flatten,
    mlflow_key,
    quantiles,
    slice_columns,
)
from ragrig.report import ReportInputs, build_report
from ragrig.tracking.contents import flatten_params
from ragrig.tracking.run import project_root, tracking_uri


def test_default_slices_keep_the_scifact_buckets():
    """The configured defaults give the buckets that used to be fixed in code."""
    cfg = validate_section("report", {})
    queries = pd.DataFrame(
        {
            "qid": [f"q{i}" for i in range(5)],
            "claim_label": ["SUPPORT", "CONTRADICT", "SUPPORT", "NOT_ENOUGH_INFO", "SUPPORT"],
            "n_gold": [0, 1, 2, 5, 3],
            "n_words": [3, 10, 15, 16, 40],
        }
    )
    s = slice_columns(queries, cfg.slices)
    assert s.names == ["claim_label", "n_gold", "query_length"]
    assert s.columns["n_gold"].tolist() == ["0", "1", "2", "3+", "3+"]
    assert s.columns["query_length"].tolist() == ["<10", "10-15", "10-15", ">=16", ">=16"]
    assert s.bins == {"n_gold": [1, 2, 3], "query_length": [10, 16]}
    assert s.dropped == {}


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
            "core_hour_usd": 0.0,  # tokens only here; compute: tests/unit/test_answers.py
        },
    )
    rep = build_report(_inputs(), cfg)
    m = rep.metrics
    assert m["counts"] == {
        "queries": 3,
        "scored": 2,
        "unjudged": 0,
        "no_positive": 1,
        "missing_runs": 1,
        "missing_runs_scored": 0,
        "answerable": 2,
        "no_gold": 1,
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
    # unjudged in the reranked top 10: q1's d2 and q2's d9, one of two documents each
    assert m["judgments"] == {"unjudged@10": 0.5}
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


def test_missing_price_is_a_config_error_naming_the_key():
    cfg = validate_section("report", {"k_values": [10]})
    with pytest.raises(ConfigError) as err:
        build_report(_inputs(), cfg)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("no price for model 'api-model': add 'api-model' under report.prices")


def test_missing_prices():
    from ragrig.report.config import missing_prices

    free = {"input_per_mtok": 0.0, "output_per_mtok": 0.0}
    cfg = validate_section("report", {"prices": {"extractive": free}})
    assert missing_prices("gpt-4o-mini", cfg.prices) == ["gpt-4o-mini"]
    assert missing_prices("extractive", cfg.prices) == []
    assert missing_prices("extractive", {"extractive": free}) == []  # raw params work too


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
    assert lines[0] == (
        "queries 3: scored 2, no positive judgment 1, missing runs 1"
        " (0 of them scored as empty rankings); unjudged (no qrels in the split, not scored) 0"
    )
    lengths = [
        ln.split()[0]
        for ln in lines[
            lines.index(next(x for x in lines if x.startswith("slice query_length"))) + 1 :
        ]
    ]
    assert lengths == ["<10", "10-15", ">=16"]
    assert (
        "faithfulness (composite): 0.5000 over 1 scored answers; 1 answers with no checkable claim"
        in text
    )


def test_unjudged_at_k_is_the_share_of_the_top_k_nobody_judged():
    """METRICS.md's example: the true set is {a, b}, the labels hold only {a}; a ranking b, a, c
    has recall 1.0 by the labels while half of its top 2 was never judged."""
    from ragrig.metrics.ir import unjudged_at_k

    qrels = {"q": {"a": 1}, "z": {"a": 0}, "e": {"a": 1}}  # z: no positive; e: empty ranking
    t = unjudged_at_k({"q": ["b", "a", "c"], "z": ["b"], "e": []}, qrels, [1, 2, 10])
    got = {(r.qid, r.measure): r.value for r in t.itertuples()}
    assert got == {("q", "unjudged@1"): 1.0, ("q", "unjudged@2"): 0.5,
                   ("q", "unjudged@10"): pytest.approx(2 / 3)}  # fmt: skip
