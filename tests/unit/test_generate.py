"""Generation helpers, the extractive baseline and the packaged SmolLM2 generator."""

from __future__ import annotations

import json

import pytest

from ragrig.config import validate_section
from ragrig.generate import Generation, citations, generate_all, make_generator, sample_queries
from ragrig.generate.extractive import REFUSAL, ExtractiveGenerator

CONTEXT = [
    "Mars has two moons, Phobos and Deimos. Mars is red.",
    "Curiosity landed on Mars in 2012.",
]


def test_sample_is_deterministic_seeded_and_sorted():
    qids = [str(i) for i in range(100)]
    a = sample_queries(qids, 10, seed=13)
    assert a == sample_queries(list(reversed(qids)), 10, seed=13)
    assert a == sorted(a) and len(a) == 10
    assert a != sample_queries(qids, 10, seed=14)
    assert sample_queries(qids, None, seed=1) == sorted(qids)


def test_citations_in_order_and_in_range():
    assert citations("A [2]. B [1][2]. C [7]. D [0].", n_passages=3) == [2, 1]


def test_extractive_cites_the_best_sentences():
    gen = ExtractiveGenerator(max_sentences=1, min_overlap=0.2).generate(
        "When did Curiosity land on Mars?", CONTEXT
    )
    assert gen.text == "Curiosity landed on Mars in 2012. [2]"
    assert ExtractiveGenerator().generate("Photosynthesis in algae", CONTEXT).text == REFUSAL


class _Broken:
    model_name = "broken"

    def generate(self, question, passages):
        if question == "fail":
            raise RuntimeError("backend exploded")
        return Generation("   " if question == "blank" else "Fine [1].", 3, 2)


def test_generate_all_counts_errors_and_empty_answers():
    df = generate_all(
        _Broken(),
        ["a", "b", "c"],
        {"a": "ok", "b": "fail", "c": "blank"},
        {"a": [("x#0", "ctx")], "b": [], "c": [("y#0", "long context")]},
        max_passage_chars=4,
        progress=False,
    )
    rows = df.set_index("qid")
    assert rows.loc["a", "status"] == "ok" and json.loads(rows.loc["a", "citations"]) == [1]
    assert rows.loc["b", "status"] == "error" and "backend exploded" in rows.loc["b", "error"]
    assert rows.loc["c", "status"] == "empty"
    assert json.loads(rows.loc["c", "contexts"]) == ["long"]  # truncated as the generator saw it
    assert rows["prompt_tokens"].tolist() == [3, 0, 3]


@pytest.fixture(scope="module")
def smollm():
    cfg = validate_section("generate", {"method": "llama_cpp", "max_tokens": 32})
    return make_generator(cfg, seed=13, threads=2)


def test_packaged_smollm_answers_with_usage_and_is_deterministic(smollm):
    first = smollm.generate("How many moons does Mars have?", CONTEXT)
    second = smollm.generate("How many moons does Mars have?", CONTEXT)
    assert first.text.strip()
    assert first == second  # temperature 0 and a fixed seed
    assert first.prompt_tokens > 50 and 0 < first.completion_tokens <= 32
