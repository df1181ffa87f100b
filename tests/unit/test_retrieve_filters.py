"""Metadata filters in retrieval (ragrig.retrieve.filters, index search under a predicate) and
what the report measures of them (ragrig.report.filters), on hand-made tables with values
worked out by hand."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ragrig.core.config import validate_section
from ragrig.core.errors import DataValidationError
from ragrig.report.filters import FilterInputs, filter_measures
from ragrig.retrieve.filters import (
    FilterPlan,
    QueryFilter,
    build_plan,
    document_metadata,
    query_predicates,
    variant_modes,
)


def _cfg(**kw):
    return validate_section("filters", kw)


def _docs(ids, **meta):
    table = pd.DataFrame({"doc_id": ids})
    for name, values in meta.items():
        table[f"meta_{name}"] = values
    return table


def test_document_metadata_keeps_the_corpus_values_and_draws_the_rest_by_hash():
    docs = _docs(["a", "b", "c", "d"], tenant=["acme", None, "globex", None])
    cfg = _cfg(assign={"tenant": ["x", "y"], "locale": ["en", "de", "fr"]})
    meta = document_metadata(docs, cfg)
    assert meta["a"]["tenant"] == "acme" and meta["c"]["tenant"] == "globex"
    assert meta["b"]["tenant"] in {"x", "y"} and meta["d"]["tenant"] in {"x", "y"}
    assert {m["locale"] for m in meta.values()} <= {"en", "de", "fr"}
    assert document_metadata(docs, cfg) == meta  # a hash, not a random draw
    # the draw depends on the id only: another corpus order gives each document the same value
    assert document_metadata(docs.iloc[::-1].reset_index(drop=True), cfg) == meta


def test_docling_documents_carry_their_file_format_section_and_page():
    docs = pd.DataFrame(
        {
            "doc_id": ["a#1", "b#1"],
            "path": ["report.pdf", "notes.docx"],
            "format": ["pdf", "docx"],
            "section": ["Results", ""],
            "page_start": [3, 0],
        }
    )
    meta = document_metadata(docs, _cfg())
    assert meta == {
        "a#1": {"file": "report.pdf", "format": "pdf", "section": "Results", "page": "3"},
        "b#1": {"file": "notes.docx", "format": "docx", "page": "0"},
    }


def test_query_predicates_take_the_query_s_own_filter_then_each_preference_s_rule():
    meta = {"d1": {"locale": "en"}, "d2": {"locale": "de"}, "d3": {"locale": "fr"}}
    queries = pd.DataFrame(
        {"qid": ["q1", "q2", "q3"], "filter": [json.dumps({"locale": "fr"}), "", ""]}
    )
    gold = {"q1": ["d1"], "q2": ["d2", "d1"], "q3": []}
    pref = {"mode": "hard", "rule": "gold", "mismatch": 0.0}
    got = query_predicates(queries, gold, meta, _cfg(preferences={"locale": pref}))
    # q1 asked for fr itself; q2 takes its first gold document's (sorted: d1) locale; q3 has no
    # gold document, so a value is drawn among the corpus's
    assert got["q1"] == {"locale": "fr"} and got["q2"] == {"locale": "en"}
    assert got["q3"]["locale"] in {"en", "de", "fr"}
    flipped = query_predicates(
        queries, gold, meta, _cfg(preferences={"locale": {**pref, "mismatch": 1.0}})
    )
    assert flipped["q2"]["locale"] in {"de", "fr"}  # every query asks outside its gold's locale
    none = query_predicates(queries, gold, meta, _cfg(preferences={"locale": {"rule": "query"}}))
    assert none == {"q1": {"locale": "fr"}, "q2": {}, "q3": {}}
    with pytest.raises(DataValidationError, match="no document has a 'version' field"):
        query_predicates(queries, gold, meta, _cfg(preferences={"version": {"rule": "hash"}}))


def test_plan_applies_eligibility_and_hard_fields_before_search_and_soft_ones_after():
    meta = {
        "d1": {"tenant": "acme", "locale": "en"},
        "d2": {"tenant": "acme", "locale": "de"},
        "d3": {"tenant": "globex", "locale": "en"},
    }
    chunk_doc = np.array(["d1", "d1", "d2", "d3"])  # d1 has two chunks
    preds = {"q1": {"locale": "en"}, "q2": {}}
    hard = build_plan(
        preds, meta, _cfg(eligibility={"tenant": "acme"}, preferences={"locale": {}}), chunk_doc
    )
    assert hard.queries["q1"].rows.tolist() == [0, 1]  # acme and en: d1's chunks
    assert hard.queries["q2"].rows.tolist() == [0, 1, 2]  # eligibility alone
    soft_cfg = _cfg(
        eligibility={"tenant": "acme"}, preferences={"locale": {"mode": "soft", "boost": 0.3}}
    )
    soft = build_plan(preds, meta, soft_cfg, chunk_doc)
    assert soft.queries["q1"].rows.tolist() == [0, 1, 2]
    assert soft.queries["q1"].soft == (("locale", "en", 0.3),)
    loose = _cfg(
        eligibility={"tenant": "acme"}, enforce_eligibility=False, preferences={"locale": {}}
    )
    assert build_plan(preds, meta, loose, chunk_doc).queries["q2"].rows is None
    assert set(variant_modes(soft_cfg)) == {"locale=hard", "locale=soft"}
    assert variant_modes(soft_cfg)["locale=hard"] == {"locale": "hard"}


def test_soft_boost_adds_the_bonus_to_min_max_scaled_scores():
    plan = FilterPlan(
        {"q": QueryFilter(None, (("locale", "en", 0.6),))},
        {"a": {"locale": "de"}, "b": {"locale": "en"}, "c": {"locale": "de"}},
        {"locale": "soft"},
    )
    final = [("a", "a#0", 3.0), ("b", "b#0", 2.0), ("c", "c#0", 1.0)]
    # scaled: a 1.0, b 0.5 + 0.6 = 1.1, c 0.0
    assert plan.boost("q", final) == [
        ("b", "b#0", pytest.approx(1.1)),
        ("a", "a#0", 1.0),
        ("c", "c#0", 0.0),
    ]
    assert plan.boost("other", final) == final  # no plan for the query: unchanged


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
def test_dense_search_within_returns_only_the_allowed_rows(kind):
    import faiss

    from ragrig.index.dense import search_within

    rng = np.random.RandomState(0)
    x = rng.randn(400, 16).astype("float32")
    if kind == "flat":
        index = faiss.IndexFlatIP(16)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(16, 16, faiss.METRIC_INNER_PRODUCT)
    else:
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(16), 16, 8, faiss.METRIC_INNER_PRODUCT)
        index.train(x)
    index.add(x)
    allowed = np.arange(0, 400, 5, dtype=np.int64)
    scores, ids = search_within(index, x[:3], 10, allowed, ef_search=400, nprobe=8)
    assert set(ids.ravel().tolist()) <= set(allowed.tolist())
    exact = (x[:3] @ x[allowed].T).argsort(axis=1)[:, ::-1][:, :10]
    # exhaustive settings (efSearch 400, every IVF list): the exact top 10 among those rows
    assert ids.tolist() == allowed[exact].tolist()
    empty = search_within(index, x[:1], 10, np.array([], dtype=np.int64), 400, 8)[1]
    assert (empty == -1).all()


def test_bm25_mask_keeps_the_allowed_rows_scores():
    from ragrig.index.sparse import RankBm25Index

    cfg = validate_section(
        "index", {"dense": {"method": "flat"}, "sparse": {"method": "rank_bm25"}}
    ).sparse
    texts = ["mars moons phobos", "mars rover", "venus clouds", "mars mars dust"]
    index = RankBm25Index.build(texts, cfg)
    full_scores, full_ids = index.search(["mars"], 4)
    scores, ids = index.search(["mars"], 4, np.array([1, 2]))
    assert ids[0].tolist() == [1, -1, -1, -1]  # venus shares no term: no hit
    assert scores[0][0] == full_scores[0][full_ids[0].tolist().index(1)]


def _reference_inputs(reference, with_q5=False, enforced=True, extra_docs=()):
    ex = reference["filter_false_exclusion"]
    meta = {d["id"]: {k: v for k, v in d.items() if k != "id"} for d in ex["docs"]}
    queries = ex["queries"] + ([ex["unauthorized_only_query"]] if with_q5 else [])
    eligible = {d for d, m in meta.items() if m["tenant"] == ex["caller_eligibility"]["tenant"]}
    run_rows = []
    for q in queries:
        # a retriever that finds every document its filter and eligibility allow
        allowed = [
            d
            for d in sorted(meta)
            if d in eligible and all(meta[d][k] == v for k, v in q["filter"].items())
        ]
        for rank, d in enumerate([*allowed, *extra_docs], start=1):
            run_rows.append({"qid": q["qid"], "doc_id": d, "rank": rank, "score": -rank})
    qrels = pd.DataFrame(
        [{"qid": q["qid"], "doc_id": g, "relevance": 1} for q in queries for g in q["gold"]]
    )
    fi = FilterInputs(
        metadata=meta,
        predicates={q["qid"]: q["filter"] for q in queries},
        hard={q["qid"]: q["filter"] for q in queries},
        eligibility=ex["caller_eligibility"],
        enforced=enforced,
        variants=None,
    )
    return fi, qrels, pd.DataFrame(run_rows)


def test_report_measures_reproduce_the_reference_example(reference):
    rule = validate_section("report", {}).filters
    fi, qrels, run = _reference_inputs(reference)
    metrics, table, lines = filter_measures(fi, qrels, run, rule, seed=13)
    assert metrics["false_exclusion_rate"] == 0.5
    assert metrics["eligible_queries"] == 4
    assert metrics["recall@10"] == 0.5
    assert metrics["recall@10_over_filtered_gold_invalid"] == 1.0
    assert metrics["eligibility_violations"] == 0
    assert table.set_index("qid")["excluded"].to_dict() == {
        "q1": True,
        "q2": False,
        "q3": True,
        "q4": False,
    }
    assert lines[0].startswith("filters: false exclusion 0.5000 (2 of 4 queries")
    fi5, qrels5, run5 = _reference_inputs(reference, with_q5=True)
    with5 = filter_measures(fi5, qrels5, run5, rule, seed=13)[0]
    assert (with5["false_exclusion_rate"], with5["eligible_queries"]) == (0.5, 4)
    assert with5["ineligible_only_queries"] == 1


def test_a_retrieved_ineligible_document_is_a_counted_violation(reference):
    rule = validate_section("report", {}).filters
    fi, qrels, run = _reference_inputs(reference, enforced=False, extra_docs=("d3",))
    metrics, table, lines = filter_measures(fi, qrels, run, rule, seed=13)
    assert metrics["eligibility_violations"] == 4 and metrics["violating_queries"] == 4
    assert "NOT enforced: 4 ineligible document(s) retrieved in 4 query(ies)" in lines[1]


def test_no_eligible_query_raises_one_clear_line(reference):
    rule = validate_section("report", {}).filters
    fi, qrels, run = _reference_inputs(reference)
    fi = FilterInputs(fi.metadata, fi.predicates, fi.hard, {"tenant": "nobody"}, True, None)
    with pytest.raises(DataValidationError, match="no query has an eligible gold document"):
        filter_measures(fi, qrels, run, rule, seed=13)


def test_hard_vs_soft_verdict_from_the_variant_runs():
    meta = {f"d{i}": {"locale": "en" if i % 2 else "de"} for i in range(1, 13)}
    # six queries, each with one gold document of locale en: the hard run ranks it first for
    # every query, the soft run (de documents let in) only for every second one
    qids = [f"q{i}" for i in range(6)]
    gold = {q: f"d{2 * i + 1}" for i, q in enumerate(qids)}
    rows = []
    for i, q in enumerate(qids):
        rows += [
            {"variant": "locale=hard", "qid": q, "doc_id": gold[q], "rank": 1, "score": 2.0},
            {"variant": "locale=hard", "qid": q, "doc_id": "d11", "rank": 2, "score": 1.0},
            {"variant": "locale=soft", "qid": q, "doc_id": gold[q] if i % 2 else "d2", "rank": 1},
            {"variant": "locale=soft", "qid": q, "doc_id": "d4", "rank": 2, "score": 1.0},
        ]
    variants = pd.DataFrame(rows).fillna({"score": 0.0})
    qrels = pd.DataFrame([{"qid": q, "doc_id": d, "relevance": 1} for q, d in gold.items()])
    fi = FilterInputs(
        metadata=meta,
        predicates={q: {"locale": "en"} for q in qids},
        hard={q: {"locale": "en"} for q in qids},
        eligibility={},
        enforced=True,
        variants=variants,
    )
    run = variants[variants["variant"] == "locale=hard"].drop(columns="variant")
    rule = validate_section("report", {"filters": {"k": 2, "min_gain": 0.1}}).filters
    metrics = filter_measures(fi, qrels, run, rule, seed=13)[0]["hard_vs_soft"]["locale"]
    # hard finds every gold (P@2 0.5, R@2 1), soft only for odd queries (P@2 0.25, R@2 0.5)
    assert metrics["hard_precision@2"] == 0.5 and metrics["soft_precision@2"] == 0.25
    assert metrics["precision_gain"] == 0.25 and metrics["recall_change"] == 0.5
    assert metrics["exclusion_rate"] == 0.0
    # the gain's per-query values are 0.5 or 0: its bootstrap lower bound is below 0.25 but the
    # interval stays within [0, 0.5]
    assert 0.0 <= metrics["precision_gain_low"] <= 0.25 <= metrics["precision_gain_high"] <= 0.5
    assert metrics["use_hard"] is (metrics["precision_gain_low"] >= 0.1)


def _beir(tmp_path, query_meta):
    (tmp_path / "qrels").mkdir()
    docs = [
        {"_id": "d1", "title": "a", "text": "mars", "metadata": {"tenant": "acme", "year": 2020}},
        {"_id": "d2", "title": "b", "text": "venus", "metadata": {"tenant": "globex"}},
    ]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    queries = [{"_id": "q1", "text": "mars?", "metadata": query_meta}, {"_id": "q2", "text": "v?"}]
    (tmp_path / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (tmp_path / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n"
    )
    return validate_section("dataset", {"name": "t", "root": str(tmp_path), "split": "test"})


def test_parse_keeps_document_metadata_and_each_query_s_filter(tmp_path):
    from ragrig.parse import make_parser

    ds = _beir(tmp_path, {"filter": {"tenant": "acme", "locale": ["en", "de"]}, "lang": "en"})
    parsed = make_parser(validate_section("parse", {"method": "beir"})).parse(ds)
    docs = parsed.documents.set_index("doc_id")
    assert docs["meta_tenant"].to_dict() == {"d1": "acme", "d2": "globex"}
    assert docs["meta_year"].isna().tolist() == [False, True]
    queries = parsed.queries.set_index("qid")
    assert json.loads(queries.loc["q1", "filter"]) == {"locale": ["en", "de"], "tenant": "acme"}
    assert queries.loc["q2", "filter"] == "" and queries.loc["q1", "meta_lang"] == "en"
    assert parsed.stats["query_filters"] == 1
    assert parsed.stats["document_metadata_columns"] == ["meta_tenant", "meta_year"]


def test_a_malformed_query_filter_is_one_line_naming_it(tmp_path):
    from ragrig.parse import make_parser

    ds = _beir(tmp_path, {"filter": {"tenant": {"any": ["acme"]}}})
    with pytest.raises(DataValidationError, match=r"queries.jsonl:1: 'metadata.filter' must map"):
        make_parser(validate_section("parse", {"method": "beir"})).parse(ds)
