"""The MLflow UI itself, rendered by headless Chromium: the link `make ui` prints opens the runs
table (not the GenAI view) with the headline columns, and a run's answers.json shows as a
table. Skipped where Debian's `chromium` is not installed."""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from ragrig.tracking import server as ui
from ragrig.tracking.run import log_run, runs_table_url

CHROMIUM = shutil.which("chromium")
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed"),
    pytest.mark.full,
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dom(url: str, profile: Path) -> str:
    """The page's DOM after its scripts ran (a fresh browser profile: no saved UI state)."""
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=30000",
            "--window-size=1600,1000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_runs_table_link_and_answers_table_render(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    answers = pd.DataFrame(
        {
            "qid": ["q1"],
            "question": ["How many moons has Mars?"],
            "passages": ["[1] d01#0: Mars has two moons."],
            "answer": ["Two moons [1]"],
            "faithfulness": [1.0],
        }
    )
    metrics = {"retrieval": {"ndcg@10": 0.5, "recall@100": 1.0}, "judge": {"faithfulness": 0.75}}
    run_id = log_run(
        uri, "ragrig", {"retrieve": {"ef_search": 64}}, metrics, [], tmp_path, answers=answers
    )
    info = ui.start(tmp_path, uri, port=_free_port(), timeout=180)
    try:
        import requests

        exp_id = requests.get(
            f"{info['url']}/api/2.0/mlflow/experiments/get-by-name",
            params={"experiment_name": "ragrig"},
            timeout=120,
        ).json()["experiment"]["experiment_id"]
        table = _dom(runs_table_url(info["url"], exp_id), tmp_path / "profile1")
        assert "viewing a shared view" in table  # the view was found and applied
        for header in ("retrieval/ndcg_at_10", "retrieval/recall_at_100", "judge/faithfulness"):
            assert header in table
        assert "Run Name" in table  # the runs table, not the GenAI overview
        art = _dom(
            f"{info['url']}/#/experiments/{exp_id}/runs/{run_id}/artifacts/answers.json",
            tmp_path / "profile2",
        )
        assert "View as table" in art and "How many moons has Mars?" in art
    finally:
        ui.stop(tmp_path)


def test_a_person_labels_an_answer_trace_in_the_ui_and_it_comes_back_as_a_label(
    tmp_path: Path, monkeypatch
):
    """The report logs each answer as a trace with the judge's `faithful` feedback; in the MLflow
    UI (real Chromium, real clicks) a person opens the run's traces, adds feedback `faithful` =
    False with a rationale; `human_feedback` (ragrig label --from-mlflow) reads it back."""
    from ragrig.tracking.run import human_feedback

    from ._cdp import Chromium

    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    trace = {
        "qid": "q1",
        "inputs": {"question": "When did the probe land?", "passages": ["The probe landed."]},
        "outputs": {"answer": "It landed in 1997."},
        "tags": {"ragrig.qid": "q1", "ragrig.answer_sha256": "ab" * 32},
        "status": "ok",
        "judged_faithful": True,
        "rationale": "faithful",
    }
    run_id = log_run(
        uri, "ragrig", {}, {"judge": {"faithfulness": 1.0}}, [], tmp_path, traces=[trace]
    )
    info = ui.start(tmp_path, uri, port=_free_port(), timeout=180)
    try:
        assert human_feedback(info["url"], "ragrig")["labels"] == []  # the judge's only
        import requests

        exp_id = requests.get(
            f"{info['url']}/api/2.0/mlflow/experiments/get-by-name",
            params={"experiment_name": "ragrig"},
            timeout=120,
        ).json()["experiment"]["experiment_id"]
        with Chromium(CHROMIUM, tmp_path) as c:
            c.open(f"{info['url']}/#/experiments/{exp_id}/runs/{run_id}/traces")
            c.wait_for("document.body.innerText.includes('When did the probe land?')")
            assert "faithful" in c.js("document.body.innerText")  # the judge's column
            c.js(
                "Array.from(document.querySelectorAll('*')).find(e => e.children.length === 0"
                " && e.textContent.trim().startsWith('tr-')).click()"
            )
            c.wait_for(
                "Array.from(document.querySelectorAll('button')).some(b => "
                "b.innerText.trim().startsWith('Assess'))"
            )
            c.click_button("Assess")
            c.wait_for("document.body.innerText.includes('Add feedback')")
            c.click_button("Add feedback")
            c.wait_for("!!document.querySelector('input[placeholder=\"Enter a feedback name\"]')")
            c.js(
                "(() => { const set = (el, v) => { Object.getOwnPropertyDescriptor("
                "Object.getPrototypeOf(el), 'value').set.call(el, v);"
                " el.dispatchEvent(new Event('input', {bubbles: true})); };"
                " set(document.querySelector('input[placeholder=\"Enter a feedback name\"]'),"
                " 'faithful');"
                " const v = Array.from(document.querySelectorAll('input')).filter(e =>"
                " (e.name || '').includes('boolean-input')); v[1].click();"  # False
                " const t = Array.from(document.querySelectorAll('textarea')).filter(e =>"
                " e.placeholder !== 'Ask a question...'); set(t[0], 'no year in the passage');"
                " })()"
            )
            c.click_button("Create")
            c.wait_for("document.body.innerText.includes('Feedback (2)')")
        got = human_feedback(info["url"], "ragrig")
        assert got["run_id"] == run_id and got["traces"] == 1
        assert got["labels"] == [
            {
                "qid": "q1",
                "answer_sha256": "ab" * 32,
                "rating": "unfaithful",
                "note": "no year in the passage",
            }
        ]
    finally:
        ui.stop(tmp_path)
