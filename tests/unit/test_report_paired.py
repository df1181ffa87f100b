"""The report's paired rerank deltas and TREC files, on the small hand-made report inputs."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from ragrig.core.config import validate_section
from ragrig.metrics.trec import read_trec_qrels, read_trec_run
from ragrig.report import build_report
from ragrig.report.paired import rerank_comparison, write_deltas, write_trec_files

from .test_report import _inputs


def _cfg():
    return validate_section(
        "report", {"prices": {"api-model": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}}
    )


def _row(summary: pd.DataFrame, measure: str) -> dict:
    sel = summary[(summary["slice"] == "all") & (summary["measure"] == measure)]
    return sel.iloc[0].to_dict()


def test_identity_rerank_has_zero_deltas(tmp_path):
    inp = dataclasses.replace(_inputs(), reranked=_inputs().retrieved)
    c = rerank_comparison(inp, build_report(inp, _cfg()), seed=13)
    assert (c.per_query["delta"] == 0.0).all() and len(c.per_query) == 2 * 3  # q1, q2 x 3
    for measure, e in c.metrics().items():
        assert e == {
            "n": 2.0,
            "mean_a": e["mean_a"],
            "mean_b": e["mean_a"],
            "delta": 0.0,
            "ci_low": 0.0,
            "ci_high": 0.0,
            "p_value": 1.0,
        }, measure
    assert (c.summary["delta"] == 0.0).all()  # per slice too


def test_rerank_deltas_written_with_slices(tmp_path):
    inp = _inputs()  # the reranker moves q1's gold d1 from rank 2 to rank 1; q2 unchanged
    report = build_report(inp, _cfg())
    c = rerank_comparison(inp, report, seed=13)
    rr = _row(c.summary, "rr")
    assert (rr["n"], rr["mean_a"], rr["mean_b"], rr["delta"]) == (2, 0.75, 1.0, 0.25)
    assert rr["p_value"] == 1.0  # two queries, one nonzero delta: 2 of 4 sign patterns as extreme
    assert (rr["ci_low"], rr["ci_high"]) == (0.0, 0.5)
    assert _row(c.summary, "p@1")["delta"] == 0.5
    paths = write_deltas(c, tmp_path)
    assert [p.name for p in paths] == ["deltas.csv", "deltas.json"]
    table = pd.read_csv(tmp_path / "deltas.csv")
    assert set(table["slice"]) == {"all", "claim_label", "n_gold", "query_length"}
    d = json.loads((tmp_path / "deltas.json").read_text())
    assert (d["a"], d["b"], d["seed"]) == ("retrieve", "rerank", 13)
    assert d["overall"]["rr"]["delta"] == 0.25
    assert d["slices"]["claim_label"]["SUPPORT"]["rr"]["ci_low"] is None  # one query


def test_trec_files_of_every_run(tmp_path):
    inp = _inputs()
    paths = write_trec_files(inp, tmp_path)
    assert [p.name for p in paths] == [
        "lane_dense.run",
        "retrieve.run",
        "final.run",
        "qrels.txt",
    ]
    final = read_trec_run(tmp_path / "trec" / "final.run")
    assert final.groupby("qid")["doc_id"].apply(list).to_dict() == {
        "q1": ["d1", "d2"],
        "q2": ["d2", "d9"],
    }
    qrels = read_trec_qrels(tmp_path / "trec" / "qrels.txt")
    assert sorted(qrels["qid"]) == ["q1", "q2", "q2"]  # q3 has no relevant document


@pytest.mark.parametrize("seed", [13, 14])
def test_deltas_are_deterministic_for_a_seed(seed):
    inp = _inputs()
    report = build_report(inp, _cfg())
    a = rerank_comparison(inp, report, seed=seed).summary
    b = rerank_comparison(inp, report, seed=seed).summary
    pd.testing.assert_frame_equal(a, b)
