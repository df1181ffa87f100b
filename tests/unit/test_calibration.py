"""Judge calibration: metrics against the worked example, the MTRAG loader and its bad input,
the task split, the held-out half never used for fitting, and `ragrig calibrate` end to end."""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from ragrig.core.errors import ConfigError, DataValidationError
from ragrig.metrics import calibration as M
from ragrig.tools.calibrate import core, write_decision_threshold
from ragrig.tools.calibrate.baselines import NaiveOverlap
from ragrig.tools.calibrate.config import CalibrateConfig, load_calibrate_config
from ragrig.tools.calibrate.mtrag import load_mtrag_human

from ..conftest import PROJECT, SHARED

TINY = (
    PROJECT / "tests" / "fixtures" / "tiny_mtrag" / "reference_subset_with_human_evaluations.json"
)
MTRAG = SHARED / "datasets" / "mtrag_human" / "reference_subset_with_human_evaluations.json.gz"


# --- metrics -------------------------------------------------------------------------------


def test_worked_example_judge_calibration(reference):
    ex = reference["judge_calibration"]
    y, s, t = ex["human_label"], ex["judge_score"], ex["threshold"]
    exp = ex["expected"]
    pred = M.predict(s, t)
    assert pred == exp["predicted"]
    assert round(M.balanced_accuracy(y, pred), 4) == exp["balanced_accuracy"] == 0.7333
    assert round(M.cohen_kappa(y, pred), 4) == exp["cohen_kappa"] == 0.4667
    assert round(M.roc_auc(y, s), 4) == exp["roc_auc"] == 0.8667
    assert round(M.ece(y, s, n_bins=2), 4) == exp["ece_2_bins"] == 0.0688
    # the stated bin rule: [0, 0.5) holds 0.4, 0.3, 0.2; [0.5, 1.0] the other five
    bins = M.reliability_bins(y, s, 2)
    assert [b.n for b in bins] == [3, 5]
    assert bins[0].mean_score == pytest.approx(0.3) and bins[0].share_faithful == pytest.approx(
        1 / 3
    )
    assert bins[1].mean_score == pytest.approx(0.71) and bins[1].share_faithful == 0.8


def test_prevalence_threshold_on_the_worked_example(reference):
    ex = reference["judge_calibration"]
    # 5 of 8 faithful: threshold 0.625; predicted 1 for 0.9, 0.8, 0.7 only: TPR 3/5, TNR 3/3
    t, ba = M.prevalence_threshold(ex["human_label"], ex["judge_score"])
    assert t == 0.625 and ba == pytest.approx((3 / 5 + 1) / 2)
    with pytest.raises(ValueError, match="both"):
        M.prevalence_threshold([1, 1], [0.2, 0.9])


def test_bin_edges_open_the_next_bin_and_one_is_in_the_last():
    bins = M.reliability_bins([1, 0, 1, 1], [0.3, 0.1, 1.0, 0.0], 10)
    assert [b.n for b in bins] == [1, 1, 0, 1, 0, 0, 0, 0, 0, 1]  # 0.3 in [0.3, 0.4)


def test_roc_auc_counts_ties_half():
    assert M.roc_auc([1, 0], [0.5, 0.5]) == 0.5
    # positives 0.9, 0.5; negatives 0.5, 0.1: pairs (0.9>0.5, 0.9>0.1, 0.5=0.5, 0.5>0.1) = 3.5/4
    assert M.roc_auc([1, 1, 0, 0], [0.9, 0.5, 0.5, 0.1]) == 0.875


def test_threshold_maximises_balanced_accuracy_ties_to_the_lower():
    # t=0.2 and t=0.4 both reach 0.75
    assert M.fit_threshold([0, 1, 0, 1], [0.1, 0.2, 0.3, 0.4]) == (0.2, 0.75)
    assert M.fit_threshold([0, 0, 1, 1], [0.1, 0.2, 0.7, 0.9]) == (0.7, 1.0)


@pytest.mark.parametrize(
    ("fn", "args", "match"),
    [
        (M.roc_auc, ([1, 1], [0.2, 0.9]), "needs both human classes"),
        (M.balanced_accuracy, ([0, 0], [0, 1]), "needs both human classes"),
        (M.fit_threshold, ([1, 1], [0.2, 0.9]), "needs both human classes"),
        (M.ece, ([1, 0], [0.2, 1.2]), r"must lie in \[0, 1\]"),
        (M.roc_auc, ([1, 0], [0.2, float("nan")]), "finite"),
        (M.roc_auc, ([], []), "no rows"),
        (M.roc_auc, ([1, 2], [0.2, 0.3]), "0 or 1"),
    ],
)
def test_metrics_refuse_what_they_cannot_measure(fn, args, match):
    with pytest.raises(ValueError, match=match):
        fn(*args)


def test_summarise_names_undefined_metrics_instead_of_nan():
    out = M.summarise([1, 1, 1], [0.2, 0.5, 0.9], 0.5, 2)
    assert out["roc_auc"] is None and "both human classes" in out["undefined"]["roc_auc"]
    assert out["ece"] == pytest.approx((0.2 - 1) / -3 + (2 / 3) * (1 - 0.7))


# --- loader --------------------------------------------------------------------------------


def test_loader_reads_the_fixture():
    rated = load_mtrag_human(TINY)
    assert rated.counts["evaluations"] == 16 and rated.counts["tasks"] == 8
    assert rated.counts["tasks_without_contexts"] == 1 and rated.counts["tasks_unrated"] == 0
    by = {(a.task_id, a.model_id): a for a in rated.answers}
    second = by[("t1<::>2", "reference")]
    assert second.question == "How much should an adult take?"
    assert second.history == (
        ("user", "What does aspirin do?"),
        ("agent", "It reduces fever and pain."),
    )
    assert second.judge_question("last_turn") == "How much should an adult take?"
    assert second.judge_question("conversation") == (
        "user: What does aspirin do?\nagent: It reduces fever and pain.\n"
        "user: How much should an adult take?"
    )
    assert second.contexts[0].startswith("Adults usually take") and len(second.contexts) == 2
    # faithful when the mean rating is >= 3: 4,3,2 (3.0) is, 3,3,2 (2.67) is not
    assert by[("t4<::>1", "reference")].faithful == 1
    assert by[("t5<::>1", "model-x")].faithful == 0
    assert by[("t4<::>1", "reference")].ratings == (4, 3, 2)
    assert rated.counts["faithful"] == 8
    assert load_mtrag_human(TINY, faithful_min_mean=3.5).counts["faithful"] == 7  # t4 out


def _bad(tmp_path: Path, mutate) -> Path:
    data = json.loads(TINY.read_text())
    mutate(data)
    path = tmp_path / "bad.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(data, fh)
    return path


def _rating(value):
    def mutate(d):
        d["evaluations"][2]["annotations"]["faithfulness"]["a1"]["value"] = value

    return mutate


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (
            lambda d: d["evaluations"][2].update(task_id="nope<::>1"),
            r"evaluations\[2\] \(task 'nope<::>1', model 'reference'\): task_id is not among",
        ),
        (_rating("5"), r"evaluations\[2\] .*faithfulness\['a1'\]: rating '5' is not one of 1-4"),
        (_rating("0"), r"rating '0' is not one of 1-4"),
        (_rating(""), r"rating '' is not one of 1-4"),
        (_rating(2.5), r"rating 2.5 is not one of 1-4"),
        (_rating(True), r"field 'value' must be"),
        (lambda d: d["evaluations"][2].pop("model_response"), r"missing field 'model_response'"),
        (
            lambda d: d["evaluations"][2]["annotations"].pop("faithfulness"),
            r"evaluations\[2\] .*missing field 'faithfulness'",
        ),
        (
            lambda d: d["evaluations"][2]["annotations"].update(faithfulness={}),
            r"evaluations\[2\] .*no faithfulness rating",
        ),
        (
            lambda d: d["evaluations"].append(copy.deepcopy(d["evaluations"][0])),
            r"evaluations\[16\] .*a second evaluation of the same task and model",
        ),
        (
            lambda d: d["tasks"][0]["contexts"].append({"document_id": "ghost"}),
            r"tasks\[0\] \(task 't1<::>1'\) contexts\[1\]: document_id 'ghost' is not among",
        ),
    ],
)
def test_loader_bad_input_is_one_clear_error(tmp_path, mutate, match):
    path = _bad(tmp_path, mutate)
    with pytest.raises(DataValidationError, match=match) as err:
        load_mtrag_human(path)
    assert str(path) in str(err.value)


def test_loader_missing_file_is_named(tmp_path):
    with pytest.raises(DataValidationError, match="not found: .*absent.json.gz"):
        load_mtrag_human(tmp_path / "absent.json.gz")


@pytest.mark.skipif(not MTRAG.exists(), reason="../shared/datasets/mtrag_human not present")
def test_loader_on_mtrag_matches_its_provenance():
    rated = load_mtrag_human(MTRAG)
    c = rated.counts
    assert (c["documents"], c["tasks"], c["evaluations"]) == (350, 159, 477)
    assert sum(len(a.ratings) for a in rated.answers) == 890 + 261 + 159 + 109
    assert sorted({len(a.ratings) for a in rated.answers}) == [2, 3]
    split = core.split_tasks((a.task_id for a in rated.answers), 13)
    assert (len(split.calibration), len(split.held_out)) == (80, 79)


# --- split and fitting ---------------------------------------------------------------------


def test_split_is_by_task_deterministic_and_documented():
    ids = [f"task{i}<::>{j}" for i in range(7) for j in (1, 2)] * 3  # 14 tasks, 3 answers each
    s = core.split_tasks(ids, seed=13)
    order = sorted(set(ids), key=lambda t: hashlib.sha256(f"13:{t}".encode()).hexdigest())
    assert s.calibration == frozenset(order[:7]) and s.held_out == frozenset(order[7:])
    assert core.split_tasks(list(reversed(ids)), seed=13) == s
    assert core.split_tasks(ids, seed=14).calibration != s.calibration
    odd = core.split_tasks([f"t{i}" for i in range(5)], seed=1)
    assert (len(odd.calibration), len(odd.held_out)) == (3, 2)


def test_split_by_conversation_keeps_every_turn_together():
    ids = [f"c{i}<::>{turn}" for i in range(9) for turn in range(1, 1 + i % 3 + 1)]
    s = core.split_tasks(ids, seed=13, group="conversation")
    convs = sorted({t.split("<::>")[0] for t in ids})
    order = sorted(convs, key=lambda c: hashlib.sha256(f"13:{c}".encode()).hexdigest())
    assert s.calibration == frozenset(t for t in ids if t.split("<::>")[0] in order[:5])
    assert s.held_out == frozenset(ids) - s.calibration
    by_task = core.split_tasks(ids, seed=13)
    straddling = {t.split("<::>")[0] for t in by_task.calibration} & {
        t.split("<::>")[0] for t in by_task.held_out
    }
    assert straddling  # which is what group=conversation prevents
    with pytest.raises(ValueError, match="need at least 2 conversations"):
        core.split_tasks(["c1<::>1", "c1<::>2"], seed=13, group="conversation")


def _rows(labels_scores: dict[str, list[tuple[int, float | None]]], split) -> list[core.Scored]:
    rows = []
    for tid, items in labels_scores.items():
        for i, (label, score) in enumerate(items):
            status = "no_claims" if score is None else "scored"
            rows.append(core.Scored(tid, f"m{i}", split.half(tid), label, status, score))
    return rows


def _data():
    tasks = [f"t{i}" for i in range(8)]
    split = core.split_tasks(tasks, seed=13)
    cal = sorted(split.calibration)
    held = sorted(split.held_out)
    data = {}
    for k, t in enumerate(cal):  # calibration: faithful at 0.6 and above
        data[t] = [(1, 0.6 + 0.05 * k), (0, 0.2 + 0.05 * k)]
    for k, t in enumerate(held):
        data[t] = [(1, 0.9 - 0.05 * k), (0, 0.5 + 0.01 * k)]
    return split, data, cal, held


def test_threshold_is_fitted_on_the_calibration_half_only():
    split, data, cal, held = _data()
    seen = []

    def spy(rows):
        seen.append({r.task_id for r, _ in rows})
        return core.fit_on(rows)

    result = core.evaluate(_rows(data, split), "faithful", 10, fit=spy)
    assert seen[0] == set(cal)  # the threshold that is reported and written
    assert seen[1] == set(held)  # the reverse direction, reported only
    assert result["threshold"] == 0.6
    assert result["reverse"]["threshold"] != result["threshold"]

    # perturbing every held-out label and score leaves the chosen threshold unchanged ...
    flipped = dict(data)
    for t in held:
        flipped[t] = [(1 - y, 1 - s) for y, s in data[t]]
    assert core.evaluate(_rows(flipped, split), "faithful", 10)["threshold"] == 0.6
    # ... while the same change on the calibration half moves it
    moved = dict(data)
    for t in cal:
        moved[t] = [(y, s * 0.5) for y, s in data[t]]
    assert core.evaluate(_rows(moved, split), "faithful", 10)["threshold"] == 0.3


def test_evaluate_reports_held_out_metrics_at_the_calibration_threshold():
    split, data, cal, held = _data()
    result = core.evaluate(_rows(data, split), "faithful", 10)
    h = result["held_out"]
    labels = [y for t in held for y, _ in data[t]]
    scores = [s for t in held for _, s in data[t]]
    assert h["n"] == 8 and h["threshold"] == 0.6
    assert h["balanced_accuracy"] == M.balanced_accuracy(labels, M.predict(scores, 0.6))
    assert h["roc_auc"] == M.roc_auc(labels, scores)
    assert result["all"]["n"] == 16


def test_a_held_out_half_of_one_class_is_reported_not_averaged():
    split, data, cal, held = _data()
    for t in held:
        data[t] = [(1, s) for _, s in data[t]]  # every held-out answer rated faithful
    result = core.evaluate(_rows(data, split), "faithful", 10)
    assert result["threshold"] == 0.6  # fitted on the calibration half as before
    assert result["held_out"]["roc_auc"] is None
    assert "both human classes" in result["held_out"]["undefined"]["roc_auc"]
    assert result["held_out"]["balanced_accuracy"] is None
    assert result["reverse"]["threshold"] is None
    assert "both human classes" in result["reverse"]["undefined"]
    # one class in the calibration half: nothing can be fitted, which is an error
    for t in cal:
        data[t] = [(1, s) for _, s in data[t]]
    with pytest.raises(ValueError, match="fitting a threshold needs both human classes"):
        core.evaluate(_rows(data, split), "faithful", 10)


@pytest.mark.parametrize(
    ("mode", "n_measured", "score_seen"), [("faithful", 17, 1.0), ("unfaithful", 17, 0.0)]
)
def test_no_claims_counted_apart_and_mapped(mode, n_measured, score_seen):
    split, data, cal, held = _data()
    data[held[0]] = [*data[held[0]], (1, None)]
    rows = _rows(data, split)
    result = core.evaluate(rows, mode, 10)
    assert result["status"]["no_claims"] == 1 and result["no_claims"]["human_faithful"] == 1
    assert result["n_measured"] == n_measured
    used = dict(((r.task_id, r.model_id), s) for r, s in core.metric_rows(rows, mode))
    assert used[(held[0], "m2")] == score_seen


def test_no_claims_excluded_is_still_counted():
    split, data, cal, held = _data()
    data[held[0]] = [*data[held[0]], (1, None)]
    result = core.evaluate(_rows(data, split), "exclude", 10)
    assert result["n"] == 17 and result["n_measured"] == 16
    assert result["status"]["no_claims"] == 1


class _Raises:
    name = "broken"

    def __init__(self, exc):
        self.exc = exc

    def __call__(self, item, question):
        if item.model_id == "model-x" and item.task_id == "t2<::>1":
            raise self.exc
        return (0.9 if item.model_id == "reference" else 0.1), ""


def test_scorer_failures_are_counted_not_dropped():
    from ragrig.judge import InvalidVerdict

    rated = load_mtrag_human(TINY)
    split = core.split_tasks((a.task_id for a in rated.answers), 13)
    rows = core.score_answers(_Raises(TimeoutError("slow")), rated.answers, split, "conversation")
    assert [r.status for r in rows].count("error") == 1
    bad = next(r for r in rows if r.status == "error")
    assert bad.reason == "TimeoutError: slow" and bad.score is None
    rows = core.score_answers(_Raises(InvalidVerdict("x")), rated.answers, split, "last_turn")
    result = core.evaluate(rows, "faithful", 10)
    assert result["status"]["invalid"] == 1 and result["n_measured"] == 15
    assert result["errors"] == [
        {"task_id": "t2<::>1", "model_id": "model-x", "status": "invalid", "reason": "x"}
    ]


def test_naive_overlap_baseline():
    naive = NaiveOverlap()
    # content words (stemmed, stop words out): aspirin, reduc, fever, quick -> 3 of 4 found
    assert naive.score("Aspirin reduces fever quickly.", ["Aspirin reduces", "a fever."]) == 0.75
    assert naive.score("It is not.", ["anything"]) is None  # no content word
    assert naive.score("Oslo is the capital.", []) == 0.0


# --- config and the command ----------------------------------------------------------------


def test_write_decision_threshold_keeps_the_file_and_replaces_its_own_line(tmp_path):
    path = tmp_path / "overlap.yaml"
    shutil.copy(PROJECT / "conf" / "judge" / "overlap.yaml", path)
    before = path.read_text()
    write_decision_threshold(path, 0.123456, "chosen by a test")
    write_decision_threshold(path, 0.5, "chosen again")
    text = path.read_text()
    assert text.count("decision_threshold:") == 2  # the comment and the key, once each
    assert "# decision_threshold: chosen again\ndecision_threshold: 0.5\n" in text
    assert "chosen by a test" not in text
    assert yaml.safe_load(text)["decision_threshold"] == 0.5
    kept = [
        ln for ln in before.splitlines() if not ln.startswith(("decision_threshold", "# decision"))
    ]
    assert all(ln in text.splitlines() for ln in kept)
    with pytest.raises(ConfigError, match="decision_threshold"):
        write_decision_threshold(path, 1.5, "out of range")
    assert yaml.safe_load(path.read_text())["decision_threshold"] == 0.5  # untouched


def test_committed_calibrate_config_validates_and_is_outside_params():
    cfg = load_calibrate_config(PROJECT / "conf" / "calibrate.yaml")
    assert cfg == CalibrateConfig()  # the file spells out the defaults
    assert "calibrate" not in yaml.safe_load((PROJECT / "params.yaml").read_text())


def test_calibrate_config_refuses_unknown_keys(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("judges: [overlap]\nthreshold: 0.5\n")
    with pytest.raises(ConfigError, match="threshold"):
        load_calibrate_config(path)


def _project(tmp_path: Path) -> Path:
    (tmp_path / "conf" / "judge").mkdir(parents=True)
    shutil.copy(PROJECT / "conf" / "judge" / "overlap.yaml", tmp_path / "conf" / "judge")
    shutil.copy(PROJECT / "conf" / "config.yaml", tmp_path / "conf")  # the default judge
    (tmp_path / "conf" / "calibrate.yaml").write_text(
        (PROJECT / "conf" / "calibrate.yaml")
        .read_text()
        .replace("../shared/datasets/mtrag_human/", "data/")
        .replace("judges: [overlap, verifier]", "judges: [overlap]")  # no trained model here
    )
    (tmp_path / "data").mkdir()
    with gzip.open(tmp_path / "data" / (TINY.name + ".gz"), "wt") as fh:
        fh.write(TINY.read_text())
    shutil.copy(TINY.parent / "mtragun_reference_generation_tasks.jsonl", tmp_path / "data")
    return tmp_path


def test_ragrig_calibrate_end_to_end_on_the_fixture(tmp_path, monkeypatch, capsys):
    from ragrig.cli import app as cli

    root = _project(tmp_path)
    monkeypatch.chdir(root)
    assert cli.main(["calibrate"]) == 0
    out = capsys.readouterr().out
    assert "16 rated answers (8 faithful" in out and "naive_overlap" in out
    report = json.loads((root / "reports/calibration/calibration.json").read_text())
    same = "naive_overlap on overlap's answers"
    assert set(report["scorers"]) == {"overlap", "naive_overlap", same}
    # no_claims excluded (the default): t7's reference declines, so overlap scores 15 answers
    # and counts one no_claims; the baseline is measured again on exactly those 15. Held out
    # without t7's reference: faithful 1, 7/8, 1 vs unfaithful 1/7, 1/7, 0, 0: every pair won
    assert report["scorers"]["overlap"]["n_measured"] == 15
    assert report["scorers"]["overlap"]["status"]["no_claims"] == 1
    assert report["scorers"][same]["n"] == 15 and report["scorers"][same]["kind"] == "baseline"
    assert report["scorers"][same]["scorer"] == "naive_overlap"
    assert report["scorers"][same]["held_out"]["roc_auc"] == 1.0
    # threshold_rule auto: the overlap judge's score is its fitted answer model's probability,
    # so its threshold is the calibration half's share of faithful answers; the baseline's is
    # the balanced-accuracy maximum
    overlap = report["scorers"]["overlap"]
    cal = overlap["reverse"]["calibration"]
    assert overlap["threshold_rule"] == "prevalence"
    assert overlap["threshold"] == cal["n_faithful"] / cal["n"]
    assert report["scorers"]["naive_overlap"]["threshold_rule"] == "max_balanced_accuracy"
    assert report["split"]["tasks"] == {"calibration": 4, "held_out": 4}
    naive = report["scorers"]["naive_overlap"]
    assert naive["n"] == 16 and naive["kind"] == "baseline"
    # held out (t1<::>1, t3, t6, t7): faithful scores 1, 7/8, 1 and 0 (t7's refusal, no
    # context); unfaithful 1/7, 1/7, 0, 0. Pairs won: 4 + 4 + 4 + two ties (0.5 each) = 13 of 16
    assert naive["held_out"]["roc_auc"] == 13 / 16
    assert naive["threshold"] == pytest.approx(5 / 6)  # calibration: 1, 1, 1, 5/6 vs <= 1/4
    written = yaml.safe_load((root / "conf/judge/overlap.yaml").read_text())["decision_threshold"]
    assert written == report["scorers"]["overlap"]["threshold"]  # exact: no rounding
    assert report["dataset"] == "data/reference_subset_with_human_evaluations.json.gz"
    assert report["reliability_plot"] == "reports/calibration/reliability.png"
    assert report["thresholds_written"] == {
        "overlap": {"path": "conf/judge/overlap.yaml", "value": written}
    }
    assert (root / "reports/calibration/reliability.png").read_bytes()[:4] == b"\x89PNG"
    # leave-one-domain-out: the overlap judge's answer model refitted on the other domain's
    # answers per fold; t7's refusal is no_claims, so beta decides 7 answers
    lodo = report["transfer"]["domain"]
    assert lodo["groups"] == ["alpha", "beta"]
    fold = lodo["scorers"]["overlap"]
    assert fold["answer_model"] == "refitted per fold"
    assert [fold["groups"][g]["n"] for g in ("alpha", "beta")] == [8, 7]
    assert lodo["holds_up"]["default_judge"] == "overlap" and lodo["holds_up"]["ranking"] == [
        "overlap"
    ]
    assert "leave-one-domain-out (fit on the other domains" in out
    assert "default judge overlap holds up best (by the worst domain)" in out
    # the PPI coverage simulation asks for 50-200 labels: the fixture has 15 measured answers
    ppi = report["ppi_coverage"]["overlap"]
    assert ppi["n_answers"] == 15
    assert ppi["decision"][0] == {"n": 50, "undefined": "coverage: n must be in [2, 15], got 50"}
    csv_lines = (root / "reports/calibration/scores.csv").read_text().splitlines()
    assert len(csv_lines) == 1 + 2 * 16
    # --no-write leaves the judge config as it is
    (root / "conf/judge/overlap.yaml").write_text("method: overlap\n")
    assert cli.main(["calibrate", "--no-write", "--out-dir", "other"]) == 0
    assert (root / "conf/judge/overlap.yaml").read_text() == "method: overlap\n"
    assert (root / "other" / "calibration.json").exists()


def test_ragrig_calibrate_bad_file_is_one_error_line(tmp_path, monkeypatch, capsys):
    from ragrig.cli import app as cli

    root = _project(tmp_path)
    data = json.loads(TINY.read_text())
    data["evaluations"][5]["annotations"]["faithfulness"]["a0"]["value"] = "7"
    bad = root / "bad.json"
    bad.write_text(json.dumps(data))
    before = (root / "conf/judge/overlap.yaml").read_text()
    monkeypatch.chdir(root)
    assert cli.main(["calibrate", "--dataset", str(bad)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and "evaluations[5]" in err[0]
    assert "rating '7' is not one of 1-4" in err[0]
    assert (root / "conf/judge/overlap.yaml").read_text() == before
    assert not (root / "reports").exists()
