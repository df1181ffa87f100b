"""Why an answer was judged unfaithful, where people look: the answers page (claim marks, the
deciding claim, the evidence read, CSS-only filters, escaping) and the MLflow traces' feedback."""

from __future__ import annotations

import json
import re

from ragrig.judge.step import _MODE_OF_KIND
from ragrig.metrics.reasons import (
    MODE_OF_KIND,
    ClaimMark,
    Finding,
    Reason,
    claim_marks,
    deciding,
    rationale,
)
from ragrig.report.answers_page import answers_page_html, scorecard_section
from ragrig.report.html import run_page_html
from ragrig.tracking.contents import answer_traces

from ..html_pages import CONFIRMED, VETO, WINDOW, answers_pair, known_metrics
from .test_html import assert_self_contained

Q1 = (
    'unfaithful (contradiction): deciding claim "The trial reduced mortality" (contradicted; '
    "negation finding confirmed by the verifier: P(support) 0.012); evidence read: "
    f'"{WINDOW}"'
)
Q2 = (
    'unfaithful (fabrication): deciding claim "It cures colds" (not addressed; P(support) '
    "0.120); no evidence sentence found"
)
Q5 = (
    'unfaithful (wrong_number): deciding claim "It enrolled 25 patients" (contradicted; number '
    "finding: 25 is in no passage); no evidence sentence found"
)


def _row(qid: str) -> dict:
    _, _, j, _ = answers_pair()
    return j.set_index("qid").loc[qid].to_dict()


def test_claims_are_marked_supported_contradicted_or_not_addressed():
    q1, q2 = _row("q1"), _row("q2")
    negation = Finding(
        "The trial reduced mortality", "negation", "the context negates what the claim states"
    )
    confirmed = Finding("The trial reduced mortality", "contradicted", CONFIRMED)
    assert claim_marks(q1["claims"], q1["contradictions"]) == [
        ClaimMark("The trial reduced mortality", "contradicted", None, (negation, confirmed)),
        ClaimMark("It enrolled 40 patients", "supported", None, ()),
    ]
    assert [(m.mark, m.p_supported) for m in claim_marks(q2["claims"], "[]")] == [
        ("supported", 0.91),
        ("not_addressed", 0.12),
        ("not_addressed", 0.3),
    ]
    # a fabricated finding: the context holds neither the name nor the claim's words
    fab = json.dumps([{"claim": "Zorbex cures colds", "kind": "fabricated", "detail": "Zorbex"}])
    (mark,) = claim_marks(json.dumps([{"claim": "Zorbex cures colds", "supported": False}]), fab)
    assert mark.mark == "not_addressed"
    assert mark.findings[0].reading == (
        "fabricated finding: Zorbex is in no passage, nor are the claim's words"
    )
    assert confirmed.evidence == WINDOW and negation.evidence is None
    # the verifier's confirmation without a window to read
    bare = Finding("c", "contradicted", "entity finding confirmed by the verifier: P(support) "
                   "0.000 (no context window shares its words)")  # fmt: skip
    assert bare.evidence is None


def test_the_deciding_claim_follows_the_judges_veto_and_failure_mode():
    q1 = _row("q1")
    # with the judge's veto the decisive finding is the vetoed `contradicted` one, which names
    # the window the verifier read; without it, the first finding of the failure mode's kinds
    with_veto = deciding(q1["claims"], q1["contradictions"], "contradiction", VETO)
    assert (with_veto.claim, with_veto.mark, with_veto.finding.kind) == (
        "The trial reduced mortality",
        "contradicted",
        "contradicted",
    )
    assert with_veto.evidence == WINDOW and with_veto.text() == Q1
    without = deciding(q1["claims"], q1["contradictions"], "contradiction")
    assert without.finding.kind == "negation" and without.evidence is None
    q2, q5 = _row("q2"), _row("q5")
    assert deciding(q2["claims"], q2["contradictions"], "fabrication", VETO).text() == Q2
    assert deciding(q5["claims"], q5["contradictions"], "wrong_number", VETO).text() == Q5
    assert deciding(q1["claims"], q1["contradictions"], "") is None  # a faithful answer
    # overgeneralisation: every claim supported; the weakest named where claims are scored
    scored = json.dumps(
        [
            {"claim": "A holds here", "supported": True, "p_supported": 0.7},
            {"claim": "B holds there", "supported": True, "p_supported": 0.55},
        ]
    )
    over = deciding(scored, "[]", "overgeneralisation")
    assert over == Reason("overgeneralisation", "B holds there", "supported", 0.55)
    assert over.text() == (
        'unfaithful (overgeneralisation): weakest claim "B holds there" (supported; '
        "P(support) 0.550); no evidence sentence found"
    )
    plain = json.dumps([{"claim": "A holds here", "supported": True}])
    assert deciding(plain, "[]", "overgeneralisation").text() == (
        "unfaithful (overgeneralisation): every claim has support, but the answer-level score "
        "is below the decision threshold; no evidence sentence found"
    )
    assert with_veto.metadata() == {
        "failure_mode": "contradiction",
        "deciding_claim": "The trial reduced mortality",
        "verdict": "contradicted",
        "p_supported": "",
        "finding": "negation finding confirmed by the verifier: P(support) 0.012",
        "evidence": WINDOW,
    }
    assert rationale(True, None, 3, 2) == "faithful: 2 of 3 claims supported"
    assert rationale(None, None) == ""


def test_failure_modes_of_finding_kinds_are_the_judges():
    assert MODE_OF_KIND == _MODE_OF_KIND


def _articles(page: str) -> dict[str, str]:
    return dict(
        re.findall(r'<article class="answer [^"]*" id="a-(\w+)">(.*?)</article>', page, re.S)
    )


def test_answers_page_shows_each_answer_with_its_claims_passages_and_reasons():
    queries, generations, judgments, slices = answers_pair()
    page = answers_page_html(queries, generations, judgments, slices, VETO, back="../index.html")
    assert_self_contained(page)
    # unfaithful first, then undecided, then faithful; the generations' order within each
    order = re.findall(r'<article class="(answer [^"]*)" id="a-(\w+)">', page)
    assert order == [
        ("answer v-unfaithful m-0 s-2", "q1"),
        ("answer v-unfaithful m-2 s-0", "q2"),
        ("answer v-unfaithful m-1 s-2", "q5"),
        ("answer v-undecided s-1", "q4"),
        ("answer v-faithful s-2", "q3"),
    ]
    a = _articles(page)
    # untrusted text escaped: the answer's script and the passage's markup are text
    assert "<script" not in page
    assert (
        '<p class="text answer-text">The trial reduced mortality &lt;script&gt;alert(1)'
        "&lt;/script&gt;. It enrolled 40 patients.</p>" in a["q1"]
    )
    assert '<li class="text">Aspirin &lt;b&gt;lowers&lt;/b&gt; fever.</li>' in a["q1"]
    # the deciding claim, its verdict, the finding and the evidence read, marked in its passage
    assert (
        '<div class="why"><b>why unfaithful</b> (contradiction): deciding claim &ldquo;'
        '<span class="claim">The trial reduced mortality</span>&rdquo;, <span class="verdict">'
        'contradicted</span>; <span class="reading">negation finding confirmed by the verifier: '
        'P(support) 0.012</span><br>evidence read: &ldquo;<span class="evidence">'
        f"{WINDOW}</span>&rdquo;</div>" in a["q1"]
    )
    assert (
        '<li class="text"><mark>The trial did not reduce mortality.\nIt enrolled 40 patients.'
        "</mark></li>" in a["q1"]
    )
    assert re.findall(r'<li class="(c-[\w ]+)"><span class="mark">([\w ]+)</span> ([^<]*)', a["q1"]) == [
        ("c-contradicted deciding", "contradicted", "The trial reduced mortality"),
        ("c-supported", "supported", "It enrolled 40 patients"),
    ]  # fmt: skip
    assert (
        '<li class="c-not_addressed deciding"><span class="mark">not addressed</span> It cures '
        'colds <span class="p">P(support) 0.120</span></li>' in a["q2"]
    )
    assert '<span class="evidence none">no evidence sentence found</span>' in a["q2"]
    assert '<span class="finding">number finding: 25 is in no passage</span>' in a["q5"]
    assert "no answer: generation error HTTP 500" in a["q4"] and "why unfaithful" not in a["q4"]
    assert "why unfaithful" not in a["q3"] and "1 of 1 claims supported" in a["q3"]
    # the filters: radio inputs with their counts, and the CSS rules that hide the others
    assert '<input type="radio" name="fv" id="fv-all" checked> all (5)' in page
    for group, key, label in [
        ("fv", "unfaithful", "unfaithful (3)"),
        ("fv", "undecided", "undecided (1)"),
        ("fv", "faithful", "faithful (1)"),
        ("fm", "0", "contradiction (1)"),
        ("fm", "1", "wrong_number (1)"),
        ("fm", "2", "fabrication (1)"),
        ("fs", "0", "claim_label = CONTRADICT (1)"),
        ("fs", "1", "claim_label = NOT_ENOUGH_INFO (1)"),
        ("fs", "2", "claim_label = SUPPORT (3)"),
    ]:
        assert f'<input type="radio" name="{group}" id="{group}-{key}"> {label}</label>' in page
    assert "body:has(#fv-unfaithful:checked) .answer:not(.v-unfaithful){display:none}" in page
    assert "body:has(#fm-1:checked) .answer:not(.m-1){display:none}" in page
    assert "body:has(#fs-2:checked) .answer:not(.s-2){display:none}" in page
    assert (
        'id="answers-count">5 of 5 answers shown; in all 3 unfaithful, 1 undecided, 1 faithful<'
        in page
    )
    assert '<a href="../index.html">back to the run scorecard</a>' in page


def test_answers_page_caps_what_it_renders_and_says_so():
    page = answers_page_html(*answers_pair(), VETO, limit=2)
    assert list(_articles(page)) == ["q1", "q2"]
    assert (
        'id="answers-count">2 of 5 answers shown (at most 2: unfaithful first, then undecided, '
        "then faithful); in all 3 unfaithful, 1 undecided, 1 faithful<" in page
    )
    assert '<input type="radio" name="fv" id="fv-unfaithful"> unfaithful (2)</label>' in page


def test_run_page_links_the_answers_page_with_its_counts():
    _, _, judgments, _ = answers_pair()
    section = scorecard_section(judgments, "run/answers.html")
    page = run_page_html(known_metrics(), sections=[section])
    assert (
        '<h2>Answers</h2><p id="answers-link"><a href="run/answers.html">each answer with its '
        "claims, passages and the judge&rsquo;s reasons</a>: 3 unfaithful, 1 undecided, "
        "1 faithful (contradiction 1, fabrication 1, wrong_number 1)</p>" in page
    )
    assert page.index('id="gate"') < page.index('id="answers-link"') < page.index("<h2>Slices")
    assert_self_contained(page)


def test_traces_carry_the_reasons_as_rationale_and_metadata():
    queries, generations, judgments, _ = answers_pair()
    traces = {t["qid"]: t for t in answer_traces(queries, generations, judgments, VETO)}
    assert {q: t["rationale"] for q, t in traces.items()} == {
        "q1": Q1,
        "q2": Q2,
        "q3": "faithful: 1 of 1 claims supported",
        "q4": "",
        "q5": Q5,
    }
    assert traces["q1"]["metadata"]["evidence"] == WINDOW
    assert traces["q2"]["metadata"] == {
        "failure_mode": "fabrication",
        "deciding_claim": "It cures colds",
        "verdict": "not_addressed",
        "p_supported": "0.1200",
        "finding": "",
        "evidence": "",
    }
    assert traces["q3"]["metadata"] == {} and traces["q4"]["judged_faithful"] is None


def test_the_judges_feedback_in_mlflow_keeps_the_reasons(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    from ragrig.tracking.run import log_run

    monkeypatch.setenv("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")
    queries, generations, judgments, _ = answers_pair()
    traces = answer_traces(queries, generations, judgments, VETO)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_id = log_run(uri, "ragrig", {}, {}, [], tmp_path, traces=traces)
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("ragrig")
    logged = client.search_traces(locations=[exp.experiment_id], run_id=run_id)
    feedback = {
        t.info.tags["ragrig.qid"]: a
        for t in logged
        for a in t.info.assessments
        if a.name == "faithful"
    }
    assert sorted(feedback) == ["q1", "q2", "q3", "q5"]  # q4 undecided: no feedback
    q1 = feedback["q1"]
    assert (q1.value, q1.rationale) == (False, Q1)
    assert q1.metadata["deciding_claim"] == "The trial reduced mortality"
    assert q1.metadata["verdict"] == "contradicted" and q1.metadata["evidence"] == WINDOW
    assert feedback["q5"].metadata["failure_mode"] == "wrong_number"
    q3 = feedback["q3"]
    assert (q3.value, q3.rationale) == (True, "faithful: 1 of 1 claims supported")
    assert not q3.metadata
