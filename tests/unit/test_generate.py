"""Generation helpers, the extractive baseline and the packaged SmolLM2 generator."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ragrig.core.config import validate_section
from ragrig.core.errors import ConfigError, SchemaError
from ragrig.generate import (
    Generation,
    assemble_contexts,
    citations,
    generate_all,
    make_generator,
    sample_queries,
)
from ragrig.generate.extractive import REFUSAL, ExtractiveGenerator
from ragrig.generate.llama_cpp import LlamaCppGenerator
from ragrig.generate.prompt import SYSTEM_PROMPT, VERDICT_LABELS, chat_messages, read_completion
from ragrig.llm.redact import redact

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


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abc.DEF-123", "Authorization: [REDACTED]"),
        (
            "{'authorization': 'Basic dXNlcjpwYXNz', 'Accept': '*/*'}",
            "{'authorization': '[REDACTED]', 'Accept': '*/*'}",
        ),
        ('"Authorization":"tok_42"}', '"Authorization":"[REDACTED]"}'),
        ("sent bearer eyJhbGciOi.x.y to host", "sent bearer [REDACTED] to host"),
        ('{"api_key": "k-99", "model": "m"}', '{"api_key": "[REDACTED]", "model": "m"}'),
        (
            "GET /v1?apikey=zzz&x=1 X-API-Key: qqq",
            "GET /v1?apikey=[REDACTED]&x=1 X-API-Key: [REDACTED]",
        ),
        ("key sk-proj-AbCdEf012345 rejected", "key [REDACTED] rejected"),
        ("risk-free task-based sk-short", "risk-free task-based sk-short"),
        ("Unauthorized: no such model", "Unauthorized: no such model"),
    ],
)
def test_redact_shapes_of_secrets(text, expected):
    assert redact(text) == expected


def test_redact_exact_configured_values_longest_first():
    assert redact("echo mysecret and mysecret2", ["mysecret", "mysecret2", ""]) == (
        "echo [REDACTED] and [REDACTED]"
    )


class _Leaky:
    model_name = "leaky"
    secrets = ("hunter2-key",)

    def generate(self, question, passages):
        raise RuntimeError("proxy said: token hunter2-key, Authorization: Bearer other-1")


def test_generate_all_stores_errors_redacted():
    df = generate_all(_Leaky(), ["a"], {"a": "q"}, {"a": []}, 10, progress=False)
    assert df["error"].tolist() == [
        "RuntimeError: proxy said: token [REDACTED], Authorization: [REDACTED]"
    ]


def test_chat_messages_number_passages_from_one():
    assert chat_messages("Be brief.", "Moons?", ["A b.", "C d."]) == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": "Passages:\n[1] A b.\n[2] C d.\n\nQuestion or claim: Moons?\n"
            "Answer using only the passages, citing them like [1].",
        },
    ]
    for method in ("llama_cpp", "openai_http"):
        extra = (
            {"base_url": "http://127.0.0.1:9/v1", "model": "m"} if method == "openai_http" else {}
        )
        assert (
            validate_section("generate", {"method": method, **extra}).system_prompt == SYSTEM_PROMPT
        )


def test_read_completion_text_and_usage():
    usage = {"prompt_tokens": 31, "completion_tokens": 4}
    reply = {"choices": [{"message": {"content": "Two [1]."}}], "usage": usage}
    assert read_completion(reply) == Generation("Two [1].", 31, 4)
    assert read_completion({"choices": [{"message": {"content": None}}]}) == Generation("")
    with pytest.raises(KeyError):
        read_completion({"error": "overloaded"})


def test_assemble_contexts_top_n_by_rank_for_sampled_queries():
    run = pd.DataFrame(
        {
            "qid": ["q2", "q1", "q1", "q1", "q1", "q3"],
            "doc_id": ["d1", "d4", "d1", "d2", "d3", "d1"],
            "chunk_id": ["d1#0", "d4#0", "d1#0", "d2#1", "d3#0", "d1#0"],
            "score": [0.9, 0.1, 0.9, 0.5, 0.3, 0.9],
            "rank": [1, 4, 1, 2, 3, 1],
        }
    )
    text = {"d1#0": "one", "d2#1": "two", "d3#0": "three", "d4#0": "four"}
    assert assemble_contexts(run, text, ["q1", "q2", "q9"], n_passages=3) == {
        "q1": [("d1#0", "one"), ("d2#1", "two"), ("d3#0", "three")],
        "q2": [("d1#0", "one")],
        "q9": [],
    }
    with pytest.raises(SchemaError, match="'q1' ranks chunk 'd2#1'"):
        assemble_contexts(run, {"d1#0": "one"}, ["q1"], n_passages=2)


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


def test_llama_cpp_speed_settings_validate_and_default_to_llama_cpps_own():
    cfg = validate_section("generate", {"method": "llama_cpp"})
    assert (cfg.n_batch, cfg.n_ubatch, cfg.flash_attn, cfg.stop) == (2048, 512, None, [])
    cfg = validate_section("generate", {"method": "llama_cpp", "flash_attn": True, "stop": ["\n"]})
    assert (cfg.flash_attn, cfg.stop) == (True, ["\n"])
    with pytest.raises(ConfigError, match="flash_attn"):
        validate_section("generate", {"method": "llama_cpp", "flash_attn": "auto"})
    with pytest.raises(ConfigError, match="empty stop string"):
        validate_section("generate", {"method": "llama_cpp", "stop": ["\n", ""]})
    with pytest.raises(ConfigError, match="n_ubatch"):
        validate_section("generate", {"method": "llama_cpp", "n_ubatch": 0})


def test_llama_cpp_generator_rejects_an_unknown_flash_attn_mode():
    with pytest.raises(ValueError, match="flash_attn must be true, false or None"):
        LlamaCppGenerator("packaged:SmolLM2-135M-Instruct", "x", flash_attn="yes")


def test_packaged_smollm_response_carries_llama_cpp_timings(smollm):
    response = smollm.respond("How many moons does Mars have?", CONTEXT)
    timings, usage = response["timings"], response["usage"]
    assert timings["prompt_n"] == usage["prompt_tokens"] > 50  # no cached prefix: all evaluated
    assert timings["predicted_n"] == usage["completion_tokens"]
    assert timings["prompt_ms"] > 0 and timings["predicted_ms"] > 0
    assert read_completion(response) == smollm.generate("How many moons does Mars have?", CONTEXT)


@pytest.mark.full  # make test-all: the llama.cpp generator, not the default
def test_packaged_smollm_stops_at_a_stop_string_and_keeps_the_verdict():
    base = {"method": "llama_cpp", "prompt": "claim_verdict", "max_tokens": 48}
    claim = "Mars has two moons."
    free = make_generator(validate_section("generate", base), seed=13, threads=2)
    stopped = make_generator(
        validate_section("generate", {**base, "stop": [". "]}), seed=13, threads=2
    )
    full, short = free.generate(claim, CONTEXT), stopped.generate(claim, CONTEXT)
    # the grammar writes "<VERDICT>. " first: the first ". " ends the answer right after the
    # verdict, which is the full answer's own first words
    assert short.text.strip() in VERDICT_LABELS
    assert full.text.startswith(short.text.strip() + ". ")
    assert short.completion_tokens < full.completion_tokens
    assert short == stopped.generate(claim, CONTEXT)  # deterministic


@pytest.mark.full  # make test-all: the llama.cpp generator, not the default
def test_packaged_smollm_flash_attention_auto_is_on_and_a_small_ubatch_is_deterministic():
    base = {"method": "llama_cpp", "prompt": "claim_verdict", "max_tokens": 24}
    claim = "Curiosity landed on Mars in 2012."

    def answer(**over):
        cfg = validate_section("generate", {**base, **over})
        return make_generator(cfg, seed=13, threads=2).generate(claim, CONTEXT)

    auto = answer()
    # llama.cpp's auto mode turns flash attention on for this CPU model: the same answer
    assert answer(flash_attn=True) == auto
    assert auto.text.split(".")[0] in VERDICT_LABELS
    small = answer(n_ubatch=16)  # the prompt evaluated 16 tokens at a time
    assert small.prompt_tokens == auto.prompt_tokens > 16
    assert small == answer(n_ubatch=16)
