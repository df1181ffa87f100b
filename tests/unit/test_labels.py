"""People's labels of a run's judged answers (ragrig.dataset.labels, ragrig.dataset.label_page, `ragrig
label`): the stratified sample, the labels file and every way it can be wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from ragrig.core.io import write_table
from ragrig.core.schemas import SCHEMAS
from ragrig.dataset import labels as L

DEFAULTS = {"str": "", "int": 0, "float": 0.0, "bool": False, "float?": None}


def _table(rows: list[dict], schema: str) -> pd.DataFrame:
    cols = SCHEMAS[schema].columns
    df = pd.DataFrame([{c: r.get(c, DEFAULTS[k]) for c, k in cols.items()} for r in rows])
    for c, k in cols.items():
        df[c] = df[c].astype(
            {"str": str, "int": "int64", "float": float, "bool": bool}.get(k, float)
        )
    return df


def fake_run(root: Path, n: int = 10) -> Path:
    """n questions: q0..q6 judged faithful, q7, q8 judged unfaithful, q9 not scored (error)."""
    data = root / "data"
    qs = [f"q{i}" for i in range(n)]
    write_table(
        _table([{"qid": q, "text": f"question {q}?"} for q in qs], "queries"),
        data / "parse" / "queries.parquet",
        "queries",
    )
    gens = [
        {
            "qid": q,
            "status": "ok",
            "answer": f"answer of {q}.",
            "contexts": json.dumps([f"passage of {q}"]),
        }
        for q in qs
    ]
    write_table(
        _table(gens, "generations"), data / "generate" / "generations.parquet", "generations"
    )
    judged = []
    for i, q in enumerate(qs):
        if i == n - 1:
            judged.append({"qid": q, "status": "error"})
        else:
            ok = i < 7
            judged.append(
                {
                    "qid": q,
                    "status": "scored",
                    "judged_faithful": float(ok),
                    "answer_support": 0.9 if ok else 0.2,
                    "failure_mode": "" if ok else "fabrication",
                    "contradictions": "[]",
                }
            )
    write_table(_table(judged, "judgments"), data / "judge" / "judgments.parquet", "judgments")
    return data


def test_allocation_is_proportional_by_largest_remainder():
    assert L.allocate({"judged_faithful": 7, "judged_unfaithful": 2}, 4) == {
        "judged_faithful": 3,  # 3.11
        "judged_unfaithful": 1,  # 0.89: the largest remainder takes the fourth
    }
    assert L.allocate({"judged_faithful": 1, "judged_unfaithful": 1}, 1) == {
        "judged_faithful": 1,  # a tie goes to the first stratum
        "judged_unfaithful": 0,
    }
    with pytest.raises(ValueError, match="asked for 5 answers to label, the run has 2 scored"):
        L.allocate({"judged_faithful": 2}, 5)


def test_export_draws_a_stratified_seeded_sample_and_writes_the_page(tmp_path):
    data = fake_run(tmp_path)
    out = tmp_path / "labels"
    m = L.export_sample(data, out, 4, seed=13)
    assert m["strata"] == {
        "judged_faithful": {"answers": 7, "drawn": 3},
        "judged_unfaithful": {"answers": 2, "drawn": 1},
    }
    assert (m["n"], m["scored_answers"], m["answers"]) == (4, 9, 10)
    rows = [json.loads(x) for x in (out / "sample.jsonl").read_text().splitlines()]
    assert [r["stratum"] for r in rows] == ["judged_faithful"] * 3 + ["judged_unfaithful"]
    assert "q9" not in {r["qid"] for r in rows}  # not scored: never drawn
    r = rows[0]
    assert r["answer_sha256"] == L.answer_sha256(f"answer of {r['qid']}.")
    assert r["passages"] == [f"passage of {r['qid']}"] and r["question"] == f"question {r['qid']}?"
    assert r["judge"]["judged_faithful"] == 1.0 and r["judge"]["answer_support"] == 0.9
    # the same seed draws the same answers; another seed others
    again = L.export_sample(data, tmp_path / "again", 4, seed=13)
    assert again == m
    assert (tmp_path / "again" / "sample.jsonl").read_text() == (out / "sample.jsonl").read_text()
    other = L.export_sample(data, tmp_path / "other", 4, seed=14)
    assert (tmp_path / "other" / "sample.jsonl").read_text() != (out / "sample.jsonl").read_text()
    assert other["run_id"] == m["run_id"]
    header = (out / "labels.csv").read_text().splitlines()[0]
    assert header == "qid,answer_sha256,rating,note,question,answer"
    page = (out / "rate.html").read_text()
    assert page.count('type="radio"') == 8 and "Save labels" in page
    embedded = json.loads(page.split('id="sample">')[1].split("</script>")[0])
    assert [it["qid"] for it in embedded["items"]] == [r["qid"] for r in rows]


def _labels(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _answers():
    return {"q1": L.answer_sha256("a1"), "q2": L.answer_sha256("a2"), "q3": None}


def test_read_labels_jsonl_and_csv(tmp_path):
    good = [
        {"qid": "q1", "answer_sha256": L.answer_sha256("a1"), "rating": "faithful"},
        {"qid": "q2", "answer_sha256": L.answer_sha256("a2"), "rating": "unfaithful", "note": "x"},
    ]
    got = L.read_labels(_labels(tmp_path / "l.jsonl", good), _answers())
    assert got == {"q1": {"human": 1, "note": ""}, "q2": {"human": 0, "note": "x"}}
    csv_path = tmp_path / "l.csv"
    csv_path.write_text(
        "qid,answer_sha256,rating,note,question\n"
        + "".join(
            f"{x['qid']},{x['answer_sha256']},{x['rating']},{x.get('note', '')},?\n" for x in good
        )
    )
    assert L.read_labels(csv_path, _answers()) == got


SHA1 = L.answer_sha256("a1")


@pytest.mark.parametrize(
    ("lines", "match"),
    [
        (
            [{"qid": "q9", "answer_sha256": SHA1, "rating": "faithful"}],
            "line 1: question 'q9' is not among the run's answers",
        ),
        (
            [{"qid": "q1", "answer_sha256": SHA1, "rating": "faithful"}] * 2,
            "line 2: question 'q1' is labelled a second time",
        ),
        (
            [{"qid": "q1", "answer_sha256": SHA1, "rating": ""}],
            "line 1: question 'q1' has no rating",
        ),
        ([{"qid": "q1", "answer_sha256": SHA1}], "line 1: no 'rating'"),
        (
            [{"qid": "q1", "answer_sha256": SHA1, "rating": "yes"}],
            "rating 'yes' of question 'q1' is not one of \\['faithful', 'unfaithful'\\]",
        ),
        (
            [{"qid": "q1", "answer_sha256": L.answer_sha256("other"), "rating": "faithful"}],
            "the answer of question 'q1' differs from this run's .*labels of another run",
        ),
        (
            [{"qid": "q3", "answer_sha256": SHA1, "rating": "faithful"}],
            "question 'q3' was not scored by the judge",
        ),
        (
            [{"qid": "q1", "answer_sha256": SHA1, "rating": "faithful"}],
            "1 label\\(s\\); an interval needs at least 2",
        ),
    ],
)
def test_bad_labels_are_one_clear_line(tmp_path, lines, match):
    path = _labels(tmp_path / "l.jsonl", lines)
    with pytest.raises(L.LabelsError, match=match) as exc:
        L.read_labels(path, _answers())
    assert str(exc.value).startswith(str(path)) and "\n" not in str(exc.value)


def test_unreadable_labels(tmp_path):
    bad = tmp_path / "l.jsonl"
    bad.write_text('{"qid": "q1"\n')
    with pytest.raises(L.LabelsError, match="line 1 is not JSON"):
        L.read_labels(bad, _answers())
    with pytest.raises(L.LabelsError, match="cannot read the labels"):
        L.read_labels(tmp_path / "missing.jsonl", _answers())
    header = tmp_path / "l.csv"
    header.write_text("qid,rating\nq1,faithful\n")
    with pytest.raises(L.LabelsError, match="the CSV header lacks answer_sha256"):
        L.read_labels(header, _answers())


def test_ragrig_label_command(tmp_path, monkeypatch, capsys):
    from ragrig.cli import app as cli

    fake_run(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["label", "--n", "4"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == (
        "ragrig label: 4 of 9 scored answers drawn (judged_faithful 3 of 7, judged_unfaithful 1 of 2)"
    )
    assert (tmp_path / "reports" / "labels" / "rate.html").exists()
    assert cli.main(["label", "--n", "20", "--out", "other"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "ragrig: error: label: asked for 20 answers to label, the run has 9 scored"
    assert not (tmp_path / "other").exists()


def test_calibrate_on_the_teams_labels(tmp_path, monkeypatch, capsys):
    import shutil

    import yaml

    from ragrig.cli import app as cli

    from ..conftest import PROJECT

    fake_run(tmp_path)
    shutil.copy(PROJECT / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "conf" / "judge").mkdir(parents=True)
    shutil.copy(PROJECT / "conf" / "calibrate.yaml", tmp_path / "conf")
    shutil.copy(PROJECT / "conf" / "config.yaml", tmp_path / "conf")
    (tmp_path / "conf" / "judge" / "overlap.yaml").write_text("method: overlap\n")
    # people agree with the judge but on q6 (judged faithful, rated unfaithful) and q8 (the
    # reverse): every judged answer labelled, so PPI's estimate is the people's share, 7/9
    human = {f"q{i}": "faithful" for i in range(9)} | {"q6": "unfaithful", "q7": "unfaithful"}
    lines = [
        {"qid": q, "answer_sha256": L.answer_sha256(f"answer of {q}."), "rating": r}
        for q, r in human.items()
    ]
    path = _labels(tmp_path / "labels.jsonl", lines)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["calibrate", "--labels", str(path)]) == 0
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "reports/calibration/labels_calibration.json").read_text())
    assert report["counts"] == {"labels": 9, "faithful": 7, "judged_answers": 9}
    assert report["split"]["questions"] == {"calibration": 5, "held_out": 4}
    for kind, judge_mean in (("decision", 7 / 9), ("score", (7 * 0.9 + 2 * 0.2) / 9)):
        p = report["ppi"][kind]
        assert p["judge_mean"] == pytest.approx(judge_mean)
        assert p["estimate"] == pytest.approx(7 / 9)
        assert p["n_judged"] == p["n_labelled"] == 9
    scorer = report["scorer"]
    assert scorer["threshold_rule"] == "prevalence"  # params' overlap judge has an answer model
    assert scorer["held_out"]["n"] == 4
    assert "faithful share by PPI on the judge's decision: 0.778 [" in out
    written = yaml.safe_load((tmp_path / "conf/judge/overlap.yaml").read_text())
    assert written["decision_threshold"] == scorer["threshold"] and "weights" not in written
    assert report["weights"] is None  # fitted only when asked
    assert cli.main(["calibrate", "--labels", str(path), "--fit-weights"]) == 0
    capsys.readouterr()
    fitted = json.loads((tmp_path / "reports/calibration/labels_calibration.json").read_text())
    written = yaml.safe_load((tmp_path / "conf/judge/overlap.yaml").read_text())
    assert written["weights"] == fitted["weights"]["weights"]  # a valid judge section again
    from ragrig.core.config import validate_section

    validate_section("judge", written)
    # labels of another run: one line, nothing written
    (tmp_path / "reports/calibration/labels_calibration.json").unlink()
    lines[0]["answer_sha256"] = L.answer_sha256("another answer")
    _labels(path, lines)
    assert cli.main(["calibrate", "--labels", str(path), "--no-write"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"ragrig: error: {path}: line 1: the answer of question 'q0' differs")
    assert not (tmp_path / "reports/calibration/labels_calibration.json").exists()


def test_fit_weights_finds_the_part_that_ranks_the_labels():
    from ragrig.tools.calibrate.own_labels import fit_weights, weight_grid

    grid = weight_grid()
    assert len(grid) == 55 and all(abs(sum(w.values()) - 1) < 1e-9 for w in grid)
    assert min(w["claims"] for w in grid) == 0.1
    # entity overlap ranks people's labels perfectly, the claim score backwards; no LLM part
    labels = [1, 0, 1, 0, 1, 0, 1, 0]
    parts = [
        {"claims": 0.2 if y else 0.9, "llm": None, "entity": 0.8 + 0.01 * i if y else 0.1}
        for i, y in enumerate(labels)
    ]
    halves = ["calibration"] * 4 + ["held_out"] * 4
    got = fit_weights(parts, labels, halves, {"claims": 0.4, "llm": 0.4, "entity": 0.2})
    # with no LLM part the composite is claims : entity renormalised; every weighting with
    # claims below half of the two ranks perfectly, and of those the nearest the configured
    # (L1 distance 0.4) and first on the grid is claims 0.2, llm 0.4, entity 0.4
    assert got["weights"] == {"claims": 0.2, "llm": 0.4, "entity": 0.4}
    assert got["calibration_roc_auc"] == got["held_out_roc_auc"] == 1.0
    assert got["configured_held_out_roc_auc"] == 0.0  # 0.4 claims : 0.2 entity ranks backwards
