"""People's labels on the fixture run (tiny_run): `ragrig label` draws the sample from the
run's outputs, a labels file under labels/ reruns the report stage only, the scorecard shows
the prediction-powered faithful share and `ragrig gate` tests the hard floor on its lower
bound; labels of another run stop the report with one line and write nothing."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from .conftest import BIN, copy_run, sh

PY = str(BIN / "python")


def _ran(ws: Path) -> collections.Counter:
    path = ws / ".ragrig" / "stage_log.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return collections.Counter(
        e["stage"] for e in map(json.loads, filter(str.strip, lines)) if e["status"] == "ok"
    )


def test_labels_rerun_the_report_only_and_the_gate_reads_the_interval(tmp_path, tiny_run):
    ws = copy_run(tiny_run, tmp_path / "ws")
    (ws / ".ragrig" / "stage_log.jsonl").unlink(missing_ok=True)
    out = sh([PY, "-m", "ragrig", "label", "--n", "6"], ws).stdout
    assert out.startswith("ragrig label: 6 of ")
    sample = [json.loads(x) for x in (ws / "reports/labels/sample.jsonl").read_text().splitlines()]
    assert len(sample) == 6 and (ws / "reports/labels/rate.html").exists()
    # people agree with the judge's decision on every answer but the first
    ratings = []
    for i, r in enumerate(sample):
        agree = r["judge"]["judged_faithful"] == 1.0
        faithful = agree if i else not agree
        ratings.append(
            {
                "qid": r["qid"],
                "answer_sha256": r["answer_sha256"],
                "rating": "faithful" if faithful else "unfaithful",
            }
        )
    labels = ws / "labels" / "faithfulness.jsonl"
    labels.write_text("".join(json.dumps(x) + "\n" for x in ratings))
    sh(["dvc", "repro"], ws)
    assert {s for s, k in _ran(ws).items() if k} == {"report"}  # nothing upstream reran
    metrics = json.loads((ws / "reports/metrics.json").read_text())
    card = metrics["scorecard"]
    axis = card["axes"]["faithfulness"]
    ppi = card["faithfulness"]["ppi"]
    # the axis reads the decision: the correction is the one disagreement over six labels
    delta = (1.0 if sample[0]["judge"]["judged_faithful"] == 0.0 else -1.0) / 6
    assert ppi["judge_mean"] == pytest.approx(axis["value"])
    assert ppi["correction"] == pytest.approx(delta)
    assert ppi["estimate"] == pytest.approx(axis["value"] + delta)
    assert (ppi["n_labelled"], ppi["labels"], ppi["floor_on"]) == (6, 6, "lower_bound")
    assert ppi["file"] == "labels/faithfulness.jsonl"
    assert axis["gate_reads"] == "PPI lower bound" and axis["gate_value"] == ppi["ci_low"]
    assert axis["status"] == ("pass" if ppi["ci_low"] >= 0.85 else "below_floor")
    gate = sh([PY, "-m", "ragrig", "gate"], ws, check=False)
    assert "faithfulness with 6 labels: " in gate.stdout
    if axis["status"] == "below_floor":  # a 95% interval over six labels is wide
        assert gate.returncode == 1
        assert f"{ppi['ci_low']:.4f} < 0.85, the PPI lower bound; the mean" in gate.stderr
    # every answer is a trace of the report's MLflow run, with the judge's decision as
    # feedback; a person's feedback on two of them (what the UI stores when one is added
    # there) comes back as a labels file of this run
    import os

    os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"
    import mlflow
    from mlflow.entities import AssessmentSource
    from mlflow.tracking import MlflowClient

    from ragrig.core.io import read_table
    from ragrig.dataset.labels import read_labels, run_answers

    uri = f"sqlite:///{ws / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("ragrig")
    (run,) = client.search_runs([exp.experiment_id])
    traces = client.search_traces(locations=[exp.experiment_id], run_id=run.info.run_id)
    gens = read_table(ws / "data/generate/generations.parquet", "generations")
    judged = read_table(ws / "data/judge/judgments.parquet", "judgments")
    assert len(traces) == len(gens)
    decision = dict(zip(judged["qid"], judged["judged_faithful"], strict=True))
    for t in traces:
        fb = [a for a in t.info.assessments if a.name == "faithful"]
        d = decision.get(t.info.tags["ragrig.qid"])
        if d is None or d != d:  # not judged or undecided: no feedback
            assert fb == []
            continue
        assert [(a.source.source_type, a.value) for a in fb] == [("LLM_JUDGE", d == 1.0)]
    mlflow.set_tracking_uri(uri)
    person = AssessmentSource(source_type="HUMAN", source_id="rater@example.com")
    for t, value in zip(traces[:2], (True, False), strict=True):
        mlflow.log_feedback(
            trace_id=t.info.trace_id, name="faithful", value=value, source=person, rationale="r"
        )
    got = sh([PY, "-m", "ragrig", "label", "--from-mlflow", "--labels-out", "h.jsonl"], ws)
    assert f"2 of {len(gens)} answer traces of run {run.info.run_id} rated by a person" in (
        got.stdout
    )
    back = read_labels(ws / "h.jsonl", run_answers(gens, judged))
    assert {q: x["human"] for q, x in back.items()} == {
        traces[0].info.tags["ragrig.qid"]: 1,
        traces[1].info.tags["ragrig.qid"]: 0,
    }
    # labels of another run's answer: one line naming the file and its line, nothing written
    before = (ws / "reports/metrics.json").read_bytes()
    ratings[2]["answer_sha256"] = "0" * 64
    labels.write_text("".join(json.dumps(x) + "\n" for x in ratings))
    bad = sh(["dvc", "repro"], ws, check=False)
    assert bad.returncode != 0
    line = [x for x in (bad.stdout + bad.stderr).splitlines() if "labels of another run" in x]
    assert line and "labels/faithfulness.jsonl: line 3: the answer of question" in line[0]
    assert "Traceback" not in bad.stdout + bad.stderr
    # DVC removes a stage's outputs before running it (they stay in its cache): the stage
    # wrote none of its own
    after = ws / "reports/metrics.json"
    assert not after.exists() or after.read_bytes() == before
    assert not list((ws / "reports").glob(".run.tmp-*"))
