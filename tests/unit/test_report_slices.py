"""Slices from configuration and from the dataset; query counts; the console summary per slice."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from ragrig.core.config import validate_section
from ragrig.core.errors import ConfigError
from ragrig.metrics.aggregate import (
    bin_labels,
    quantile_cuts,
    slice_columns,
    slice_value_key,
)
from ragrig.report import ReportInputs, build_report, query_counts
from ragrig.report.summary import format_summary, slice_measure

FREE = {"input_per_mtok": 0.0, "output_per_mtok": 0.0}


def _cfg(**report):
    return validate_section("report", {"k_values": [10], "prices": {"m": FREE}, **report})


def _inputs(queries: pd.DataFrame, qrels: pd.DataFrame, run_qids: list[str]) -> ReportInputs:
    """Every run ranks d1 then d2; one ok generation and one scored judgment per run query."""
    run = pd.DataFrame(
        {
            "qid": [q for q in run_qids for _ in (1, 2)],
            "doc_id": ["d1", "d2"] * len(run_qids),
            "chunk_id": ["d1#0", "d2#0"] * len(run_qids),
            "score": [2.0, 1.0] * len(run_qids),
            "rank": [1, 2] * len(run_qids),
        }
    )
    n = len(run_qids)
    gens = pd.DataFrame(
        {
            "qid": run_qids,
            "status": ["ok"] * n,
            "answer": ["x"] * n,
            "context_chunk_ids": ["[]"] * n,
            "contexts": ["[]"] * n,
            "citations": ["[]"] * n,
            "model": ["m"] * n,
            "prompt_tokens": [10] * n,
            "completion_tokens": [1] * n,
            "latency_ms": [1.0] * n,
            "error": [""] * n,
        }
    )
    judg = pd.DataFrame(
        {
            "qid": run_qids,
            "status": ["scored"] * n,
            "n_claims": [1] * n,
            "n_supported": [1] * n,
            "faithfulness": [1.0] * n,
            "claims": ["[]"] * n,
            "latency_ms": [1.0] * n,
            "error": [""] * n,
        }
    )
    latency = pd.DataFrame({"qid": run_qids, "stage": "retrieve", "latency_ms": 1.0})
    return ReportInputs(
        queries, qrels, run, run.assign(lane="dense"), run, None, None, latency, gens, judg
    )


def _queries(**cols) -> pd.DataFrame:
    n = len(next(iter(cols.values())))
    base = {
        "qid": [f"q{i}" for i in range(n)],
        "text": ["t"] * n,
        "claim_label": ["unknown"] * n,
        "n_gold": [1] * n,
        "n_words": [5] * n,
    }
    return pd.DataFrame({**base, **cols})


def test_summary_names_the_measure_when_the_first_slice_value_has_none():
    """n_gold=0 sorts first and has no retrieval measure: the summary still names nDCG@10 and
    prints the values slices.csv holds, and n/a (not 0.0000) for the unmeasurable bucket."""
    queries = _queries(n_gold=[0, 1, 1, 2], claim_label=["A", "A", "B", "B"])
    qrels = pd.DataFrame(
        {
            "qid": ["q0", "q1", "q2", "q3", "q3"],
            "doc_id": ["d1", "d1", "d2", "d1", "d2"],
            "relevance": [0, 1, 1, 1, 1],
        }
    )
    rep = build_report(_inputs(queries, qrels, ["q0", "q1", "q2", "q3"]), _cfg())
    metrics = json.loads(json.dumps(rep.metrics))
    assert list(metrics["slices"]["n_gold"]) == ["0", "1", "2"]
    assert "retrieval/ndcg@10" not in metrics["slices"]["n_gold"]["0"]
    assert slice_measure(metrics) == "retrieval/ndcg@10"
    lines = format_summary(metrics).splitlines()
    head = lines.index(next(x for x in lines if x.startswith("slice n_gold")))
    assert (
        lines[head]
        == "slice n_gold: n, retrieval/ndcg@10, judge/faithfulness  (cut points [1, 2, 3])"
    )
    rows = {ln.split()[0]: ln.split() for ln in lines[head + 1 : head + 4]}
    csv = rep.slices.set_index(["slice", "slice_value", "measure"])["mean"]
    assert rows["0"][2] == "n/a"
    # q1 gold d1 at rank 1 -> 1.0; q2 gold d2 at rank 2 -> 1/log2(3) = 0.6309
    assert rows["1"][2] == f"{csv[('n_gold', '1', 'retrieval/ndcg@10')]:.4f}" == "0.8155"
    assert rows["2"][2] == f"{csv[('n_gold', '2', 'retrieval/ndcg@10')]:.4f}" == "1.0000"
    assert "None" not in "\n".join(lines)


def test_summary_prints_na_when_nothing_is_measurable():
    metrics = {
        "counts": {
            "queries": 1,
            "scored": 0,
            "unjudged": 1,
            "no_positive": 0,
            "missing_runs": 0,
            "generated": 0,
            "generation_status": {},
            "judgment_status": {},
        },
        "retrieval": {},
        "lanes": {"dense": {}},
        "judge": {"n_scored": 0, "no_claims": 0},
        "latency_ms": {},
        "cost_usd_per_query": {"mean": None, "prices_as_of": "x"},
        "slices": {"topic": {"a": {"n_queries": 1, "n_judged": 0}}},
    }
    text = format_summary(metrics)
    assert "  a                  n=1     n/a      n/a" in text
    assert "0.0000" not in text and "0.00" not in text
    assert "cost per query: n/a mean (prices as of x)" in text
    assert "slice topic: n, no retrieval measure, judge/faithfulness" in text


def test_query_counts_scored_unjudged_no_positive_missing():
    queries = _queries(n_gold=[1, 0, 0, 2, 1])
    qrels = pd.DataFrame(
        {
            "qid": ["q0", "q2", "q2", "q3", "q3", "q4"],
            "doc_id": ["d1", "d1", "d2", "d1", "d2", "d2"],
            "relevance": [1, 0, 0, 1, 2, 1],
        }
    )
    # q1 has no qrels row (unjudged), q2 only zeros (no positive); q4 has no run
    counts = query_counts(queries, qrels, pd.DataFrame({"qid": ["q0", "q1", "q2", "q3"]}))
    assert counts == {
        "queries": 5,
        "scored": 3,
        "unjudged": 1,
        "no_positive": 1,
        "missing_runs": 1,
        "missing_runs_scored": 1,
    }
    rep = build_report(_inputs(queries, qrels, ["q0", "q1", "q2", "q3"]), _cfg())
    c = rep.metrics["counts"]
    assert (c["scored"], c["unjudged"], c["no_positive"], c["missing_runs"]) == (3, 1, 1, 1)
    assert rep.metrics["slices"]["n_gold"]["0"]["n_queries"] == 2
    first = format_summary(rep.metrics).splitlines()[0]
    assert first == (
        "queries 5: scored 3, no positive judgment 1, missing runs 1"
        " (1 of them scored as empty rankings); unjudged (no qrels in the split, not scored) 1"
    )


def test_qrels_naming_an_unknown_query_is_an_error():
    from ragrig.core.errors import DataValidationError

    queries = _queries(n_gold=[1])
    qrels = pd.DataFrame({"qid": ["q0", "zz"], "doc_id": ["d1", "d1"], "relevance": [1, 1]})
    with pytest.raises(DataValidationError, match=r"qrels name 1 query id \(.zz.\) missing"):
        build_report(_inputs(queries, qrels, ["q0"]), _cfg())


def test_quantile_bins_from_the_data():
    assert quantile_cuts(list(range(1, 10)), 3, integer=True) == [4, 7]
    assert bin_labels([4, 7], integer=True) == ["<4", "4-6", ">=7"]
    assert bin_labels([1, 2, 3], integer=True) == ["<1", "1", "2", ">=3"]
    # ties merge buckets; a cut at the minimum would leave the first bucket empty
    assert quantile_cuts([1, 1, 1, 1, 1, 2], 3, integer=True) == []
    assert quantile_cuts([1, 1, 1, 1, 2, 3], 3, integer=True) == [2]
    # other numbers: cut points rounded to 3 significant digits, labels lower-bound included
    cuts = quantile_cuts([0.1234, 0.2345, 0.3456, 0.4567, 0.5678, 0.6789], 3, integer=False)
    assert cuts == [0.346, 0.568]
    assert bin_labels(cuts, integer=False) == ["<0.346", "0.346-0.568", ">=0.568"]


def test_slice_value_order():
    values = [">=16", "missing", "10-15", "<10", "b", "a"]
    assert sorted(values, key=slice_value_key) == ["<10", "10-15", ">=16", "a", "b", "missing"]
    assert sorted(["3+", "2", "0", "1"], key=slice_value_key) == ["0", "1", "2", "3+"]
    floats = ["0.5-1.2", ">=1.2", "-1-0.5", "<-1"]
    assert sorted(floats, key=slice_value_key) == ["<-1", "-1-0.5", "0.5-1.2", ">=1.2"]


def test_metadata_columns_become_slices_and_one_bucket_slices_are_dropped():
    """Not SciFact: claim_label is one 'unknown' bucket, every query has one gold and few words;
    the queries carry metadata columns (meta_*), numeric ones binned by quantiles."""
    n = 9
    queries = _queries(
        n_gold=[1] * n,
        n_words=[4] * n,
        meta_year=[2001, 2002, 2003, 2004, 2005, 2006, 2007, 2008, 2009],
        meta_domain=["bio", "bio", "bio", "med", "med", "med", "chem", "chem", None],
        meta_source=["x"] * n,
        meta_id=[f"id{i}" for i in range(n)],
        meta_value=["lo"] * 5 + ["hi"] * 4,  # 'value' names a per-query column: keeps its prefix
        evidence=["{}"] * n,  # an extra column without the prefix is not a slice
    )
    qrels = pd.DataFrame(
        {"qid": queries["qid"], "doc_id": ["d1", "d2"] * 4 + ["d1"], "relevance": 1}
    )
    cfg = _cfg(max_categories=5)
    rep = build_report(_inputs(queries, qrels, list(queries["qid"])), cfg)
    m = rep.metrics
    assert list(m["slices"]) == ["domain", "meta_value", "year"]
    assert {k: v["n_queries"] for k, v in m["slices"]["meta_value"].items()} == {"hi": 4, "lo": 5}
    assert m["slice_bins"] == {"year": [2004, 2007]}
    assert {k: v["n_queries"] for k, v in m["slices"]["year"].items()} == {
        "<2004": 3,
        "2004-2006": 3,
        ">=2007": 3,
    }
    assert {k: v["n_queries"] for k, v in m["slices"]["domain"].items()} == {
        "bio": 3,
        "chem": 2,
        "med": 3,
        "missing": 1,
    }
    # d1 ranked first: queries with gold d1 score 1.0, gold d2 0.6309
    assert m["slices"]["year"]["<2004"]["retrieval/ndcg@10"] == pytest.approx(
        (2 + 1 / 1.5849625) / 3
    )
    assert set(m["slices_dropped"]) == {"claim_label", "n_gold", "query_length", "source", "id"}
    assert m["slices_dropped"]["claim_label"] == "one bucket ('unknown' holds all 9 queries)"
    assert m["slices_dropped"]["id"].startswith(
        "9 distinct values of meta_id (more than max_categories 5)"
    )
    assert set(rep.slices["slice"]) == {"all", "domain", "meta_value", "year"}
    assert {"domain", "meta_value", "year"} <= set(rep.per_query.columns)
    text = format_summary(json.loads(json.dumps(m)))
    assert "slice year: n, retrieval/ndcg@10, judge/faithfulness  (cut points [2004, 2007])" in text
    assert "slice claim_label dropped: one bucket ('unknown' holds all 9 queries)" in text


def test_configured_slice_with_quantile_bins_and_metadata_off():
    queries = _queries(n_words=list(range(1, 10)), meta_topic=list("aaabbbccc"))
    cfg = validate_section(
        "report",
        {
            "slices": [{"name": "length", "column": "n_words", "kind": "numeric"}],
            "metadata_prefix": None,
        },
    )
    s = slice_columns(queries, cfg.slices, quantile_bins=cfg.quantile_bins, metadata_prefix=None)
    assert s.names == ["length"]
    assert s.columns["length"].tolist() == ["<4"] * 3 + ["4-6"] * 3 + [">=7"] * 3
    assert s.bins == {"length": [4, 7]}


def test_numeric_metadata_with_few_values_gets_one_bucket_per_value():
    queries = _queries(n_gold=[1] * 6, meta_flag=[0, 1, 1, 0, 1, None], meta_score=[0.5] * 6)
    s = slice_columns(queries, [], quantile_bins=3)
    assert s.names == ["flag"]
    assert s.columns["flag"].tolist() == ["0", "1", "1", "0", "1", "missing"]
    assert s.bins == {}
    assert s.dropped == {"score": "one bucket ('0.5' holds all 6 queries)"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"name": "a", "column": "c", "bins": [1]}, "bins/labels need kind: numeric"),
        (
            {"name": "a", "column": "c", "kind": "numeric", "bins": [2, 1]},
            "not strictly increasing",
        ),
        ({"name": "a", "column": "c", "kind": "numeric", "bins": []}, "bins is empty"),
        (
            {"name": "a", "column": "c", "kind": "numeric", "bins": [1], "labels": ["x"]},
            "needs 2 distinct labels",
        ),
        (
            {"name": "a", "column": "c", "kind": "numeric", "labels": ["x"]},
            "labels need explicit bins",
        ),
        ({"name": "a", "column": "c", "kind": "ordinal"}, "kind"),
    ],
)
def test_slice_config_rejects(spec, message):
    with pytest.raises(ConfigError, match=message):
        validate_section("report", {"slices": [spec]})


def test_slice_config_rejects_duplicates_and_reserved_name():
    two = [{"name": "a", "column": "c"}, {"name": "a", "column": "d"}]
    with pytest.raises(ConfigError, match=r"repeated: \['a'\]"):
        validate_section("report", {"slices": two})
    for name in ("all", "value"):
        with pytest.raises(ConfigError, match=rf"slice names \['{name}'\] are reserved"):
            validate_section("report", {"slices": [{"name": name, "column": "c"}]})


def test_slice_on_a_missing_or_non_numeric_column_is_a_config_error():
    queries = _queries(n_gold=[1, 2])
    cfg = validate_section("report", {"slices": [{"name": "topic", "column": "meta_topic"}]})
    with pytest.raises(
        ConfigError, match="slice 'topic' reads column 'meta_topic', which the queries table lacks"
    ):
        slice_columns(queries, cfg.slices)
    cfg = validate_section(
        "report", {"slices": [{"name": "label", "column": "claim_label", "kind": "numeric"}]}
    )
    with pytest.raises(ConfigError, match="slice 'label' is numeric but column 'claim_label'"):
        slice_columns(queries, cfg.slices)


def test_plots_with_metadata_slices(tmp_path):
    from ragrig.report.plots import write_plots

    queries = _queries(n_gold=[1, 2, 1, 2], meta_year=[1, 2, 3, 4])
    qrels = pd.DataFrame(
        {
            "qid": ["q0", "q1", "q1", "q2", "q3", "q3"],
            "doc_id": ["d1", "d1", "d2", "d2", "d1", "d2"],
            "relevance": 1,
        }
    )
    rep = build_report(_inputs(queries, qrels, ["q0", "q1", "q2", "q3"]), _cfg())
    written = write_plots(rep, tmp_path)
    assert [p.name for p in written] == ["slices_ndcg.png", "latency.png"]
    assert all(p.stat().st_size > 1000 for p in written)


def test_headline_measure_takes_the_smallest_k():
    from ragrig.metrics.aggregate import headline_measure

    names = ["retrieval/ndcg@100", "retrieval/rr", "retrieval/ndcg@5", "judge/faithfulness"]
    assert headline_measure(names) == "retrieval/ndcg@5"
    assert headline_measure(["retrieval/rr", "retrieval/ap"]) == "retrieval/ap"
    assert headline_measure(["judge/faithfulness"]) is None


def test_summary_of_an_older_metrics_file():
    """`ragrig summary` on a metrics.json written before the new counts and slice notes."""
    metrics = {
        "counts": {
            "queries": 3,
            "answerable": 2,
            "no_gold": 1,
            "missing_runs": 0,
            "generated": 0,
            "generation_status": {},
            "judgment_status": {},
        },
        "retrieval": {"ndcg@10": 0.5},
        "judge": {"n_scored": 0, "no_claims": 0},
        "latency_ms": {},
        "cost_usd_per_query": {"mean": 0.0, "prices_as_of": "x"},
        "slices": {
            "n_gold": {"0": {"n_queries": 1}, "1": {"retrieval/ndcg@10": 0.5, "n_queries": 2}}
        },
    }
    lines = format_summary(metrics).splitlines()
    assert lines[0] == "queries 3 (answerable 2, no gold 1, missing runs 0)"
    assert lines[-2:] == [
        "  0                  n=1     n/a      n/a",
        "  1                  n=2     0.5000   n/a",
    ]


def test_queries_parse_left_out_are_counted_as_unjudged():
    queries = _queries(n_gold=[1, 2])
    qrels = pd.DataFrame({"qid": ["q0", "q1"], "doc_id": ["d1", "d2"], "relevance": [1, 1]})
    inp = dataclasses.replace(_inputs(queries, qrels, ["q0", "q1"]), unjudged_not_parsed=40)
    c = build_report(inp, _cfg()).metrics["counts"]
    assert (c["queries"], c["scored"], c["unjudged"], c["no_positive"]) == (2, 2, 40, 0)
    assert c["no_gold"] == 0
    first = format_summary(build_report(inp, _cfg()).metrics).splitlines()[0]
    assert first.endswith("unjudged (no qrels in the split, not scored) 40")


def test_a_documents_folders_files_not_parsed_are_counted_beside_the_queries():
    queries = _queries(n_gold=[1, 2])
    qrels = pd.DataFrame({"qid": ["q0", "q1"], "doc_id": ["d1", "d2"], "relevance": [1, 1]})
    files = {
        "counts": {"parsed": 3, "failed": 1, "skipped": 0, "timed_out": 0},
        "not_parsed": {
            "failed": {
                "count": 1,
                "causes": {"broken_link": 1},
                "examples": [{"path": "gone.md", "reason": "broken symbolic link"}],
            },
            "skipped": {"count": 0, "causes": {}, "examples": []},
            "timed_out": {"count": 0, "causes": {}, "examples": []},
        },
    }
    inp = dataclasses.replace(_inputs(queries, qrels, ["q0", "q1"]), parse_files=files)
    metrics = build_report(inp, _cfg()).metrics
    assert metrics["counts"]["files"] == files["counts"]
    assert metrics["files_not_parsed"] == files["not_parsed"]
    assert format_summary(metrics).splitlines()[1:3] == [
        "files 4: parsed 3, failed 1 (broken_link 1), skipped 0, timed out 0",
        "  failed: gone.md (broken symbolic link)",
    ]
    plain = build_report(_inputs(queries, qrels, ["q0", "q1"]), _cfg()).metrics
    assert "files" not in plain["counts"] and "files_not_parsed" not in plain
