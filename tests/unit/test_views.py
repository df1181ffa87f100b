"""DVC's views: the headline metrics file, the plot series, the `dvc exp show` column selection
and `ragrig metrics-diff` (the DVC runs themselves are in tests/test_e2e.py)."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from ragrig.report.views import (
    headline,
    latency_table,
    recall_curve,
    rounded,
    total_latency,
    write_views,
)
from ragrig.tools.views import exp_show_args, metrics_diff

# the shape of reports/metrics.json, with more digits than the headline keeps
METRICS = {
    "counts": {"queries": 300, "scored": 300, "generated": 50},
    "retrieval": {
        "ap": 0.66,
        "ndcg@10": 0.7154321,
        "ndcg@100": 0.73,
        "p@1": 0.6,
        "recall@10": 0.8412345,
        "recall@100": 0.948333,
        "rr": 0.683456,
    },
    "scorecard": {
        "axes": {
            "faithfulness": {"value": 0.27771, "n": 46},
            "relevance": {"value": 0.778449, "n": 50},
            "correctness": {"value": 0.4, "n": 50},
        },
        "weighted": 0.433417,
        "gate": "fail_hard",
    },
    "latency_ms": {
        "embed_query": {"p50": 11.2, "p95": 14.7, "p99": 20.0},
        "retrieve": {"p50": 1.23456, "p95": 2.345678, "p99": 3.0},
        "rerank": {"p50": 0.0026051, "p95": 0.0046422, "p99": 0.005},
        "generate": {"p50": 4000.0, "p95": 5123.456, "p99": 6000.0},
        "judge": {"p50": 5.0, "p95": 129.30288, "p99": 194.0},
        "total": {"p50": 4020.0, "p95": 5141.789, "p99": 6100.0},
    },
    "cost_usd_per_query": {"mean": 5.549785586e-06, "p50": 6.1e-06},
}


def test_headline_has_exactly_its_keys_in_order_rounded():
    h = headline(METRICS)
    assert list(h.items()) == [
        ("ndcg@10", 0.7154),
        ("recall@10", 0.8412),
        ("recall@100", 0.9483),
        ("mrr", 0.6835),
        ("faithfulness", 0.2777),
        ("relevance", 0.7784),
        ("correctness", 0.4),
        ("weighted", 0.4334),
        ("gate", "fail_hard"),
        ("retrieve_p95_ms", 2.346),
        ("generate_p95_ms", 5123.0),
        ("total_p95_ms", 5142.0),
        ("cost_usd_per_query", 5.55e-06),
        ("n_queries", 300),
    ]


def test_headline_of_an_unmeasured_run_keeps_every_key_as_null():
    metrics = {"counts": {"queries": 9}, "retrieval": {"ndcg@100": 0.5}, "latency_ms": {}}
    h = headline(metrics)
    assert list(h) == list(headline(METRICS))
    assert h["n_queries"] == 9
    assert [k for k, v in h.items() if v is not None] == ["n_queries"]
    assert json.loads(json.dumps(h)) == h  # plain JSON: no NaN


def test_rounded_keeps_four_significant_digits_and_never_nan():
    assert rounded(497.3978523979895) == 497.4
    assert rounded(0.0046422013838309795) == 0.004642
    assert rounded(-7.49071) == -7.491
    assert rounded(0.0) == 0.0
    assert rounded(float("nan")) is None
    assert rounded(float("inf")) is None
    assert rounded(7) == 7 and rounded(True) is True and rounded("pass") == "pass"


def test_total_latency_sums_the_online_stages_of_answered_queries_only():
    lat = pd.DataFrame(
        [
            ("a", "embed_query", 10.0),
            ("a", "retrieve", 1.0),
            ("a", "rerank", 0.5),
            ("a", "generate", 100.0),
            ("a", "judge", 50.0),  # evaluation, not answering: left out
            ("b", "embed_query", 12.0),
            ("b", "retrieve", 2.0),
            ("b", "rerank", 0.5),
            ("b", "generate", 200.0),
            ("c", "embed_query", 9.0),  # not in the generation sample: no end-to-end time
            ("c", "retrieve", 1.0),
        ],
        columns=["qid", "stage", "latency_ms"],
    )
    assert total_latency(lat) == [111.5, 214.5]


def test_latency_table_rows_in_pipeline_order_total_last():
    table = latency_table(METRICS)
    assert table["stage"].tolist() == [
        "embed_query",
        "retrieve",
        "rerank",
        "generate",
        "judge",
        "total",
    ]
    assert table.columns.tolist() == ["stage", "p50_ms", "p95_ms", "p99_ms"]
    assert table.loc[1].tolist() == ["retrieve", 1.235, 2.346, 3.0]


QRELS = pd.DataFrame(
    {
        "qid": ["q1", "q1", "q2", "q3"],
        "doc_id": ["d1", "d3", "d2", "d9"],
        "relevance": [1, 1, 1, 0],  # q3 has no positive judgment: not scored
    }
)


def _run(rankings: dict[str, list[str]]) -> pd.DataFrame:
    rows = [
        (q, d, f"{d}#0", float(-r), r)
        for q, docs in rankings.items()
        for r, d in enumerate(docs, 1)
    ]
    return pd.DataFrame(rows, columns=["qid", "doc_id", "chunk_id", "score", "rank"])


def test_recall_curve_values_per_k_for_each_run():
    final = _run({"q1": ["d1", "d2", "d3"], "q2": ["d5", "d2"], "q3": ["d9"]})
    bm25 = _run({"q1": ["d4", "d3"], "q2": ["d2"]})
    curve = recall_curve({"final": final, "bm25": bm25}, QRELS, ks=(1, 2, 3))
    assert curve.columns.tolist() == ["k", "recall_final", "ndcg_final", "recall_bm25", "ndcg_bm25"]
    # mean over q1, q2 (q3 has no positive judgment). final: q1 finds d1 at 1 and d3 at 3 (of
    # 2 relevant), q2 finds d2 at 2: (1/2 + 0) / 2, (1/2 + 1) / 2, (1 + 1) / 2
    assert curve["recall_final"].tolist() == [0.25, 0.75, 1.0]
    # bm25: q1 finds d3 at 2, q2 finds d2 at 1: (0 + 1) / 2, (1/2 + 1) / 2, unchanged at 3
    assert curve["recall_bm25"].tolist() == [0.5, 0.75, 0.75]
    assert curve["ndcg_final"].iloc[0] == 0.5  # q1 perfect at 1, q2 nothing at 1


def test_write_views_files_are_deterministic(tmp_path):
    final = _run({"q1": ["d1", "d2", "d3"], "q2": ["d5", "d2"]})
    lanes = final.assign(lane="dense")
    from ragrig.report.views import run_tables

    first = write_views(METRICS, run_tables(final, lanes), QRELS, tmp_path / "a")
    second = write_views(METRICS, run_tables(final, lanes), QRELS, tmp_path / "b")
    assert [p.name for p in first] == ["headline.json", "latency.csv", "recall_at_k.csv"]
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes()
    assert json.loads(first[0].read_text()) == headline(METRICS)
    assert (
        first[2].read_text().splitlines()[0] == "k,recall_final,ndcg_final,recall_dense,ndcg_dense"
    )


def _dvc_selection(columns: list[str], args: list[str], changed: set[str]) -> list[str]:
    """What `dvc exp show` keeps of `columns` (dvc/commands/experiments/show.py, 3.67):
    --keep protects, --only-changed drops unprotected unchanged columns, --drop drops the
    unprotected columns a pattern matches (re.match)."""
    keep = [a for k, a in zip(args, args[1:], strict=False) if k == "--keep"]
    drop = [a for k, a in zip(args, args[1:], strict=False) if k == "--drop"]
    protected = {c for c in columns if keep and re.match("|".join(keep), c)}
    out = [c for c in columns if c in protected or c in changed or c in {"Experiment", "Created"}]
    return [c for c in out if c in protected or not re.match("|".join(drop), c)]


def test_exp_show_selection_keeps_headline_and_swept_params_only():
    head = list(headline(METRICS))
    columns = [
        "Experiment",
        "Created",
        "retrieval.ndcg@10",  # the full metrics.json
        "judge.cpu_s",  # full metrics named like a params section
        "rerank.delta_ndcg@10",
        "reports/metrics.json:judge.weights.claims",
        *[h if h != "cost_usd_per_query" else "reports/run/headline.json:" + h for h in head],
        "retrieve.ef_search",  # swept
        "index.dense.m",  # swept
        "params.yaml:judge.weights.claims",  # a param sharing its name with a metric
        "judge.techniques_disagree",  # metrics.json's judge means, named like params
        "judge.llm_spread",
        "chunk.method",  # not swept
        "data/chunk/chunks.parquet",  # a dependency hash
    ]
    changed = {
        "retrieval.ndcg@10",
        "judge.cpu_s",
        "judge.techniques_disagree",
        "judge.llm_spread",
        "rerank.delta_ndcg@10",
        "reports/metrics.json:judge.weights.claims",
        "retrieve.ef_search",
        "index.dense.m",
        "params.yaml:judge.weights.claims",
        "data/chunk/chunks.parquet",
    }
    shown = _dvc_selection(columns, exp_show_args(), changed)
    assert shown == [
        "Experiment",
        "Created",
        *[h if h != "cost_usd_per_query" else "reports/run/headline.json:" + h for h in head],
        "retrieve.ef_search",
        "index.dense.m",
        "params.yaml:judge.weights.claims",
    ]


def test_exp_show_command_is_the_one_the_docs_document():
    from ragrig.tools.views import exp_show_command

    from ..conftest import PROJECT

    assert exp_show_command() in (PROJECT / "docs" / "tracking.md").read_text()


def test_metrics_diff_without_a_run_says_so_in_one_line(tmp_path):
    text, code = metrics_diff(tmp_path)
    assert code == 1
    assert text == (
        "ragrig metrics-diff: the workspace has no reports/run/headline.json yet: run `dvc repro` "
        "(or `make smoke` on the fixture) first"
    )


@pytest.mark.parametrize("argv", [["exp-show", "--csv", "-A"], ["exp-show"]])
def test_cli_passes_dvc_options_through_exp_show(argv, monkeypatch):
    from ragrig.cli import app as cli

    seen = {}

    def fake_run(cmd, cwd):
        seen["cmd"] = cmd

        class Done:
            returncode = 0

        return Done()

    monkeypatch.setattr(cli.subprocess, "run", fake_run)
    assert cli.main(argv) == 0
    assert seen["cmd"] == ["dvc", "exp", "show", *exp_show_args(), *argv[1:]]
    with pytest.raises(SystemExit):
        cli.main(["gate", "--csv"])  # other commands still refuse unknown options
