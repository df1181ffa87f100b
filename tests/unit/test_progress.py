"""Whole-stage progress bars: counted, drawn only on a terminal or with RAGRIG_PROGRESS=1."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from ragrig.core.progress import ENV, bar, enabled, track


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)


def test_disabled_off_a_terminal_counts_and_writes_nothing():
    out = io.StringIO()
    assert not enabled(out)
    with bar("index", 10, "chunks", stream=out) as b:
        b.note("dense hnsw")
        b.update(4)
        b.update(6)
    assert b.count == 10
    assert out.getvalue() == ""
    assert list(track(["a", "b", "c"], "rerank", "queries", stream=out)) == ["a", "b", "c"]
    assert out.getvalue() == ""


def test_drawn_on_a_terminal_with_counts_and_total():
    out = Tty()
    assert enabled(out)
    assert list(track(range(7), "generate", "answers", stream=out)) == list(range(7))
    text = out.getvalue()
    assert "generate" in text and "7/7" in text and "answers" in text


def test_env_forces_on_and_off(monkeypatch):
    out = io.StringIO()
    monkeypatch.setenv(ENV, "1")
    with bar("parse", 3, "documents", stream=out) as b:
        for _ in range(3):
            b.update()
    assert "parse" in out.getvalue() and "3/3" in out.getvalue()
    monkeypatch.setenv(ENV, "0")
    tty = Tty()
    assert not enabled(tty)
    list(track([1, 2], "chunk", "documents", stream=tty))
    assert tty.getvalue() == ""


def test_a_caller_turning_the_bar_off_wins_over_a_terminal_and_the_env(monkeypatch):
    monkeypatch.setenv(ENV, "1")
    tty = Tty()
    with bar("generate", 2, "answers", stream=tty, on=False) as b:
        b.update(2)
    assert b.count == 2 and tty.getvalue() == ""


def test_a_stage_loop_counts_its_queries_on_the_bar(monkeypatch, capsys):
    from ragrig.core.config import validate_section
    from ragrig.rerank import make_reranker, rerank_run

    run = pd.DataFrame(
        {
            "qid": ["q1", "q1", "q2", "q3"],
            "doc_id": ["a", "b", "a", "c"],
            "chunk_id": ["a#0", "b#0", "a#0", "c#0"],
            "score": [2.0, 1.0, 1.0, 1.0],
            "rank": [1, 2, 1, 1],
        }
    )
    reranker = make_reranker(validate_section("rerank", {"method": "identity"}))
    queries = {"q1": "x", "q2": "y", "q3": "z"}
    text = {"a#0": "a", "b#0": "b", "c#0": "c"}
    rerank_run(run, queries, text, reranker, depth=None)  # stderr is not a terminal here
    assert capsys.readouterr().err == ""
    monkeypatch.setenv(ENV, "1")
    rerank_run(run, queries, text, reranker, depth=None)
    err = capsys.readouterr().err
    assert "rerank" in err and "3/3" in err and "queries" in err
    rerank_run(run, queries, text, reranker, depth=None, progress=False)
    assert capsys.readouterr().err == ""


def test_embed_reports_each_batch_and_keeps_the_vectors_byte_identical():
    from ragrig.embed.st import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder("packaged:all-MiniLM-L6-v2", batch_size=2)
    texts = ["one short", "a somewhat longer text here", "mid length", "x", "the last one"]
    plain = emb.encode(texts)
    counts: list[int] = []
    counted = emb.encode(texts, done=counts.append)
    assert counts == [2, 2, 1]
    assert np.array_equal(plain, counted)
    from sentence_transformers.sentence_transformer import model as st_model
    from tqdm.autonotebook import trange

    assert st_model.trange is trange  # restored after the call
