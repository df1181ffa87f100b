"""Rerankers: identity keeps order; a cross-encoder loads from a local folder (a tiny one built here)."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from ragrig.core.config import validate_section
from ragrig.rerank import Candidate, make_reranker, rerank_run
from ragrig.weights.models import resolve_model


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    """A randomly initialised 2-layer BERT cross-encoder with the packaged MiniLM tokenizer."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    folder = tmp_path_factory.mktemp("tiny_ce")
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    src = resolve_model("packaged:all-MiniLM-L6-v2")
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(f"{src}/{name}", folder / name)
    return folder


RUN = pd.DataFrame(
    {
        "qid": ["q"] * 4,
        "doc_id": ["a", "b", "c", "d"],
        "chunk_id": ["a#0", "b#0", "c#0", "d#0"],
        "score": [4.0, 3.0, 2.0, 1.0],
        "rank": [1, 2, 3, 4],
    }
)
TEXT = {
    "a#0": "cats purr",
    "b#0": "mars has two moons",
    "c#0": "dogs bark",
    "d#0": "phobos and deimos",
}


def test_identity_keeps_the_run():
    reranker = make_reranker(validate_section("rerank", {"method": "identity"}))
    run, latency = rerank_run(
        RUN, {"q": "moons of mars"}, TEXT, reranker, depth=None, progress=False
    )
    pd.testing.assert_frame_equal(run, RUN)
    assert latency["stage"].tolist() == ["rerank"]


def test_cross_encoder_from_local_folder_rescores_top_depth_only(tiny_cross_encoder):
    cfg = validate_section(
        "rerank", {"method": "cross_encoder", "model": str(tiny_cross_encoder), "depth": 3}
    )
    reranker = make_reranker(cfg)
    run, _ = rerank_run(
        RUN, {"q": "moons of mars"}, TEXT, reranker, depth=cfg.depth, progress=False
    )
    assert sorted(run["doc_id"].iloc[:3]) == ["a", "b", "c"]  # same candidate set at the top
    assert run["doc_id"].iloc[3] == "d" and run["score"].iloc[3] == 1.0  # the tail keeps its place
    assert run["rank"].tolist() == [1, 2, 3, 4]
    again, _ = rerank_run(
        RUN, {"q": "moons of mars"}, TEXT, make_reranker(cfg), depth=3, progress=False
    )
    pd.testing.assert_frame_equal(run, again)  # deterministic
    scores = run["score"].iloc[:3].tolist()
    assert scores == sorted(scores, reverse=True)


def test_cross_encoder_scores_match_the_model(tiny_cross_encoder):
    from sentence_transformers import CrossEncoder

    cfg = validate_section("rerank", {"method": "cross_encoder", "model": str(tiny_cross_encoder)})
    reranker = make_reranker(cfg)
    cands = [Candidate("a", "a#0", "cats purr", 0.0), Candidate("b", "b#0", "mars moons", 0.0)]
    out = reranker.rerank("moons", cands)
    direct = CrossEncoder(str(tiny_cross_encoder), device="cpu").predict(
        [("moons", "cats purr"), ("moons", "mars moons")]
    )
    expected = sorted(zip(direct.tolist(), ["a", "b"], strict=True), reverse=True)
    assert [c.doc_id for c in out] == [d for _, d in expected]
    assert [c.score for c in out] == pytest.approx([s for s, _ in expected], abs=1e-6)
