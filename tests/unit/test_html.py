"""The HTML scorecards: the numbers they were given, intervals, best points, the Pareto front,
plots left out with a note, bad rows, and nothing fetched from the network."""

from __future__ import annotations

import json
import re

import pytest

from ragrig.cli import app as cli
from ragrig.core.errors import DataValidationError
from ragrig.metrics.bootstrap import bootstrap_ci
from ragrig.report.html import fmt_interval, run_page_html, write_run_page
from ragrig.sweep.page import SWEEP_METRICS, best_rows, sweep_page_html, write_sweep_page

from ..html_pages import (
    EXPECTED_CARDS,
    PER_QUERY,
    SEED,
    known_metrics,
    per_query_table,
    sweep_rows,
)


def card_value(page: str, slug: str) -> str:
    m = re.search(rf'id="m-{slug}".*?class="value">([^<]*)<', page, re.S)
    assert m, f"no card {slug}"
    return m.group(1)


def card_ci(page: str, slug: str) -> str:
    m = re.search(rf'id="m-{slug}".*?class="ci">([^<]*)<', page, re.S)
    assert m, f"no card {slug}"
    return m.group(1)


def assert_self_contained(page: str) -> None:
    assert "<script" not in page and "<link" not in page and "@import" not in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "url(http" not in page


def test_run_page_shows_the_values_it_was_given_with_intervals():
    page = run_page_html(known_metrics(), per_query=per_query_table(), seed=SEED)
    assert {slug: card_value(page, slug) for slug in EXPECTED_CARDS} == EXPECTED_CARDS
    ndcg_ci = fmt_interval(bootstrap_ci(PER_QUERY["retrieval/ndcg@10"], SEED))
    assert card_ci(page, "ndcg_at_10") == f"95% CI {ndcg_ci}"
    assert card_ci(page, "recall_at_100") == "95% CI [1.0000, 1.0000]"
    assert card_ci(page, "relevance") == "95% CI [0.8000, 0.8000]"
    assert card_ci(page, "weighted_score") == "&nbsp;"  # a combination of means: no interval
    # the scorecard: gate, failed axes, the faithfulness interval drawn from its 4 answers
    assert 'id="gate">fail_hard</span> (faithfulness, correctness)' in page
    faith_ci = fmt_interval(bootstrap_ci(PER_QUERY["axis/faithfulness"], SEED))
    # value, its interval, the number the floor tested (here the value: no rule given), floor
    assert f"<td>0.7500</td><td>{faith_ci}</td><td>0.7500</td><td>0.8500</td><td>hard</td>" in page
    # slices with counts; the SUPPORT value's interval from its three queries only
    support_ci = fmt_interval(bootstrap_ci([1.0, 0.5, 0.25], SEED))
    assert (
        f'<td class="l">SUPPORT</td><td>3</td><td>0.5833</td><td>{support_ci}</td><td>3</td>'
        "<td>0.8000</td>" in page
    )
    assert '<td class="l">CONTRADICT</td><td>3</td><td>0.4500</td>' in page
    assert "slice query_length dropped: a single bucket" in page
    # latency quantiles per stage, in pipeline order, and their plot
    assert (
        '<td class="l">retrieve</td><td>1.23</td><td>5.68</td><td>9.10</td>' in page
        and '<td class="l">generate</td><td>812.50</td><td>1500.25</td><td>2000.00</td>' in page
    )
    assert page.index(">embed_query<") < page.index(">retrieve<") < page.index(">generate<")
    assert 'id="plot-latency"' in page and 'id="plot-quality-cost"' in page
    assert f"seed {SEED}" in page
    assert_self_contained(page)


def test_run_page_intervals_follow_the_seed_and_need_the_per_query_table():
    for seed in (1, 2):
        page = run_page_html(known_metrics(), per_query=per_query_table(), seed=seed)
        for slug, measure in (("ndcg_at_10", "retrieval/ndcg@10"), ("mrr", "retrieval/rr")):
            ci = fmt_interval(bootstrap_ci(PER_QUERY[measure], seed))
            assert card_ci(page, slug) == f"95% CI {ci}"
        assert page == run_page_html(known_metrics(), per_query=per_query_table(), seed=seed)
    bare = run_page_html(known_metrics())
    assert card_value(bare, "ndcg_at_10") == "0.5167" and card_ci(bare, "ndcg_at_10") == "&nbsp;"
    assert "intervals not computed: no per-query table given" in bare
    assert "quality vs cost per query: no per-query table given" in bare


def test_write_run_page_writes_the_file(tmp_path):
    out = write_run_page(known_metrics(), tmp_path / "reports" / "index.html", seed=SEED)
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_sweep_page_table_marks_best_points_ties_and_failures():
    rows = sweep_rows()
    page = sweep_page_html(rows)
    assert 'id="sweep-counts">12 points: 11 ok, 1 failed<' in page
    assert "the same in every point: chunk=recursive" in page
    cands = {label: (c, better) for label, c, better, _ in SWEEP_METRICS}
    assert best_rows(rows, *cands["nDCG@10"]) == {7}  # point 8: 0.7214
    assert best_rows(rows, *cands["Recall@100"]) == {1, 3, 5, 7}  # a four-way tie at 0.9493
    assert best_rows(rows, *cands["p95 retrieve ms"]) == {0}  # lowest latency
    assert best_rows(rows, *cands["cost/query USD"]) == {0}
    assert page.count('title="best nDCG@10">0.7214 &#9733;</td>') == 1
    assert page.count('title="best Recall@100">0.9493 &#9733;</td>') == 4
    # the failed point: its row, and its error (escaped) below it
    assert "point 12 (chunk.max_tokens=512 index.dense.m=32 retrieve.ef_search=128) failed" in page
    assert "faiss: RuntimeError: Error in allocate &lt;oom&gt;\nexit code 1</pre>" in page
    assert_self_contained(page)


def test_sweep_page_plots_and_pareto_front():
    page = sweep_page_html(sweep_rows())
    for plot in ("hnsw", "sweep-quality-cost", "chunk"):
        assert f'id="plot-{plot}"' in page
    # recall (ANN recall@10) vs retrieve p95 latency: the four 128-token points of the fixture
    # are the front (the 256- and 512-token points are slower at equal or lower recall)
    m = re.search(r'id="pareto">(.*?)</p>', page, re.S)
    assert m and "highest ann/recall_at_10, lowest latency_ms/retrieve/p95" in m.group(1)
    assert re.findall(r"#(\d+) ", m.group(1)) == ["1", "3", "2", "4"]


def _row(point, params, metrics, status="ok", error=None):
    return {
        "point": point,
        "params": params,
        "metrics": metrics,
        "status": status,
        "error": error,
        "seconds": 1.0,
    }


def test_plots_needing_an_unvaried_param_are_left_out_with_a_note():
    ef_only = [
        _row(
            f"ef_search={ef}",
            {"ef_search": ef},  # the short form of retrieve.ef_search
            {
                "retrieval/ndcg_at_10": 0.7,
                "retrieval/recall_at_10": r,
                "latency_ms/retrieve/p95": t,
            },
        )
        for ef, r, t in ((32, 0.80, 1.0), (64, 0.85, 1.5), (128, 0.85, 2.0))
    ]
    page = sweep_page_html(ef_only)
    assert 'id="plot-hnsw"' in page and 'id="plot-chunk"' not in page
    assert "nDCG@10 vs chunk size: left out, the points do not vary the chunking" in page
    assert "quality vs cost per query: left out" in page  # no cost in these rows
    assert re.findall(r"#(\d+) ", re.search(r'id="pareto">(.*?)</p>', page).group(1)) == [
        "1",
        "2",
    ]
    chunk_only = [
        _row("chunk=document", {"chunk": "document"}, {"retrieval/ndcg_at_10": 0.70}),
        _row(
            "chunk=recursive chunk.max_tokens=128",
            {"chunk": "recursive", "chunk.max_tokens": 128},
            {"retrieval/ndcg_at_10": 0.69},
        ),
        _row(
            "chunk=recursive chunk.max_tokens=256",
            {"chunk": "recursive", "chunk.max_tokens": 256},
            {"retrieval/ndcg_at_10": 0.72},
        ),
    ]
    page = sweep_page_html(chunk_only)
    assert 'id="plot-chunk"' in page and 'id="plot-hnsw"' not in page
    assert "recall@10 vs query latency: left out, the points do not vary an HNSW setting" in page
    # x axis: the sizes in order, then the chunker without a size
    svg = page[page.index('id="plot-chunk"') :]
    assert svg.index(">128<") < svg.index(">256<") < svg.index(">document<")


def test_a_nan_metric_is_not_a_number_and_never_best():
    rows = [
        _row("a", {"k": 1}, {"retrieval/ndcg_at_10": float("nan")}),
        _row("b", {"k": 2}, {"retrieval/ndcg_at_10": 0.5}),
        _row("c", {"k": 3}, {"retrieval/ndcg_at_10": 0.4}),
        _row("d", {"k": 4}, {"retrieval/ndcg_at_10": 0.9}, status="failed", error="boom"),
    ]
    assert best_rows(rows, SWEEP_METRICS[0][1], "max") == {1}
    assert "<td>n/a</td>" in sweep_page_html(rows)


@pytest.mark.parametrize(
    "rows, message",
    [
        ({"point": "a"}, "expected a JSON list of rows, got dict"),
        ([["a"]], "row 0: expected an object, got list"),
        ([{"point": "a"}], "row 0: missing ['params', 'metrics', 'status', 'error', 'seconds']"),
        ([_row("a", {}, {}, status="done")], "row 0 (a): status 'done' is not ok or failed"),
        ([_row("a", {}, {"ndcg": "0.5"})], "row 0 (a): metric 'ndcg' is not a number: '0.5'"),
    ],
)
def test_bad_rows_name_the_row_and_the_field(rows, message):
    with pytest.raises(DataValidationError) as exc:
        sweep_page_html(rows)
    assert message in str(exc.value)


def test_cli_renders_rows_json_and_reports_bad_json(tmp_path, capsys):
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps(sweep_rows()))
    assert cli.main(["sweep-page", str(rows)]) == 0
    assert (tmp_path / "index.html").exists()
    assert "(12 points, 1 failed)" in capsys.readouterr().out
    out = write_sweep_page(sweep_rows(), tmp_path / "x" / "page.html")
    assert out.read_text(encoding="utf-8") == (tmp_path / "index.html").read_text(encoding="utf-8")
    bad = tmp_path / "bad.json"
    bad.write_text('[\n{"point": "a",\n')
    assert cli.main(["sweep-page", str(bad), "--out", str(tmp_path / "b.html")]) == 1
    err = capsys.readouterr().err
    assert f"{bad}: line 3: not JSON" in err and not (tmp_path / "b.html").exists()


def test_run_page_shows_the_labelled_faithful_share_with_its_own_interval():
    metrics = known_metrics()
    assert "m-faithful_share_ppi" not in run_page_html(metrics, per_query=per_query_table())
    metrics["scorecard"]["faithfulness"] = {
        "ppi": {"estimate": 0.8123, "ci_low": 0.7561, "ci_high": 0.8685, "n_labelled": 100,
                "alpha": 0.05}
    }  # fmt: skip
    page = run_page_html(metrics, per_query=per_query_table(), seed=SEED)
    assert card_value(page, "faithful_share_ppi") == "0.8123"
    assert card_ci(page, "faithful_share_ppi") == "95% CI [0.7561, 0.8685]"
    assert "faithful share, 100 labels (PPI)" in page


def test_the_scorecard_shows_the_number_each_floor_tested_and_the_rule():
    from ragrig.metrics.scorecard import FloorRule, evaluate
    from ragrig.report.html import _scorecard_html

    rule = FloorRule(seed=SEED)
    gates = {"faithfulness": (0.75, "bootstrap lower bound, n=20")}
    card = evaluate(
        {"faithfulness": 0.9, "relevance": 0.8, "correctness": 0.8},
        {"faithfulness": 0.5, "relevance": 0.25, "correctness": 0.25},
        {a: {"min": 0.7, "kind": "soft"} for a in ("relevance", "correctness")}
        | {"faithfulness": {"min": 0.85, "kind": "hard"}},
        {"faithfulness": 20, "relevance": 20, "correctness": 20},
        gates,
        rule.describe(),
    ).to_dict()
    html = "".join(_scorecard_html(card, None, SEED))
    assert "<td>0.7500 (bootstrap lower bound, n=20)</td><td>0.8500</td><td>hard</td>" in html
    assert f'<p id="floor-rule">{rule.describe()}</p>' in html.replace("&#x27;", "'")
    assert 'id="gate">fail_hard</span> (faithfulness)' in html
