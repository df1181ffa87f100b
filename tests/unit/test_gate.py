"""The release gate (ragrig.tools.gate, `ragrig gate`): every check's value, bound and verdict
on a hand-made run, the exit code naming what failed, and the JUnit file read back by
junitparser, a JUnit reader CI plugins use."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from ragrig.cli import app as cli
from ragrig.metrics.scorecard import FloorRule, evaluate, floor_readings
from ragrig.tools.gate import GateConfig, exit_code, run_checks

FLOORS = {
    "faithfulness": {"min": 0.85, "kind": "hard"},
    "relevance": {"min": 0.75, "kind": "soft"},
    "correctness": {"min": 0.70, "kind": "soft"},
}
WEIGHTS = {"faithfulness": 0.5, "relevance": 0.25, "correctness": 0.25}


def _run(folder, axes, ndcg, filters=None):
    """A reports folder: metrics.json and run/per_query.parquet. `axes`: axis -> the same value
    for every query (so every bootstrap interval is that value, exactly)."""
    qids = [f"q{i}" for i in range(6)]
    rule = FloorRule()  # as the report decides: each floor on its bootstrap lower bound
    gates = floor_readings({a: [v] * len(qids) for a, v in axes.items()}, rule)
    card = evaluate(axes, WEIGHTS, FLOORS, {a: len(qids) for a in axes}, gates, rule.describe())
    metrics = {
        "scorecard": card.to_dict(),
        "latency_ms": {"total": {"p50": 800.0, "p95": 1500.0, "p99": 2100.0}},
        "cost_usd_per_query": {"mean": 0.004},
    }
    if filters is not None:
        metrics["filters"] = filters
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(metrics))
    rows = [{"qid": q, "measure": f"axis/{a}", "value": v} for a, v in axes.items() for q in qids]
    rows += [
        {"qid": q, "measure": "retrieval/ndcg@10", "value": ndcg[i]} for i, q in enumerate(qids)
    ]
    rows += [{"qid": q, "measure": "retrieval/recall@10", "value": 0.5} for q in qids]
    (folder / "run").mkdir()
    pd.DataFrame(rows).to_parquet(folder / "run" / "per_query.parquet")
    return folder / "metrics.json"


def _config(tmp_path, **kw):
    path = tmp_path / "gate.yaml"
    path.write_text(yaml.safe_dump(kw))
    return path


def test_each_check_reads_its_value_against_its_bound(tmp_path):
    filters = {"false_exclusion_rate": 0.125, "excluded_queries": 1, "eligible_queries": 8}
    axes = {"faithfulness": 0.9, "relevance": 0.7, "correctness": 0.8}
    run = _run(tmp_path / "run", axes, [0.6, 0.5, 0.7, 0.4, 0.6, 0.5], filters)
    _run(tmp_path / "base", axes, [0.65, 0.55, 0.75, 0.45, 0.65, 0.55])
    cfg = GateConfig(
        latency_p95_ms={"total": 2000, "judge": 100},
        cost_per_query_usd=0.001,
        max_false_exclusion=0.05,
        regression_budget={"retrieval/ndcg@10": 0.02, "retrieval/recall@10": 0.0},
    )
    _, checks = run_checks(run, cfg, baseline=tmp_path / "base")
    got = {c.name: (c.value, c.verdict) for c in checks}
    assert got == {
        "floor faithfulness": (0.9, "pass"),
        "floor relevance": (0.7, "warn"),  # soft: warns, does not fail
        "floor correctness": (0.8, "pass"),
        "latency p95 total (ms)": (1500.0, "pass"),
        "latency p95 judge (ms)": (None, "not measured"),
        "cost per query (USD)": (0.004, "FAIL"),
        "filter false exclusion": (0.125, "FAIL"),
        # every query lost 0.05 nDCG@10: the paired interval is [-0.05, -0.05], below -0.02
        "regression retrieval/ndcg@10": (pytest.approx(-0.05), "FAIL"),
        "regression retrieval/recall@10": (0.0, "pass"),
    }
    assert exit_code(checks) == 1
    floor = next(c for c in checks if c.name == "floor relevance")
    assert floor.detail == "soft, bootstrap lower bound, n=6; estimate 0.7000"


def test_gate_command_prints_one_line_per_check_writes_junit_and_names_the_failures(
    tmp_path, capsys
):
    from junitparser import Failure, JUnitXml, Skipped

    axes = {"faithfulness": 0.9, "relevance": 0.8, "correctness": 0.8}
    run = _run(tmp_path / "run", axes, [0.5] * 6)
    _run(tmp_path / "base", axes, [0.5] * 6)
    config = _config(
        tmp_path,
        latency_p95_ms={"total": 1000},
        max_false_exclusion=0.05,
        regression_budget={"retrieval/ndcg@10": 0.01},
    )
    junit = tmp_path / "out" / "gate.xml"
    argv = ["gate", "--metrics", str(run), "--config", str(config)]
    code = cli.main([*argv, "--baseline", str(tmp_path / "base"), "--junit", str(junit)])
    out, err = capsys.readouterr()
    assert code == 1
    lines = out.splitlines()
    assert "latency p95 total (ms)              1500.0000  <= 1000      FAIL" in lines
    assert (
        "filter false exclusion                      -  <= 0.05      skipped  (no filters)" in lines
    )
    assert any(
        x.startswith("regression retrieval/ndcg@10           0.0000  low >= -0.01 pass")
        for x in lines
    )
    assert err.strip() == "ragrig gate: FAIL: latency p95 total (ms) (1500.0000, bound <= 1000)"

    suite = next(iter(JUnitXml.fromfile(str(junit))))
    assert (suite.name, suite.tests, suite.failures, suite.skipped) == ("ragrig gate", 6, 1, 1)
    cases = {case.name: case for case in suite}
    assert set(cases) == {
        "floor faithfulness",
        "floor relevance",
        "floor correctness",
        "latency p95 total (ms)",
        "filter false exclusion",
        "regression retrieval/ndcg@10",
    }
    assert isinstance(cases["latency p95 total (ms)"].result[0], Failure)
    assert isinstance(cases["filter false exclusion"].result[0], Skipped)
    assert cases["floor faithfulness"].is_passed
    assert cases["floor faithfulness"].classname == "ragrig.gate.floor"
    assert {p.name: p.value for p in suite.properties()} == {"floor_rule": FloorRule().describe()}
    assert f"  {FloorRule().describe()}" in lines  # the console names the rule too


def test_the_gate_reads_the_floor_as_the_report_decided_it(tmp_path, capsys):
    """A mean above the hard floor whose interval reaches below it: the report's scorecard fails
    it on the lower bound, and the gate reports that same number and verdict, not its own."""
    from ragrig.metrics.bootstrap import bootstrap_interval

    faith = [1.0] * 6 + [0.0] + [1.0] * 6 + [0.0] + [1.0] * 6  # mean 0.90
    per_answer = {"faithfulness": faith, "relevance": [0.9] * 20, "correctness": [0.8] * 20}
    rule = FloorRule(resamples=1000, level=0.95, seed=7)
    gates = floor_readings(per_answer, rule)
    low = float(bootstrap_interval(faith, seed=7, resamples=1000, level=0.95)[0])
    assert gates["faithfulness"] == (low, "bootstrap lower bound, n=20")
    assert low == 0.75  # 2 unfaithful of 20: the 2.5th percentile of 1000 resampled means
    means = {a: sum(v) / len(v) for a, v in per_answer.items()}
    card = evaluate(means, WEIGHTS, FLOORS, {a: 20 for a in means}, gates, rule.describe())
    est = evaluate(means, WEIGHTS, FLOORS, {a: 20 for a in means})
    assert (card.gate, est.gate) == ("fail_hard", "pass")
    # the estimate rule tests the mean itself: no gate value recorded
    assert floor_readings(per_answer, FloorRule("estimate")) == {}
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "metrics.json").write_text(json.dumps({"scorecard": card.to_dict()}))
    _, checks = run_checks(folder / "metrics.json", GateConfig())
    floor = next(c for c in checks if c.name == "floor faithfulness")
    assert (floor.value, floor.reads, floor.estimate) == (0.75, "bootstrap lower bound, n=20", 0.9)
    assert floor.verdict == "FAIL"


def test_a_report_that_recorded_no_floor_rule_is_refused(tmp_path, capsys):
    section = evaluate({"faithfulness": 0.9}, WEIGHTS, FLOORS).to_dict()
    del section["rule"]
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"scorecard": section}))
    assert cli.main(["gate", "--metrics", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(
        "records no floor rule (written by an older report); rerun the report "
        "stage (dvc repro report)"
    )
    gate_yaml = _config(tmp_path, floors_on="estimate")
    assert cli.main(["gate", "--metrics", str(path), "--config", str(gate_yaml)]) == 2
    assert "floors_on is the report's setting (report.scorecard.floors_on)" in (
        capsys.readouterr().err
    )


def test_a_bad_gate_config_or_baseline_is_one_line_and_exit_2(tmp_path, capsys):
    run = _run(
        tmp_path / "run", {"faithfulness": 0.9, "relevance": 0.8, "correctness": 0.8}, [0.5] * 6
    )
    bad = _config(tmp_path, latency_p95_ms={"total": "fast"})
    assert cli.main(["gate", "--metrics", str(run), "--config", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"ragrig gate: {bad}: ") and "\n" not in err
    code = cli.main(["gate", "--metrics", str(run), "--baseline", str(tmp_path / "nowhere")])
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        f"ragrig gate: baseline {tmp_path / 'nowhere'} has no run/per_query.parquet"
    )


def test_the_coverage_checks_read_ragrig_coverages_report_of_the_runs_queries(tmp_path):
    from ragrig.core.io import file_sha256
    from ragrig.metrics.coverage import matrix, traffic_coverage
    from ragrig.tools.gate import CoverageBounds

    axes = {"faithfulness": 0.9, "relevance": 0.8, "correctness": 0.8}
    run = _run(tmp_path / "run", axes, [0.5] * 6)
    queries = tmp_path / "queries.parquet"
    pd.DataFrame({"qid": ["q1", "q2"], "text": ["a", "b"]}).to_parquet(queries)
    intents = {"q1": "how", "q2": "how", "q3": "how", "q4": "why", "q5": "why"}
    types = {"q1": "pdf", "q2": "pdf", "q3": "html", "q4": "pdf", "q5": "pdf"}
    m = matrix(intents, types, None, 0.1, resamples=100)  # why x html: empty
    record = {k: v for k, v in m.items() if k != "counts"}
    record["queries_sha256"] = file_sha256(queries)
    record["traffic"] = {"lines": 100, **traffic_coverage({"how": 0.7, "why": 0.2, "who": 0.1},
                                                          intents)}  # fmt: skip
    report = tmp_path / "coverage.json"
    report.write_text(json.dumps(record))

    def checks(**kw):
        cov = CoverageBounds(report=str(report), queries=str(queries), **kw)
        _, got = run_checks(run, GateConfig(coverage=cov))
        return {c.name: (c.value, c.verdict, c.detail) for c in got if c.kind == "coverage"}

    assert checks() == {}  # no bound set: no check
    got = checks(min_queries_per_cell=2, max_uncovered_traffic=0.05)
    assert got["coverage min queries per cell"] == (
        0.0,
        "FAIL",
        "4 cells; short: 2 cells (why x html 0, how x html 1)",
    )
    assert got["coverage uncovered traffic"] == (
        pytest.approx(0.1),
        "FAIL",
        "of 100 lines; uncovered intents: 1 intent (who)",
    )
    got = checks(min_queries_per_cell=1, max_uncovered_traffic=0.1, exempt_cells=["why x html"])
    assert got["coverage min queries per cell"] == (1.0, "pass", "3 cells, 1 exempt")
    assert got["coverage uncovered traffic"][1] == "pass"
    # the run's queries changed since the report: not read, not measured (a hard check)
    pd.DataFrame({"qid": ["q1"], "text": ["a"]}).to_parquet(queries)
    got = checks(min_queries_per_cell=1)
    ((value, verdict, detail),) = got.values()
    assert (value, verdict) == (None, "not measured")
    assert detail == f"{report} is of another query set than {queries} (rerun ragrig coverage)"
    report.unlink()
    _, got = run_checks(run, GateConfig(coverage=CoverageBounds(
        report=str(report), queries=str(queries), max_uncovered_traffic=0.1)))  # fmt: skip
    assert exit_code(got) == 2
    assert got[-1].detail == f"no coverage report at {report} (run ragrig coverage)"
