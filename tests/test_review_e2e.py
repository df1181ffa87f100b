"""The review round trip end to end: `ragrig traces` queues interactions of a log, `ragrig label
--queue` writes the review page, a person reviews in a real browser (ratings, passages marked
relevant, a corrected answer, Save), `ragrig golden add` appends the saved reviews to the
versioned set, and `dvc repro` of a fresh project reads that set as its dataset."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from .conftest import FIXTURE, PROJECT, copy_project, sh
from .test_e2e import _python
from .test_html_chromium import find_chromium

pytestmark = [pytest.mark.e2e, pytest.mark.full]

T0 = datetime(2026, 11, 30, tzinfo=UTC)


def _log(path: Path) -> Path:
    """A service's day on the tiny corpus: each query asked once, its gold document and one
    other retrieved, the gold's first sentence answered; the last four given a thumbs-down."""
    corpus = {
        r["_id"]: r for r in map(json.loads, (FIXTURE / "corpus.jsonl").read_text().splitlines())
    }
    queries = [json.loads(x) for x in (FIXTURE / "queries.jsonl").read_text().splitlines()]
    gold = {}
    for line in (FIXTURE / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        q, d, s = line.split("\t")
        if int(s) > 0:
            gold.setdefault(q, d)
    rows = []
    asked = [q for q in queries if q["_id"] in gold]
    for i, q in enumerate(asked):
        d = corpus[gold[q["_id"]]]
        other = corpus["d03" if d["_id"] != "d03" else "d01"]
        rows.append(
            {
                "id": f"i{i}",
                "timestamp": (T0 + timedelta(minutes=i)).isoformat(),
                "question": q["text"],
                "contexts": [
                    {"id": d["_id"], "text": d["text"]},
                    {"id": other["_id"], "text": other["text"]},
                ],
                "answer": d["text"].split(". ")[0] + ".",
                "feedback": 0 if i >= len(asked) - 4 else 1,
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_traces_queue_review_in_chromium_golden_set_and_an_offline_run_reading_it(tmp_path):
    from ._cdp import Chromium

    log = _log(tmp_path / "log.jsonl")
    cfg = tmp_path / "traces.yaml"
    cfg.write_text(
        "sample_rate: 1.0\nmlflow: false\nsemantic_relevance: false\ndrift: {queries: false}\n"
        "queue: {random_rate: 0.2, confidence_margin: null, seed: 2}\n"
    )
    ws = copy_project(tmp_path / "ws")
    py = _python(ws)
    out = tmp_path / "traces"
    proc = sh([py, "-m", "ragrig", "traces", str(log), "--config", str(cfg), "--params",
               str(PROJECT / "params.yaml"), "--out", str(out), "--quiet"], ws, check=False)  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    queue = [json.loads(x) for x in (out / "review_queue.jsonl").read_text().splitlines()]
    n_log = len(log.read_text().splitlines())
    downs = {f"i{i}" for i in range(n_log - 4, n_log)}
    assert {q["id"] for q in queue if "thumbs_down" in q["reasons"]} == downs
    blind = [q for q in queue if "blind" in q["reasons"]]
    # the blind sample at 0.2 under seed 2 draws i1 alone: monitoring data
    assert [q["id"] for q in queue] == ["i1", *sorted(downs)]
    assert [(q["id"], q["split"]) for q in blind] == [("i1", "monitoring")]
    summary = json.loads((out / "traces.json").read_text())["review_queue"]
    assert summary["items"] == len(queue)
    assert f"review queue: {len(queue)} interactions" in proc.stdout

    proc = sh([py, "-m", "ragrig", "label", "--queue", str(out / "review_queue.jsonl"),
               "--out", str(tmp_path / "review")], ws)  # fmt: skip
    assert proc.stdout.startswith(f"ragrig label: {len(queue)} queued interactions")
    page = tmp_path / "review" / "review.html"

    # the reviewer: every item rated, its first passage marked relevant, the last answer
    # corrected; Save downloads reviews.jsonl
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with Chromium(find_chromium(), tmp_path) as c:
        c.downloads_to(downloads)
        c.open(page.resolve().as_uri())
        assert c.js("document.querySelectorAll('input[type=checkbox]').length") == 2 * len(queue)
        for i in range(len(queue)):
            c.js(f'document.querySelector(\'input[name="r-{i}"][value="faithful"]\').click()')
            c.js(f"document.querySelectorAll('input[name=\"rel-{i}\"]')[0].click()")
        c.js(
            f"const a = document.getElementById('c-{len(queue) - 1}');"
            "a.value = 'A corrected answer.';"
            "a.dispatchEvent(new Event('input', {bubbles: true}))"
        )
        assert c.js("document.getElementById('count').textContent") == str(len(queue))
        c.js("document.getElementById('save').click()")
        deadline = time.monotonic() + 20
        while not (downloads / "reviews.jsonl").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        saved = (downloads / "reviews.jsonl").read_text()
        assert saved == c.js("document.getElementById('out').value")
    reviews = [json.loads(x) for x in saved.splitlines()]
    assert [r["id"] for r in reviews] == [q["id"] for q in queue]
    assert [r["relevant"] for r in reviews] == [[q["contexts"][0]["id"]] for q in queue]
    assert [r["corrected_answer"] for r in reviews] == [""] * (len(queue) - 1) + [
        "A corrected answer."
    ]

    proc = sh([py, "-m", "ragrig", "golden", "add", str(downloads / "reviews.jsonl"),
               "--queue", str(out / "review_queue.jsonl")], ws)  # fmt: skip
    release = [q for q in queue if q["split"] == "release"]
    assert f"version 1: {len(release)} release and {len(blind)} monitoring queries added" in (
        proc.stdout
    )
    sh([py, "-m", "ragrig", "init-dvc"], ws)
    sh([py, "-m", "ragrig", "params", "write", "dataset=reviewed", "generate=extractive"], ws)
    proc = sh(["dvc", "repro"], ws)
    metrics = json.loads((ws / "reports" / "metrics.json").read_text())
    # the release split only, every query judged: the blind sample stays out of it
    assert metrics["counts"]["queries"] == len(release)
    assert metrics["counts"]["scored"] == len(release)
    # each query's marked passage is its gold, among the set's passages: found first
    assert (metrics["retrieval"]["recall@10"], metrics["retrieval"]["p@1"]) == (1.0, 1.0)
    # correctness reads the references: the correction, the faithful answers as they were
    sources = metrics["scorecard"]["correctness"]["sources"]
    assert sources["reference"] == len(release)
