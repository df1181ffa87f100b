"""The five guardrails of `ragrig traces`: the log's guardrail fields and their bad values, the
statistics behind each bound, the alert lines with their slices, the JUnit summary, and a day
with injected incidents where each fault alerts in its hours and the clean hours stay quiet."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from array import array
from datetime import UTC, datetime, timedelta

import pytest

from ragrig.traces.config import TracesConfig
from ragrig.traces.guardrails import (
    Check,
    Traffic,
    check_window,
    junit,
    reference_band,
    regeneration_band,
    wilson,
)
from ragrig.traces.read import DUPLICATE, OUT_OF_ORDER, UNKNOWN_PARENT, Problems, interactions

from ..conftest import PROJECT

T0 = datetime(2026, 11, 30, tzinfo=UTC)


def _row(i: int, minutes: float, **kw) -> dict:
    return {
        "id": f"x{i}",
        "timestamp": (T0 + timedelta(minutes=minutes)).isoformat(),
        "question": "How many moons does Mars have?",
        "contexts": ["Mars has two moons."],
        "answer": "Mars has two moons.",
        **kw,
    }


def test_guardrail_fields_read_and_each_bad_value_is_counted_by_reason(tmp_path):
    good = _row(1, 0, slices={"locale": "de"}, stage_latency_ms={"generate": 700, "retrieve": 40},
                cost_usd=0.002, gold=["d1"], filter_excluded=["d2", 7])  # fmt: skip
    rows = [
        good,
        _row(2, 1, cost_usd=-1),
        _row(3, 1, cost_usd="0.1"),
        _row(4, 1, stage_latency_ms={"generate": "slow"}),
        _row(5, 1, slices={"locale": ["de"]}),
        _row(6, 1, gold="d1"),
        _row(7, 1, regenerates=True),
        _row(1, 2),  # x1 again: a duplicate id
        _row(8, -5, regenerates="x1"),  # earlier than the line before it: kept, noted
        _row(9, 3, regenerates="nowhere"),  # a parent no line has: kept, noted
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    problems = Problems()
    got = [x for _, x in interactions(path, problems)]
    assert [x.id for x in got] == ["x1", "x8", "x9"]
    first = got[0]
    assert first.slices == (("locale", "de"),)
    assert first.stage_latency_ms == (("generate", 700.0), ("retrieve", 40.0))
    assert (first.cost_usd, first.gold, first.filter_excluded) == (
        0.002, frozenset({"d1"}), frozenset({"d2", "7"}))  # fmt: skip
    assert got[1].regenerates == "x1" and got[2].regenerates == "nowhere"
    assert dict(problems.counts) == {
        "with a bad cost_usd (a number >= 0)": 2,
        "with a bad stage_latency_ms (an object of stage names to ms >= 0)": 1,
        "with bad slices (an object of names to strings)": 1,
        "with a bad gold (a list of document ids)": 1,
        "with a bad regenerates (the id of an earlier interaction)": 1,
        DUPLICATE: 1,
    }
    assert dict(problems.noted) == {OUT_OF_ORDER: 1, UNKNOWN_PARENT: 1}
    assert problems.lines(path, problems.noted)[1].endswith("t.jsonl:10)")


def test_the_statistics_behind_the_bounds():
    # Wilson: 0 of 10 is [0, 0.2775]; 5 of 10 is [0.2366, 0.7634]
    assert wilson(0, 10) == pytest.approx((0.0, 0.27754), abs=1e-5)
    assert wilson(5, 10) == pytest.approx((0.23659, 0.76341), abs=1e-5)
    # Binomial(4, 0.5): P(X <= 0) = 0.0625 < 0.125 <= P(X <= 1) = 0.3125, and symmetrically 3
    assert regeneration_band(0.5, 4, 0.25) == (0.25, 0.75)
    # the band is narrower for a busier window
    lo_small, hi_small = regeneration_band(0.03, 200, 0.01)
    lo_big, hi_big = regeneration_band(0.03, 20000, 0.01)
    assert lo_small <= lo_big < 0.03 < hi_big < hi_small


def _traffic(latencies, cost=(), regen=0, reviewed=0, excluded=0) -> Traffic:
    t = Traffic(n=len(latencies), latency=array("d", latencies), cost=array("d", cost))
    t.regenerations, t.reviewed, t.excluded = regen, reviewed, excluded
    return t


def test_alert_lines_name_the_value_the_bound_and_the_slices_that_breach_it():
    cfg = TracesConfig(
        guardrails={
            "latency_p95_ms": 500,
            "cost_per_query_usd": 0.01,
            "slice_min": 20,
            "filter_false_exclusion": 0.05,
            "min_reviewed": 20,
        }  # fmt: skip
    )
    slow = [100.0] * 30 + [900.0] * 30  # locale=de: half of it at 900 ms
    window = _traffic([100.0] * 60 + slow, cost=[0.002] * 120, reviewed=40, excluded=12)
    slices = {("locale", "en"): _traffic([100.0] * 60), ("locale", "de"): _traffic(slow),
              ("locale", "fr"): _traffic([900.0] * 5)}  # fmt: skip
    slices[("locale", "de")].reviewed, slices[("locale", "de")].excluded = 20, 12
    checks = {c.guardrail: c for c in check_window("W", window, slices, cfg, 30, (0.0, 0.01))}
    lat = checks["latency"]
    assert (lat.status, lat.value, lat.n) == ("alert", 900.0, 120)
    # fr's 5 values are fewer than slice_min: not named
    assert (
        lat.line()
        == "ALERT window W: latency 900 (n=120), bound > 500; slices: locale=de 900 (n=60)"
    )
    assert checks["cost"].status == "ok" and checks["cost"].value == pytest.approx(0.002)
    flt = checks["filter_false_exclusion"]
    low = wilson(12, 40)[0]
    assert (flt.status, flt.value, flt.slices) == ("alert", 0.3, ("locale=de 0.6 (n=20)",))
    assert flt.bound == f"> 0.05 (Wilson lower bound {low:.4f})"
    # no regeneration in any window at a reference rate of 0: inside the band [0, 0]
    assert checks["regeneration"].status == "ok"


def test_a_window_with_too_few_values_never_alerts_and_junit_says_so():
    cfg = TracesConfig(guardrails={"latency_p95_ms": 500})
    checks = check_window("W", _traffic([900.0] * 10), {}, cfg, 30, None)
    by = {c.guardrail: c.status for c in checks}
    assert by == {"latency": "too few", "cost": "not logged", "filter_false_exclusion":
                  "not logged", "regeneration": "too few"}  # fmt: skip
    alert = Check("W", "cost", 0.5, "> 0.01", 40, "alert", ("locale=de 0.9 (n=20)",))
    suite = ET.fromstring(junit([*checks, alert]))
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("5", "1", "4")
    (failure,) = suite.iter("failure")
    assert (
        failure.get("message")
        == "ALERT window W: cost 0.5 (n=40), bound > 0.01; slices: locale=de 0.9 (n=20)"
    )


def test_the_regeneration_band_waits_for_its_reference_windows():
    cfg = TracesConfig(window_minutes=60, guardrails={"regeneration": {"reference_windows": 2,
                       "false_alarms_per_day": 0.24}})  # fmt: skip
    quiet = _traffic([1.0] * 10, regen=1)
    busy = [_traffic([1.0] * 100, regen=3), _traffic([1.0] * 100, regen=5)]
    assert reference_band([quiet, busy[0]], cfg, 30) is None  # one window with 30 lines
    p0, level = reference_band([quiet, *busy], cfg, 30)
    assert (p0, level) == (0.04, pytest.approx(0.01))  # 8 of 200; 0.24 alarms a day, 24 windows


@pytest.fixture(scope="module")
def incident_day(tmp_path_factory):
    """The injected day on the fixture's corpus (200 lines an hour), evaluated with the
    project's judge; faithfulness needs min_per_window judged, so every line is judged."""
    from ragrig.traces.evaluate import Judging, evaluate
    from ragrig.traces.synthetic import write_incident_day

    tmp = tmp_path_factory.mktemp("day")
    log = write_incident_day(
        tmp / "day.jsonl", PROJECT / "tests/fixtures/tiny_beir/corpus.jsonl", 200
    )
    cfg = TracesConfig(sample_rate=1.0, drift={"queries": False}, mlflow=False, batch=512)
    # relevance without its semantic part here (4,800 lines embedded would cost a minute):
    # benchmarks/bench_guardrails.py runs the command with it
    judging = Judging.from_params(PROJECT / "params.yaml", semantic=False)
    return evaluate(log, cfg, judging, progress=False)


def test_each_injected_fault_alerts_in_its_hours_and_the_clean_hours_stay_quiet(incident_day):
    from ragrig.traces.synthetic import INCIDENTS

    alerted: dict[str, set[int]] = {}
    for c in incident_day.checks:
        if c.status == "alert":
            alerted.setdefault(c.guardrail, set()).add(int(c.window[11:13]))
    for guardrail, hours in INCIDENTS.items():
        assert set(hours) <= alerted.get(guardrail, set()), guardrail
    assert all(h >= 18 for hours in alerted.values() for h in hours), alerted
    faith = [
        c for c in incident_day.checks if c.guardrail == "faithfulness" and c.status == "alert"
    ]
    assert all("locale=fr" in " ".join(c.slices) for c in faith)
    # every alert line, the axes' floors included, falls in the incident's hours
    assert all(int(a.split(" ")[2][11:13]) >= 18 for a in incident_day.alerts)
