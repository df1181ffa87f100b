"""The transfer check of `ragrig calibrate` (ragrig.tools.calibrate.transfer): leave one domain or
responder out, fit on the others, decide the held-out one."""

from __future__ import annotations

import pytest

from ragrig.judge import make_judge
from ragrig.judge.config import AnswerModelConfig
from ragrig.judge.extractive import features, fit_answer_model
from ragrig.tools.calibrate import core, transfer
from ragrig.tools.calibrate.baselines import NaiveOverlap
from ragrig.tools.calibrate.mtrag import load_mtrag_human

from .test_calibration import TINY


@pytest.fixture(scope="module")
def rated():
    return load_mtrag_human(TINY).answers


def _judge_scorer(model=None):
    from ragrig.tools.calibrate import load_judge_config

    from ..conftest import PROJECT

    jc = load_judge_config(PROJECT, "overlap")
    if model is not None:
        jc = jc.model_copy(update={"answer_model": AnswerModelConfig(**model.as_config())})
    return core.JudgeScorer("overlap", make_judge(jc), veto=jc.veto)


def _all_rows(scorer, answers):
    split = core.split_tasks((a.task_id for a in answers), 13)
    return core.score_answers(scorer, answers, split, "conversation")


def test_rescoring_a_verdict_equals_judging_again_with_that_answer_model(rated):
    beta = [a for a in rated if a.domain == "beta"]
    model = fit_answer_model(
        [features(a.answer, a.contexts) for a in beta], [a.faithful for a in beta]
    )
    first = _judge_scorer()
    _all_rows(first, rated)
    again = {(r.task_id, r.model_id): r for r in _all_rows(_judge_scorer(model), rated)}
    got = transfer.rescored(first, rated, model)
    assert len(got) == 16
    for r in got:
        want = again[(r.task_id, r.model_id)]
        assert (r.status, r.score, r.reason) == (want.status, want.score, want.reason)
    # the configured model and the refitted one disagree somewhere: the rescoring did something
    assert any(
        r.score != s.score for r, s in zip(got, _all_rows(_judge_scorer(), rated), strict=True)
    )


def test_leave_one_domain_out_fits_on_the_other_domain_only(rated):
    naive = core.BaselineScorer("naive_overlap", NaiveOverlap())
    rows = _all_rows(naive, rated)
    rep = transfer.transfer_report(
        ["domain", "responder"],
        rated,
        {"naive_overlap": rows},
        {"naive_overlap": naive},
        {"naive_overlap": core.fit_on},
        set(),
        "exclude",
        2,
        "overlap",
        [],
    )
    groups = rep["domain"]["scorers"]["naive_overlap"]["groups"]
    # alpha (t1 x2, t2, t3): faithful 1, 1, 1, 7/8, unfaithful 1/7, 1/7, 0, 1/7; beta (t4-t7):
    # faithful 1, 5/6, 1, 0 (t7 declines), unfaithful 1/7, 1/4, 0, 0 (fixture README).
    # Fitted on beta, the balanced-accuracy maximum is 5/6 (TPR 3/4, TNR 1): on alpha every
    # answer is decided right. Fitted on alpha it is 7/8: on beta 5/6 and t7 fall below, TPR 2/4
    assert groups["alpha"]["threshold"] == pytest.approx(5 / 6)
    assert groups["alpha"]["balanced_accuracy"] == 1.0
    assert groups["beta"]["threshold"] == 0.875 and groups["beta"]["balanced_accuracy"] == 0.75
    assert groups["beta"]["n"] == groups["beta"]["n_fitted_on"] == 8
    summary = rep["domain"]["scorers"]["naive_overlap"]
    assert (summary["balanced_accuracy_mean"], summary["balanced_accuracy_min"]) == (0.875, 0.75)
    # responders: every reference answer but none of model-x's is faithful, so fitting on the
    # other responder sees one human class: undefined, with the reason, never a number
    resp = rep["responder"]["scorers"]["naive_overlap"]
    assert resp["balanced_accuracy_mean"] is None and resp["groups_undefined"] == [
        "model-x",
        "reference",
    ]
    assert "all 8 labels are 1" in resp["groups"]["model-x"]["undefined"]["fit"]
    lines = transfer.format_transfer(rep)
    assert lines[1] == (
        "  naive_overlap: alpha 1.000 (n=8), beta 0.750 (n=8); mean 0.875, min 0.750"
    )


def test_one_group_is_said_and_an_unknown_factor_raises(rated):
    alpha = [a for a in rated if a.domain == "alpha"]
    naive = core.BaselineScorer("naive_overlap", NaiveOverlap())
    args = ({"n": _all_rows(naive, alpha)}, {"n": naive}, {"n": core.fit_on}, set(), "exclude", 2)
    rep = transfer.transfer_report(["domain"], alpha, *args, None, [])
    assert rep == {
        "domain": {"groups": ["alpha"], "undefined": "one domain only: nothing to hold out"}
    }
    assert transfer.format_transfer(rep) == [
        "leave-one-domain-out: not measured (one domain only: nothing to hold out)"
    ]
    with pytest.raises(ValueError, match=r"unknown transfer factor\(s\) \['tenant'\]"):
        transfer.transfer_report(["tenant"], alpha, *args, None, [])
