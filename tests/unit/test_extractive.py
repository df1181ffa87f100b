"""The answer model of judge=overlap: its extractive measures, the logistic score, the fit on
the calibration half only, and the judge and calibrate wiring."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import yaml

from ragrig.core.config import validate_section
from ragrig.core.errors import ConfigError
from ragrig.judge.extractive import FEATURES, AnswerModel, features, fit_answer_model
from ragrig.judge.overlap import OverlapJudge
from ragrig.tools.calibrate import core, write_fitted
from ragrig.tools.calibrate.mtrag import load_mtrag_human

from ..conftest import PROJECT

TINY = (
    PROJECT / "tests" / "fixtures" / "tiny_mtrag" / "reference_subset_with_human_evaluations.json"
)


def test_fragment_coverage_and_overlaps_by_hand():
    # answer words: the cat sat on the mat; greedy fragments: "the cat sat on" (4), "the" (1),
    # "mat" (1): every word is covered, 4 of 6 by fragments of 2+ words
    f = features("The cat sat on the mat [1].", ["the cat sat on a mat"])
    assert f["coverage_1"] == 1.0
    assert f["coverage_2"] == f["coverage_3"] == f["coverage_4"] == pytest.approx(4 / 6)
    assert f["sentence_mean_3"] == f["sentence_min_3"] == pytest.approx(4 / 6)
    # content words cat, sat, mat and their two bigrams are all in the passage
    assert f["content_overlap"] == f["content_bigrams"] == 1.0
    assert list(f) == list(FEATURES)


def test_fragments_do_not_span_two_passages():
    f = features("alpha beta gamma delta", ["alpha beta", "gamma delta"])
    assert f["coverage_2"] == 1.0
    assert f["coverage_3"] == 0.0  # "beta gamma" is in no single passage


def test_invented_sentence_shows_in_the_minimum():
    ctx = ["Aspirin reduces fever in adults. It is taken with water."]
    f = features("Aspirin reduces fever in adults. Zebras migrate across the plains.", ctx)
    assert f["sentence_min_3"] == 0.0
    assert f["sentence_mean_3"] == pytest.approx(0.5)
    assert f["coverage_1"] == pytest.approx(5 / 10)


def test_answer_with_no_word_scores_nothing_invented():
    assert set(features("[1] [2].", ["anything"]).values()) == {1.0}


def test_probability_is_the_logistic_of_the_weighted_measures():
    m = AnswerModel(("coverage_1", "content_overlap"), (2.0, -1.0), 0.5)
    measures = dict.fromkeys(FEATURES, 0.0) | {"coverage_1": 0.75, "content_overlap": 0.5}
    assert m.probability(measures) == pytest.approx(1 / (1 + math.exp(-(0.5 + 1.5 - 0.5))))
    big = AnswerModel(("coverage_1",), (-1000.0,), 0.0)  # no overflow either way
    assert big.probability(measures) == pytest.approx(0.0, abs=1e-300)


@pytest.mark.parametrize(
    "cfg, match",
    [
        ({"features": ["coverage_9"], "coef": [1.0], "intercept": 0.0}, "unknown"),
        ({"features": ["coverage_1"], "coef": [1.0, 2.0], "intercept": 0.0}, "2 coefficients"),
        ({"features": ["coverage_1"], "coef": [float("nan")], "intercept": 0.0}, "finite"),
    ],
)
def test_bad_answer_model_config_is_refused(cfg, match):
    with pytest.raises(ConfigError, match=match):
        validate_section("judge", {"method": "overlap", "answer_model": cfg})


def test_overlap_judge_answer_score_is_the_model_probability():
    model = AnswerModel(FEATURES, tuple(float(i) / 10 for i in range(len(FEATURES))), -1.0)
    judge = OverlapJudge(answer_model=model)
    ctx = ["Mars has two moons, Phobos and Deimos."]
    v = judge.judge("How many moons?", "Mars has two moons.", ctx)
    assert v.answer_score == pytest.approx(model.score("Mars has two moons.", ctx))
    assert v.soft_score == v.answer_score and v.score == 1.0
    refusal = judge.judge("q", "I do not have specific information.", ctx)
    assert (refusal.outcome, refusal.answer_score, refusal.soft_score) == ("no_claims", None, None)
    assert OverlapJudge().judge("q", "Mars has two moons.", ctx).answer_score is None


def test_fit_is_deterministic_and_learns_the_direction():
    rows = [dict.fromkeys(FEATURES, v) for v in (0.9, 0.8, 0.85, 0.2, 0.1, 0.3)]
    labels = [1, 1, 1, 0, 0, 0]
    a, b = fit_answer_model(rows, labels), fit_answer_model(rows, labels)
    assert a == b
    assert a.probability(rows[0]) > 0.5 > a.probability(rows[4])
    assert all(round(c, 6) == c for c in a.coef)
    with pytest.raises(ValueError, match="both faithful and unfaithful"):
        fit_answer_model(rows[:3], labels[:3])


def test_answer_model_is_fitted_on_the_calibration_half_only():
    rated = load_mtrag_human(TINY)
    split = core.split_tasks([a.task_id for a in rated.answers], 13)
    fitted = core.fit_answer_model_on(rated.answers, split)
    # the held-out half rewritten: other answers, flipped labels; the fit cannot change
    poisoned = [
        a
        if split.half(a.task_id) == core.CALIBRATION
        else dataclasses.replace(
            a, answer="Completely different words here.", faithful=1 - a.faithful
        )
        for a in rated.answers
    ]
    assert core.fit_answer_model_on(poisoned, split) == fitted
    # and the reverse model reads the held-out half
    assert core.fit_answer_model_on(poisoned, split, core.HELD_OUT) != core.fit_answer_model_on(
        rated.answers, split, core.HELD_OUT
    )


def test_write_fitted_replaces_its_own_lines(tmp_path: Path):
    path = tmp_path / "overlap.yaml"
    path.write_text("# the judge\nmethod: overlap\nsupport_threshold: 0.6\n", encoding="utf-8")
    model = {"features": ["coverage_1"], "coef": [1.5], "intercept": -0.25}
    for _ in range(2):  # written twice: still one of each
        write_fitted(
            path,
            [
                ("answer_model", json.dumps(model), "fitted by a test"),
                ("decision_threshold", "0.5", "chosen by a test"),
            ],
        )
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert sum(ln.startswith("answer_model:") for ln in lines) == 1
    assert lines.count("# answer_model: fitted by a test") == 1
    cfg = yaml.safe_load(text)
    assert cfg["answer_model"] == model and cfg["decision_threshold"] == 0.5
    assert text.startswith("# the judge\nmethod: overlap\n")
    with pytest.raises(ConfigError):
        write_fitted(path, [("answer_model", json.dumps({"features": ["x"]}), "bad")])
    assert yaml.safe_load(path.read_text(encoding="utf-8"))["answer_model"] == model


def test_committed_overlap_config_holds_a_fitted_answer_model():
    cfg = validate_section(
        "judge", yaml.safe_load((PROJECT / "conf" / "judge" / "overlap.yaml").read_text())
    )
    assert cfg.answer_model is not None and tuple(cfg.answer_model.features) == FEATURES
