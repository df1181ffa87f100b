"""The review queue of `ragrig traces` (who is queued and why, the caps, the split) and the
golden set it grows (`ragrig golden add`: checked reviews, a versioned BEIR set the pipeline
reads, monitoring kept apart from release, an append run twice adding nothing)."""

from __future__ import annotations

import json
import subprocess

import pytest

from ragrig.dataset.beir import load_beir
from ragrig.dataset.labels import answer_sha256
from ragrig.dataset.reviewed import ReviewsError, append, page_items, read_queue
from ragrig.traces.config import QueueConfig
from ragrig.traces.queue import ReviewQueue, passage_id
from ragrig.traces.read import Interaction, sample_key

from ..conftest import BIN, project_env


def _x(i: int, feedback: float | None = None, ids: bool = True) -> Interaction:
    texts = [f"passage {i} a", f"passage {i} b"]
    return Interaction(
        id=f"x{i}",
        ts=1_000_000.0 + i,
        question=f"question {i}?",
        contexts=texts,
        answer=f"answer {i}.",
        feedback=feedback,
        context_ids=(f"d{i}a", f"d{i}b") if ids else None,
    )


def _judged(score, decision=1.0, consistency=None):
    parts = {} if consistency is None else {"self_consistency": consistency}
    return {"faithfulness": score, "judged_faithful": decision}, parts, {"relevance": 0.8}


def test_each_reason_the_caps_by_hash_and_the_blind_sample_is_monitoring():
    cfg = QueueConfig(confidence_margin=0.1, min_consistency=0.6, random_rate=0.0)
    q = ReviewQueue(cfg, threshold=0.7)
    lines = [_x(0), _x(1), _x(2), _x(3), _x(4, feedback=0.0), _x(5, feedback=1.0, ids=False)]
    for x in lines:
        q.line(x)
    q.judged(lines[0], *_judged(0.65))  # 0.05 from the threshold: low confidence
    q.judged(lines[1], *_judged(0.95))  # confident, consistent: not queued
    q.judged(lines[2], *_judged(None, None))  # no decision: low confidence
    q.judged(lines[3], *_judged(0.9, consistency=0.5))  # low consistency
    q.judged(lines[5], *_judged(0.79))  # 0.09 above: low confidence; passages get ids
    rows = q.rows()
    assert [(r["id"], r["reasons"], r["split"]) for r in rows] == [
        ("x0", ["low_confidence"], "release"),
        ("x2", ["low_confidence"], "release"),
        ("x3", ["low_consistency"], "release"),
        ("x4", ["thumbs_down"], "release"),
        ("x5", ["low_confidence"], "release"),
    ]
    assert rows[0]["judge"]["faithfulness"] == 0.65 and rows[3]["judge"] is None
    assert rows[2]["judge"]["self_consistency"] == 0.5
    assert [c["id"] for c in rows[4]["contexts"]] == [passage_id("passage 5 a"),
                                                      passage_id("passage 5 b")]  # fmt: skip
    assert rows[4]["answer_sha256"] == answer_sha256("answer 5.")

    # the blind sample by the queue's own hash; at most max_per_reason per reason, the smallest
    # hashes kept whatever the order; a blind item that is also a thumbs-down stays monitoring
    cfg = QueueConfig(random_rate=0.3, max_per_reason=3, seed=5)
    xs = [_x(i, feedback=0.0) for i in range(40)]
    want_blind = sorted(
        (x for x in xs if sample_key(x.id, 5) < 0.3), key=lambda x: sample_key(x.id, 5)
    )[:3]
    want_down = sorted(xs, key=lambda x: sample_key(x.id, 5))[:3]
    for order in (xs, xs[::-1]):
        q = ReviewQueue(cfg, None)
        for x in order:
            q.line(x)
        got = {r["id"]: r for r in q.rows()}
        assert {k for k, r in got.items() if "blind" in r["reasons"]} == {x.id for x in want_blind}
        assert {k for k, r in got.items() if "thumbs_down" in r["reasons"]} == {
            x.id for x in want_down
        }
        assert all(r["split"] == ("monitoring" if "blind" in r["reasons"] else "release")
                   for r in got.values())  # fmt: skip
        summary = q.summary()
        assert summary["by_reason"]["blind"] == 3 and summary["by_reason"]["thumbs_down"] == 3
        assert summary["met_reason"]["thumbs_down"] == 40


def _queue_file(tmp_path):
    q = ReviewQueue(QueueConfig(random_rate=0.0), 0.5)
    for i, fb in ((1, 0.0), (2, 0.0), (3, 0.0)):
        q.line(_x(i, feedback=fb))
    q.items["x3"]["reasons"].add("blind")  # the blind sample's: monitoring
    path = tmp_path / "queue.jsonl"
    q.write(path)
    return path


def _review(i: int, rating="faithful", relevant=(), corrected="", **kw) -> dict:
    return {
        "id": f"x{i}",
        "answer_sha256": answer_sha256(f"answer {i}."),
        "rating": rating,
        "relevant": list(relevant),
        "corrected_answer": corrected,
        "note": "",
        **kw,
    }


def _write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_reviews_append_a_versioned_set_the_pipeline_reads_and_twice_adds_nothing(tmp_path):
    queue = _queue_file(tmp_path)
    assert [it["passage_ids"] for it in page_items(read_queue(queue))] == [
        ["d1a", "d1b"], ["d2a", "d2b"], ["d3a", "d3b"]
    ]  # fmt: skip
    reviews = _write(tmp_path / "reviews.jsonl", [
        _review(1, "unfaithful", ["d1b"], corrected="The right answer."),
        _review(2, relevant=["d2a", "d2b"]),
        _review(3, "unfaithful", relevant=["d3a"]),
    ])  # fmt: skip
    root = tmp_path / "golden"
    s = append(reviews, queue, root)
    assert (s["version"], s["added"], s["new_passages"]) == (
        1, {"release": 2, "monitoring": 1}, 6,
    )  # fmt: skip
    release = load_beir(root, "release")
    assert release.queries == {"x1": "question 1?", "x2": "question 2?"}
    assert release.qrels == {"x1": {"d1a": 0, "d1b": 1}, "x2": {"d2a": 1, "d2b": 1}}
    assert release.query_metadata["x1"]["answer"] == "The right answer."
    assert release.query_metadata["x1"]["rating"] == "unfaithful"
    # no correction of a faithful answer: the answer is the reference; the rest is no slice
    assert release.query_metadata["x2"]["answer"] == "answer 2."
    assert release.nested_metadata_fields == ("review",)
    raw = {
        json.loads(x)["_id"]: json.loads(x)
        for x in (root / "queries.jsonl").read_text().splitlines()
    }
    assert raw["x1"]["metadata"]["review"] == {
        "logged_answer": "answer 1.", "answer_sha256": answer_sha256("answer 1."),
        "corrected": True, "note": "",
    }  # fmt: skip
    monitoring = load_beir(root, "monitoring")
    assert set(monitoring.queries) == {"x3"} and monitoring.qrels == {"x3": {"d3a": 1, "d3b": 0}}
    assert monitoring.query_metadata["x3"]["answer"] == ""  # unfaithful, not corrected
    assert len(release.corpus) == 6
    version = json.loads((root / "versions.jsonl").read_text())
    assert version["version"] == 1 and version["added"] == {"release": 2, "monitoring": 1}

    before = {p.name: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    again = append(reviews, queue, root)
    assert again["version"] is None and again["skipped"] == {"already in the set": 3}
    assert {p.name: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before

    # the command says what it added, and a bad file in one line, exit 2, the set unchanged
    env = project_env()
    cmd = [str(BIN / "python"), "-m", "ragrig", "golden", "add"]
    more = _write(tmp_path / "more.jsonl", [_review(1), _review(2, rating="fine")])
    proc = subprocess.run([*cmd, str(more), "--queue", str(queue), "--set", str(root)],
                          env=env, capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"ragrig golden: error: {more}:2: rating 'fine' is not one of faithful, unfaithful"
    ]
    assert {p.name: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize(
    "line,problem",
    [
        ("{not json", "1: not JSON: Expecting property name enclosed in double quotes"),
        (_review(1, rating=""), "1: 'rating' is missing or not a non-empty string"),
        (_review(9), "1: interaction 'x9' is not in the review queue"),
        (
            {**_review(1), "answer_sha256": "0" * 64},
            "1: the answer hash of 'x1' is not the queued answer's (a review of another answer)",
        ),
        (_review(1, relevant=["d2a"]), "1: passage 'd2a' was not shown with 'x1'"),
        ({**_review(1), "relevant": "d1a"}, "1: 'relevant' must be a list of passage ids"),
    ],
)
def test_a_bad_review_stops_with_one_line(tmp_path, line, problem):
    queue = _queue_file(tmp_path)
    path = _write(tmp_path / "r.jsonl", [line])
    with pytest.raises(ReviewsError) as e:
        append(path, queue, tmp_path / "golden")
    assert str(e.value) == f"{path}:{problem}"
    assert not (tmp_path / "golden").exists()


def test_a_review_twice_and_a_passage_with_another_text_are_refused(tmp_path):
    queue = _queue_file(tmp_path)
    path = _write(tmp_path / "r.jsonl", [_review(1), _review(1)])
    with pytest.raises(
        ReviewsError, match=r"r.jsonl:2: interaction 'x1' reviewed twice \(line 1\)"
    ):
        append(path, queue, tmp_path / "golden")
    root = tmp_path / "golden"
    root.mkdir()
    (root / "corpus.jsonl").write_text(
        json.dumps({"_id": "d1a", "title": "", "text": "other"}) + "\n"
    )
    with pytest.raises(ReviewsError, match="passage 'd1a' is in the set with another text"):
        append(_write(tmp_path / "one.jsonl", [_review(1)]), queue, root)


def test_passage_vectors_embed_each_text_once_and_score_as_fresh():
    """relevance's passage cache: a repeated text is not embedded again, a cached vector is the
    vector a fresh embedding gives (kept and read as float32), the least recently used goes."""
    import numpy as np

    from ragrig.traces.axes import PassageVectors

    class Counting:
        def __init__(self):
            self.seen: list[str] = []

        def encode(self, texts):
            self.seen += texts
            return np.asarray([[len(t), 1.0 + t.count("a"), 0.5] for t in texts])

    e, cache = Counting(), PassageVectors(size=2)
    first = cache.vectors(e, ["aa", "b", "aa"])
    assert e.seen == ["aa", "b"] and (cache.hits, cache.misses) == (1, 2)
    again = cache.vectors(Counting(), ["b", "aa"])
    np.testing.assert_array_equal(again, first[[1, 0]])
    fresh = PassageVectors().vectors(Counting(), ["aa"])
    np.testing.assert_array_equal(fresh[0], first[0])
    cache.vectors(e, ["c"])  # "b" was used before "aa": "b" leaves
    e.seen.clear()
    cache.vectors(e, ["aa", "b"])
    assert e.seen == ["b"]
    assert cache.vectors(e, []).shape == (0, 1)
