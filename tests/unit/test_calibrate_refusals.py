"""Refusal detection of each judge against MTRAG answerability, and bad answerability input."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import pytest

from ragrig.core.errors import DataValidationError
from ragrig.tools.calibrate.mtrag import load_mtrag_human
from ragrig.tools.calibrate.refusals import (
    answerability_label,
    detection,
    judge_reference_answers,
    load_reference_answers,
)

from ..conftest import PROJECT, SHARED

FIXTURES = PROJECT / "tests" / "fixtures" / "tiny_mtrag"
TINY = FIXTURES / "reference_subset_with_human_evaluations.json"
TASKS = FIXTURES / "mtragun_reference_generation_tasks.jsonl"
MTRAG_UN = SHARED / "datasets" / "mtrag_human" / "mtragun_reference_generation_tasks.jsonl.gz"


def test_detection_counts_precision_recall_and_keeps_other_labels_apart():
    d = detection(
        [
            ("UNANSWERABLE", "refusal"),
            ("UNANSWERABLE", "answer"),
            ("UNANSWERABLE", "partial_refusal"),
            ("ANSWERABLE", "refusal"),
            ("ANSWERABLE", "answer"),
            ("ANSWERABLE", "answer"),
            ("PARTIAL", "refusal"),
            ("", "answer"),
            ("ANSWERABLE", ""),  # the judge failed
        ]
    )
    assert (d["tp"], d["fn"], d["fp"], d["tn"]) == (1, 2, 1, 2)
    assert (d["precision"], d["recall"]) == (0.5, pytest.approx(1 / 3))
    assert d["false_refusal_rate"] == pytest.approx(1 / 3)
    assert d["partial_refusals_labelled"] == 1 and d["not_judged"] == 1
    assert d["by_label"]["PARTIAL"] == {"answers": 1, "refusal": 1, "partial_refusal": 0}
    assert d["by_label"]["none"]["answers"] == 1
    assert detection([("ANSWERABLE", "answer")])["precision"] is None  # no 0/0


def test_reference_answers_loader_reads_the_fixture():
    answers, counts = load_reference_answers(TASKS)
    assert counts == {
        "tasks": 6,
        "answerability_ANSWERABLE": 2,
        "answerability_UNANSWERABLE": 3,
        "answerability_UNDERSPECIFIED": 1,
    }
    second = next(a for a in answers if a.task_id == "u1<::>2")
    assert second.last_turn == "Who invented it?"
    assert second.question == (
        "user: What does aspirin do?\nagent: It reduces fever.\nuser: Who invented it?"
    )
    assert second.contexts == () and second.answerability == "UNANSWERABLE"


def test_overlap_judge_refusal_detection_on_the_fixture():
    from ragrig.judge import make_judge
    from ragrig.tools.calibrate import load_judge_config

    judge = make_judge(load_judge_config(PROJECT, "overlap"))
    answers, _ = load_reference_answers(TASKS)
    pairs, errors = judge_reference_answers(judge, answers, "conversation")
    assert errors == []
    d = detection(pairs)
    # u1<::>2 and u2 decline (tp 2); u3 answers an unanswerable task (fn); u4 declines an
    # answerable one (fp); u1<::>1 answers (tn); u5 is UNDERSPECIFIED (apart)
    assert (d["tp"], d["fn"], d["fp"], d["tn"]) == (2, 1, 1, 1)
    assert d["by_label"]["UNDERSPECIFIED"]["answers"] == 1


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("{not json", r":1: not JSON"),
        ('{"task_id": "x", "input": [], "contexts": [], "targets": [{"text": "a"}]}', "user turn"),
        (
            '{"task_id": "x", "input": [{"speaker": "user", "text": "q"}], "contexts": [], '
            '"targets": []}',
            r":1 \(task 'x'\): no target answer",
        ),
        (
            '{"task_id": "x", "input": [{"speaker": "user", "text": "q"}], "contexts": [], '
            '"targets": [{"text": "a"}], "answerability": ["MAYBE"]}',
            r"answerability \['MAYBE'\] is not one list of one of",
        ),
        (
            '{"task_id": "x", "input": [{"speaker": "user", "text": "q"}], "contexts": [{}], '
            '"targets": [{"text": "a"}]}',
            r"contexts\[0\]: missing field 'text'",
        ),
    ],
)
def test_reference_answers_bad_input_is_one_clear_error(tmp_path, line, match):
    path = tmp_path / "tasks.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(DataValidationError, match=match) as err:
        load_reference_answers(path)
    assert str(path) in str(err.value)


def test_duplicate_reference_task_is_an_error(tmp_path):
    path = tmp_path / "tasks.jsonl"
    first = TASKS.read_text().splitlines()[0]
    path.write_text(first + "\n" + first + "\n")
    with pytest.raises(DataValidationError, match=r":2 \(task 'u1<::>1'\): duplicate task_id"):
        load_reference_answers(path)


def test_answerability_label_rules():
    assert answerability_label(["UNANSWERABLE"], "w") == "UNANSWERABLE"
    assert answerability_label(None, "w") == "" and answerability_label([], "w") == ""
    for bad in ("ANSWERABLE", ["ANSWERABLE", "PARTIAL"], [3], ["answerable"]):
        with pytest.raises(DataValidationError, match="w: answerability"):
            answerability_label(bad, "w")


def _rated_with(tmp_path: Path, mutate) -> Path:
    data = json.loads(TINY.read_text())
    data = copy.deepcopy(data)
    mutate(data)
    path = tmp_path / "bad.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(data, fh)
    return path


def test_rated_file_answerability_unknown_is_an_error_and_absent_is_counted(tmp_path):
    bad = _rated_with(tmp_path, lambda d: d["tasks"][3].update(Answerability="ANSWERABLE"))
    with pytest.raises(DataValidationError, match=r"tasks\[3\] \(task 't3<::>1'\): answerability"):
        load_mtrag_human(bad)
    gone = _rated_with(tmp_path, lambda d: d["tasks"][3].pop("Answerability"))
    rated = load_mtrag_human(gone)
    assert rated.counts["tasks_without_answerability"] == 1
    assert load_mtrag_human(TINY).counts["tasks_without_answerability"] == 0


def test_calibration_report_has_refusal_detection_per_judge(tmp_path, monkeypatch, capsys):
    from ragrig.cli import app as cli

    from .test_calibration import _project

    root = _project(tmp_path)
    monkeypatch.chdir(root)
    assert cli.main(["calibrate", "--no-write"]) == 0
    out = capsys.readouterr().out
    assert "refusal detection overlap on reference answers: precision 0.667 recall 0.667" in out
    report = json.loads((root / "reports/calibration/calibration.json").read_text())
    section = report["refusal_detection"]
    assert set(section["judges"]) == {"overlap"}  # the baseline has no answer kind
    rated = section["judges"]["overlap"]["human_rated"]
    # t7 (UNANSWERABLE): the reference declines, model-x answers; every other task answerable
    assert (rated["tp"], rated["fn"], rated["fp"], rated["tn"]) == (1, 1, 0, 14)
    assert section["reference_answers_counts"]["tasks"] == 6


@pytest.mark.skipif(not MTRAG_UN.exists(), reason="../shared/datasets/mtrag_human not present")
def test_mtrag_un_reference_answers_match_the_provenance():
    answers, counts = load_reference_answers(MTRAG_UN)
    assert counts == {
        "tasks": 507,
        "answerability_ANSWERABLE": 285,
        "answerability_UNANSWERABLE": 97,
        "answerability_PARTIAL": 47,
        "answerability_UNDERSPECIFIED": 78,
    }
