"""The HTML scorecards rendered by a real browser (Debian's `chromium`, headless): the
screenshot is not blank and the rendered DOM shows the headline numbers.

Chromium is installed by `make browser` (a dependency of `make test`). Without it the test
skips with the reason, except under CI=true, where it fails: CI must render the page.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from ragrig.report.html import write_run_page
from ragrig.sweep.page import write_sweep_page

from .html_pages import (
    EXPECTED_CARDS,
    SEED,
    VETO,
    answers_pair,
    known_metrics,
    per_query_table,
    sweep_rows,
)

pytestmark = pytest.mark.full  # make test-all (CI) only

CANDIDATES = ("/usr/bin/chromium", "chromium")


def find_chromium(
    env: dict[str, str] | None = None, candidates: tuple[str, ...] = CANDIDATES
) -> str:
    """The chromium binary; pytest.fail under CI=true when there is none, else pytest.skip."""
    env = os.environ if env is None else env
    for name in candidates:
        if os.path.isabs(name):
            path = name if os.access(name, os.X_OK) else None
        else:
            path = shutil.which(name)
        if path:
            return path
    reason = "chromium not found (Debian package `chromium`; `make browser` installs it)"
    if env.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true: {reason}", pytrace=False)
    pytest.skip(reason)


def _chromium(binary: str, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp / "profile"
    cmd = [
        binary,
        "--headless",
        "--disable-gpu",
        "--no-sandbox",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def render(binary: str, page: Path, tmp: Path) -> tuple[str, Path]:
    """(dumped DOM, screenshot path) of a local page."""
    url = page.resolve().as_uri()
    dom = _chromium(binary, tmp, "--dump-dom", url).stdout
    shot = tmp / f"{page.stem}.png"
    _chromium(binary, tmp, f"--screenshot={shot}", "--window-size=1200,1600", url)
    assert shot.exists(), f"chromium wrote no screenshot {shot}"
    return dom, shot


def assert_not_blank(shot: Path) -> None:
    from PIL import Image, ImageStat

    img = Image.open(shot).convert("L")
    assert img.size == (1200, 1600)
    variance = ImageStat.Stat(img).var[0]
    inked = sum(img.histogram()[:200]) / (img.size[0] * img.size[1])  # clearly darker than white
    assert variance > 200, f"{shot}: pixel variance {variance:.1f}: a blank page"
    assert inked > 0.02, f"{shot}: {inked:.1%} of the pixels inked: a blank page"


@pytest.fixture(scope="module")
def chromium() -> str:
    return find_chromium()


def test_run_page_renders_with_its_headline_numbers(chromium, tmp_path):
    page = write_run_page(
        known_metrics(), tmp_path / "index.html", per_query=per_query_table(), seed=SEED
    )
    dom, shot = render(chromium, page, tmp_path)
    assert_not_blank(shot)
    for slug, text in EXPECTED_CARDS.items():
        m = re.search(rf'id="m-{slug}".*?class="value">([^<]*)<', dom, re.S)
        assert m and m.group(1) == text, (slug, m and m.group(1))
    assert re.search(r'id="gate">fail_hard<', dom)
    assert dom.count("<svg") == 2  # latency per stage, quality vs cost


def test_sweep_page_renders_every_point(chromium, tmp_path):
    rows = sweep_rows()
    page = write_sweep_page(rows, tmp_path / "sweep.html")
    dom, shot = render(chromium, page, tmp_path)
    assert_not_blank(shot)
    assert "12 points: 11 ok, 1 failed" in dom
    assert 'title="best nDCG@10">0.7214 ★</td>' in dom
    for r in rows:
        if r["status"] == "ok":
            value = f"{r['metrics']['retrieval/ndcg_at_10']:.4f}"
            assert re.search(rf">{re.escape(value)}( ★)?</td>", dom), value
    assert dom.count("<svg") == 3  # HNSW Pareto, quality vs cost, nDCG@10 vs chunk size


def test_answers_page_renders_and_filters_by_css_alone(chromium, tmp_path):
    """The answers page in a real browser: not blank, every answer shown, and a click on a
    filter hides the others (the page runs no script: the CSS `:has()` rules do it), with the
    counter of shown answers following."""
    from ragrig.report.answers_page import write_answers_page

    from ._cdp import Chromium

    page = write_answers_page(tmp_path / "answers.html", *answers_pair(), VETO)
    dom, shot = render(chromium, page, tmp_path)
    assert_not_blank(shot)
    assert "evidence read: \u201c" in dom  # the &ldquo; entity, as the DOM holds it
    visible = (
        "JSON.stringify([...document.querySelectorAll('.answer')]"
        ".filter(a => getComputedStyle(a).display !== 'none').map(a => a.id))"
    )
    with Chromium(chromium, tmp_path) as c:
        c.open(page.resolve().as_uri())
        assert json.loads(c.js(visible)) == ["a-q1", "a-q2", "a-q5", "a-q4", "a-q3"]
        assert c.rendered_text("#shown") == "shown: 5"  # a CSS counter of the shown answers
        for clicked, expected in [
            ("fv-unfaithful", ["a-q1", "a-q2", "a-q5"]),
            ("fm-1", ["a-q5"]),  # wrong_number
            ("fv-all", ["a-q5"]),
            ("fm-all", ["a-q1", "a-q2", "a-q5", "a-q4", "a-q3"]),
            ("fs-2", ["a-q1", "a-q5", "a-q3"]),  # claim_label = SUPPORT
            ("fv-faithful", ["a-q3"]),
        ]:
            c.js(f"document.getElementById('{clicked}').click()")
            assert json.loads(c.js(visible)) == expected, clicked
            assert c.rendered_text("#shown") == f"shown: {len(expected)}", clicked
        assert c.js("document.scripts.length") == 0


def test_missing_chromium_fails_under_ci_and_skips_otherwise():
    from _pytest.outcomes import Failed, Skipped

    absent = ("/nonexistent/chromium", "ragrig-no-such-chromium")
    with pytest.raises(Failed, match="CI=true: chromium not found"):
        find_chromium({"CI": "true"}, candidates=absent)
    with pytest.raises(Skipped, match="chromium not found"):
        find_chromium({"CI": "false"}, candidates=absent)
    with pytest.raises(Skipped):
        find_chromium({}, candidates=absent)


def test_label_page_rates_saves_and_restores_in_chromium(tmp_path):
    """The rating page of `ragrig label` used as a person would: two answers rated by clicks,
    a note typed, "Save labels" clicked; the downloaded labels.jsonl reads back as labels of
    the sampled answers, and a reloaded page keeps the ratings."""
    from ragrig.dataset.label_page import write_label_page
    from ragrig.dataset.labels import answer_sha256, read_labels

    from ._cdp import Chromium

    items = [
        {
            "qid": q,
            "question": f"question {q}? </script>",  # escaped, never ends the script early
            "answer": f"answer {q}",
            "passages": [f"passage {q}"],
            "answer_sha256": answer_sha256(f"answer {q}"),
            "judge": {"judged_faithful": 1.0, "answer_support": 0.9, "failure_mode": ""},
        }
        for q in ("q1", "q2", "q3")
    ]
    page = tmp_path / "rate.html"
    write_label_page(page, "s1", items, "Rate 3 answers")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with Chromium(find_chromium(), tmp_path) as c:
        c.downloads_to(downloads)
        c.open(page.resolve().as_uri())
        assert c.js("document.querySelectorAll('input[type=radio]').length") == 6
        c.js('document.querySelector(\'input[name="r-0"][value="faithful"]\').click()')
        c.js('document.querySelector(\'input[name="r-2"][value="unfaithful"]\').click()')
        c.js(
            "const n = document.getElementById('n-2'); n.value = 'the date is wrong';"
            "n.dispatchEvent(new Event('input', {bubbles: true}))"
        )
        assert c.js("document.getElementById('count').textContent") == "2"
        c.js("document.getElementById('save').click()")
        shown = c.js("document.getElementById('out').value")
        deadline = time.monotonic() + 20
        while not (downloads / "labels.jsonl").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        saved = (downloads / "labels.jsonl").read_text()
        assert saved == shown
        stored = "JSON.stringify(JSON.parse(localStorage.getItem('ragrig-labels-s1') || '{}'))"
        assert json.loads(c.js(stored)) == {
            "q1": {"rating": "faithful", "note": ""},
            "q3": {"rating": "unfaithful", "note": "the date is wrong"},
        }
        # Chromium hands a page's localStorage writes to its storage service asynchronously: a
        # reload at once can beat them on a loaded machine and read the older state (the page's
        # ratings were 0 there, its own writes done). A person does not reload within a second.
        time.sleep(1.0)
        c.js("window.oldPage = true; location.reload()")
        # the reloaded page (no `oldPage` on its window) restores the ratings from localStorage
        try:
            c.wait_for(
                "!window.oldPage && document.readyState === 'complete' && "
                "document.getElementById('count').textContent === '2'",
                timeout=30,
            )
        except TimeoutError:  # say which part did not happen: the reload, or the restore
            state = c.js(
                "JSON.stringify({old: !!window.oldPage, ready: document.readyState, count: "
                "(document.getElementById('count') || {}).textContent, stored: localStorage.length})"
            )
            pytest.fail(f"the reloaded page did not show 2 ratings within 30 s: {state}")
        assert c.js("document.getElementById('n-2').value") == "the date is wrong"
    lines = [json.loads(x) for x in saved.splitlines()]
    assert [(x["qid"], x["rating"]) for x in lines] == [("q1", "faithful"), ("q3", "unfaithful")]
    labels_file = tmp_path / "labels.jsonl"
    labels_file.write_text(saved)
    answers = {it["qid"]: it["answer_sha256"] for it in items}
    assert read_labels(labels_file, answers) == {
        "q1": {"human": 1, "note": ""},
        "q3": {"human": 0, "note": "the date is wrong"},
    }
