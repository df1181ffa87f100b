"""`ragrig traces`: bad lines counted by reason, a deterministic hashed sample, intervals and
alerts per window, drift tests that find a shift and not noise, and the command end to end
(files, exit codes, one MLflow run per window with its traces)."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from ragrig.metrics import correctness as corr
from ragrig.traces.config import TracesConfig
from ragrig.traces.drift import length_test, mmd_test, refusal_test, slice_test
from ragrig.traces.evaluate import Judging, evaluate
from ragrig.traces.read import Problems, interactions, sample_key

from ..conftest import BIN, PROJECT, project_env

T0 = datetime(2026, 11, 30, tzinfo=UTC)
CONTEXT = "Mars has two moons, Phobos and Deimos. Curiosity landed on Mars in 2012."


def _line(i: int, minutes: float, answer: str, **kw) -> str:
    row = {
        "id": f"x{i}",
        "timestamp": (T0 + timedelta(minutes=minutes)).isoformat(),
        "question": "How many moons does Mars have?",
        "contexts": [{"id": "d1", "text": CONTEXT}],
        "answer": answer,
        "latency_ms": 100 + i,
        **kw,
    }
    return json.dumps(row)


def test_bad_lines_are_counted_by_reason_with_their_first_lines(tmp_path):
    good = _line(1, 0, "Mars has two moons.")
    bad = [
        "not json",
        json.dumps({"id": "a"}),
        _line(2, 0, "x").replace("2026-11-30T00:00:00+00:00", "2026-11-30T00:00:00"),
        json.dumps({**json.loads(good), "contexts": [{"id": "d"}]}),
        json.dumps({**json.loads(good), "feedback": 0.5}),
        json.dumps({**json.loads(good), "latency_ms": -1}),
        "[1, 2]",
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([good, *bad, "", good.replace('"x1"', '"x9"')]) + "\n")
    problems = Problems()
    got = [(n, x.id) for n, x in interactions(path, problems)]
    assert got == [(1, "x1"), (10, "x9")]
    assert dict(problems.counts) == {
        "not JSON": 1,
        "without timestamp": 1,
        "with a bad timestamp (ISO 8601 with a zone, or epoch seconds)": 1,
        "with a context without text": 1,
        "with a bad feedback (1/0, true/false, up/down)": 1,
        "with a bad latency_ms": 1,
        "not a JSON object": 1,
    }
    assert problems.lines(path)[0].startswith("1 lines not JSON (first: ")
    assert problems.lines(path)[0].endswith("t.jsonl:2)")


def test_the_sample_is_a_seeded_hash_of_the_id():
    keys = [sample_key(f"id-{i}", 13) for i in range(20000)]
    share = sum(k < 0.05 for k in keys) / len(keys)
    assert abs(share - 0.05) < 0.006
    assert keys[:50] == [sample_key(f"id-{i}", 13) for i in range(50)]
    assert keys[:50] != [sample_key(f"id-{i}", 14) for i in range(50)]


def test_the_drift_tests_find_a_shift_and_not_noise():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(60, 8)), rng.normal(size=(60, 8))
    stat, p_same = mmd_test(a, b, 200, seed=13)
    shifted, p_shift = mmd_test(a, b + 1.5, 200, seed=13)
    assert p_same > 0.05 and p_shift == 1 / 201 and shifted > stat
    assert mmd_test(a, b, 200, seed=13) == (stat, p_same)  # seeded
    assert length_test([5, 6, 7, 5] * 10, [5, 6, 7, 6] * 10) > 0.05
    assert length_test([5, 6, 7, 5] * 10, [15, 16, 17, 16] * 10) < 1e-6
    assert refusal_test(1, 100, 20, 100) < 0.001 and refusal_test(2, 100, 3, 100) > 0.5
    with pytest.raises(ValueError, match="two vectors per sample"):
        mmd_test(a[:1], b, 10, seed=1)
    # the slice mix: chi-square per key, Bonferroni over keys, the largest shift named
    from scipy.stats import chi2_contingency

    ref = {("locale", "de"): 50, ("locale", "en"): 50, ("intent", "faq"): 100}
    moved = {("locale", "de"): 20, ("locale", "en"): 80, ("intent", "faq"): 100}
    p, shift = slice_test(ref, moved)
    assert p == pytest.approx(chi2_contingency([[50, 50], [20, 80]])[1])  # one key tested
    assert shift == "locale=de 0.50->0.20"
    ref2 = {**ref, ("intent", "how-to"): 100}
    p2, _ = slice_test(ref2, {**moved, ("intent", "how-to"): 100})
    assert p2 == pytest.approx(2 * p)  # two keys: Bonferroni
    assert slice_test(ref, ref)[0] == pytest.approx(1.0)
    assert slice_test({("intent", "faq"): 3}, {("intent", "faq"): 4}) == (None, "")


@pytest.fixture(scope="module")
def judging():
    # no semantic part: relevance is the keyword part a test computes by hand (the command's
    # test below reads the semantic part too)
    return Judging.from_params(PROJECT / "params.yaml", semantic=False)


def _log(tmp_path, n_good=40, n_bad=40):
    """Window 1 (00:00): faithful answers with feedback 1; window 2 (01:00): a wrong number."""
    rows = [
        _line(i, i, "Mars has two moons, Phobos and Deimos.", feedback=1) for i in range(n_good)
    ]
    rows += [
        _line(100 + i, 60 + i, "Curiosity landed on Mars in 2019.", feedback=0)
        for i in range(n_bad)
    ]
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_each_window_has_its_axes_intervals_and_alerts(tmp_path, judging):
    cfg = TracesConfig(sample_rate=1.0, min_per_window=30, drift={"queries": False}, batch=16)
    result = evaluate(_log(tmp_path), cfg, judging, progress=False)
    w = result.windows.set_index("window")
    first, second = w.loc["2026-11-30T00:00Z"], w.loc["2026-11-30T01:00Z"]
    assert (first["judged"], second["judged"]) == (40, 40)
    assert (first["faithfulness"], first["faithfulness_low"]) == (1.0, 1.0)
    assert second["faithfulness"] == 0.0  # the wrong year is vetoed: judged unfaithful
    # correctness: the scorecard's surrogates without samples, coverage 0.25 and clarity 0.2
    # renormalised; the thumbs are a signal beside it, not correctness
    question = "How many moons does Mars have?"
    for row, answer in ((first, "Mars has two moons, Phobos and Deimos."),
                        (second, "Curiosity landed on Mars in 2019.")):  # fmt: skip
        cover, clear = corr.coverage_by_parts(question, answer), corr.clarity(answer)
        assert row["correctness"] == pytest.approx((0.25 * cover + 0.2 * clear) / 0.45)
        assert row["correctness_parts"] == "coverage 40/40, clarity 40/40"
    assert (first["feedback_up"], second["feedback_up"]) == (1.0, 0.0)
    # the scorecard's keyword part: moon and mar of how/mani/moon/doe/mar/have
    assert first["relevance"] == pytest.approx(1 / 3)
    assert first["relevance_parts"] == "keyword 40/40"
    assert first["latency_p50_ms"] == pytest.approx(119.5)
    assert result.alerts == [
        "ALERT window 2026-11-30T00:00Z: relevance 0.3333 [0.3333, 0.3333] (n=40), lower bound "
        "below the floor 0.75",
        "ALERT window 2026-11-30T01:00Z: faithfulness 0.0000 [0.0000, 0.0000] (n=40), lower "
        "bound below the floor 0.85",
        "ALERT window 2026-11-30T01:00Z: relevance 0.3333 [0.3333, 0.3333] (n=40), lower bound "
        "below the floor 0.75",
        "ALERT window 2026-11-30T01:00Z: correctness 0.3696 [0.3696, 0.3696] (n=40), lower "
        "bound below the floor 0.70",
    ]
    # fewer values than min_per_window: reported, never an alert
    few = evaluate(_log(tmp_path, 40, 10), cfg, judging, progress=False)
    assert not any("01:00Z" in a for a in few.alerts)
    assert bool(few.windows.set_index("window").loc["2026-11-30T01:00Z", "too_few_to_alert"])
    # the same file, batch size and sample give the same table
    again = evaluate(_log(tmp_path), cfg.model_copy(update={"batch": 7}), judging, progress=False)
    pd.testing.assert_frame_equal(again.windows, result.windows)


def test_the_command_writes_its_files_logs_a_run_per_window_and_exits_on_an_alert(tmp_path):
    path = _log(tmp_path)
    cfg = tmp_path / "traces.yaml"
    cfg.write_text("sample_rate: 1.0\nmin_per_window: 30\nmax_traces_per_window: 3\n"
                   "floors: {faithfulness: 0.85}\ndrift: {max_queries: 10, permutations: 50}\n")  # fmt: skip
    env = project_env({"RAGRIG_MLFLOW_URI": f"sqlite:///{tmp_path / 'm.db'}"})
    cmd = [str(BIN / "python"), "-m", "ragrig", "traces", str(path), "--config", str(cfg),
           "--params", str(PROJECT / "params.yaml"), "--out", str(tmp_path / "out"), "--quiet"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
    assert "ALERT window 2026-11-30T01:00Z: faithfulness 0.0000" in proc.stdout
    assert "2 MLflow runs in experiment 'ragrig-traces'" in proc.stdout
    assert "drift against 2026-11-30T00:00Z: 1 of 1 windows" in proc.stdout  # answer length
    table = pd.read_csv(tmp_path / "out" / "windows.csv")
    assert table["judged"].tolist() == [40, 40]
    # relevance read the embed section's model as well: both parts on every judged line
    assert table["relevance_parts"].tolist() == ["semantic 40/40, keyword 40/40"] * 2
    assert "relevance: semantic 80/80, keyword 80/80; not online: llm" in proc.stdout
    assert (tmp_path / "out" / "windows.png").stat().st_size > 10_000
    # the review queue: every thumbs-down (window 2's wrong year), with the judge's reading
    lines = (tmp_path / "out" / "review_queue.jsonl").read_text().splitlines()
    queue = [json.loads(x) for x in lines]
    downs = [q for q in queue if "thumbs_down" in q["reasons"]]
    assert [q["id"] for q in downs] == [f"x{100 + i}" for i in range(40)]
    assert {q["judge"]["judged_faithful"] for q in downs} == {0.0}
    # the default runtime ran both models through onnxruntime: torch was never imported
    models = json.loads((tmp_path / "out" / "traces.json").read_text())["models"]
    assert models == {"runtime": "onnx", "torch_imported": False}
    summary = json.loads((tmp_path / "out" / "traces.json").read_text())["review_queue"]
    assert (summary["items"], summary["by_split"]) == (40, {"release": 40, "monitoring": 0})
    assert "review queue: 40 interactions (thumbs_down 40; 40 release, 0 monitoring)" in (
        proc.stdout
    )

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'm.db'}")
    exp = client.get_experiment_by_name("ragrig-traces")
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.run_name"])
    assert [r.info.run_name for r in runs] == [
        "window 2026-11-30T00:00Z",
        "window 2026-11-30T01:00Z",
    ]
    assert [r.data.metrics["alert"] for r in runs] == [0.0, 1.0]
    assert runs[1].data.metrics["faithfulness"] == 0.0
    traces = client.search_traces(locations=[exp.experiment_id], run_id=runs[1].info.run_id)
    assert len(traces) == 3
    feedback = [a for t in traces for a in t.info.assessments]
    assert sorted(a.value for a in feedback) == [False, False, False]

    # a file that is not there: one line, exit 2
    proc = subprocess.run([*cmd[:4], str(tmp_path / "none.jsonl"), *cmd[5:]], cwd=tmp_path,
                          env=env, capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"ragrig traces: error: file not found: {tmp_path / 'none.jsonl'}"
    ]
