"""generate=smollm2_torch (the default generator): the packaged GGUF de-quantized into torch,
bf16 prompt, fp32 decode, answers decoded in batches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ragrig.core.config import validate_section
from ragrig.core.errors import ConfigError
from ragrig.generate import Request, make_generator
from ragrig.generate.prompt import VERDICT_LABELS, read_completion
from ragrig.generate.torch_gguf import CACHE_ENV, TorchGgufGenerator, gguf_cache_dir, load_gguf
from ragrig.weights.models import resolve_model
from tests.conftest import PROJECT

CONTEXT = [
    "Mars has two small moons, Phobos and Deimos.",
    "Phobos orbits Mars three times a day.",
]
CLAIM = "Mars has two moons."


@pytest.fixture(scope="module")
def gguf_cache(tmp_path_factory):
    """A conversion cache of this module's own: the fixture below always converts the GGUF file
    (and writes the cache), test_second_load_reads_the_cache_bit_for_bit reads it back."""
    folder = tmp_path_factory.mktemp("gguf-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(CACHE_ENV, str(folder))
        yield folder


@pytest.fixture(scope="module")
def torch_smollm(gguf_cache):
    raw = yaml.safe_load((PROJECT / "conf" / "generate" / "smollm2_torch.yaml").read_text())
    # the machine's own precision (auto): bf16 emulated on a CPU without bf16 units runs the
    # prompt several times slower; the bf16-against-fp32 test builds both twins itself
    cfg = validate_section("generate", {**raw, "max_tokens": 24})
    return make_generator(cfg, seed=13, threads=2)


def test_second_load_reads_the_cache_bit_for_bit(torch_smollm, gguf_cache):
    import torch

    path = Path(resolve_model(torch_smollm.model_name))
    cache = gguf_cache_dir(path)
    assert cache.parent == gguf_cache
    assert {p.name for p in cache.iterdir()} >= {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
    }
    assert "quantization_config" not in json.loads((cache / "config.json").read_text())
    tokenizer, model = load_gguf(path)  # from the cache now
    assert model.config._name_or_path == str(cache)
    converted, cached = torch_smollm.model.state_dict(), model.state_dict()
    assert converted.keys() == cached.keys()
    assert all(torch.equal(converted[k], cached[k]) for k in converted)
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # tied
    messages = [{"role": "user", "content": "Phobos orbits Mars; naïve café, 2.5% of ¥100."}]
    assert tokenizer.apply_chat_template(
        messages, add_generation_prompt=True
    ) == torch_smollm.tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    assert model.generation_config.eos_token_id == torch_smollm.model.generation_config.eos_token_id


def _with(gen, **fields):
    other = TorchGgufGenerator.__new__(TorchGgufGenerator)
    other.__dict__.update({**gen.__dict__, **fields})
    return other


def test_config_validates_and_rejects_unknown_precision_and_blank_stops():
    cfg = validate_section("generate", {"method": "torch_gguf"})
    assert (cfg.prefill_precision, cfg.constrain_verdict, cfg.stop) == ("auto", True, [])
    assert cfg.decode_batch == 16
    with pytest.raises(ConfigError, match="decode_batch"):
        validate_section("generate", {"method": "torch_gguf", "decode_batch": 0})
    with pytest.raises(ConfigError, match="prefill_precision"):
        validate_section("generate", {"method": "torch_gguf", "prefill_precision": "int8"})
    with pytest.raises(ConfigError, match="empty stop string"):
        validate_section("generate", {"method": "torch_gguf", "stop": [""]})
    with pytest.raises(ConfigError, match="n_batch"):  # a llama.cpp setting is not one of its
        validate_section("generate", {"method": "torch_gguf", "n_batch": 512})


def test_verdict_constraint_follows_the_three_token_sequences_then_lets_go():
    gen = TorchGgufGenerator.__new__(TorchGgufGenerator)
    gen.verdicts = [[5, 6, 9], [5, 7], [8, 9]]
    assert gen._allowed([]) == [5, 8]
    assert gen._allowed([5]) == [6, 7]
    assert gen._allowed([5, 6]) == [9]
    assert gen._allowed([5, 7]) is None  # a verdict is complete: free from here
    assert gen._allowed([8, 9, 1, 2]) is None
    gen.verdicts = []
    assert gen._allowed([]) is None  # unconstrained


def test_answer_begins_with_a_verdict_and_is_deterministic(torch_smollm):
    first = torch_smollm.respond(CLAIM, CONTEXT)
    text = read_completion(first).text
    assert any(text.startswith(f"{label}.") for label in VERDICT_LABELS), text
    assert read_completion(torch_smollm.respond(CLAIM, CONTEXT)) == read_completion(first)
    timings, usage = first["timings"], first["usage"]
    assert timings["prompt_n"] == usage["prompt_tokens"] > 50
    assert timings["predicted_n"] == usage["completion_tokens"] <= 24
    assert timings["prompt_ms"] > 0 and timings["predicted_ms"] > 0


@pytest.mark.full  # make test-all: more decoding
def test_bf16_prompt_picks_the_same_verdict_as_fp32_and_samples_are_seeded(torch_smollm):
    fp32 = _with(torch_smollm, prefill_precision="fp32")
    bf16 = _with(torch_smollm, prefill_precision="bf16")
    bf16_text = bf16.generate(CLAIM, CONTEXT).text
    assert fp32.generate(CLAIM, CONTEXT).text.split(".")[0] == bf16_text.split(".")[0]
    a = bf16.generate(CLAIM, CONTEXT, temperature=0.9, seed=1)
    assert a == bf16.generate(CLAIM, CONTEXT, temperature=0.9, seed=1)
    assert a.text.split(".")[0] in VERDICT_LABELS  # the constraint holds while sampling too


def test_stop_string_ends_the_answer_and_a_long_prompt_is_refused(torch_smollm):
    stopped = TorchGgufGenerator.__new__(TorchGgufGenerator)
    stopped.__dict__.update({**torch_smollm.__dict__, "stop": ["."]})
    short = stopped.generate(CLAIM, CONTEXT)
    assert short.text.strip() in VERDICT_LABELS
    tight = TorchGgufGenerator.__new__(TorchGgufGenerator)
    tight.__dict__.update({**torch_smollm.__dict__, "n_ctx": 64})
    with pytest.raises(ValueError, match="exceeds n_ctx 64"):
        tight.generate(CLAIM, CONTEXT)


@pytest.mark.full  # make test-all: 50 s of decoding
def test_answers_decoded_together_equal_each_decoded_alone(torch_smollm):
    requests = [
        Request(CLAIM, CONTEXT),
        Request("Phobos is larger than Deimos.", CONTEXT[:1]),  # a shorter prompt: padded
        Request("Deimos orbits Venus.", [*CONTEXT, "Venus has no moons at all."]),
    ]
    together = _with(torch_smollm, batch_size=3).respond_many(requests)
    alone = _with(torch_smollm, batch_size=1)
    lengths = {r["usage"]["prompt_tokens"] for r in together}
    assert len(lengths) == 3  # three prompt lengths in one batch
    for request, response in zip(requests, together, strict=True):
        single = alone.respond(request.question, request.passages)
        assert read_completion(response) == read_completion(single)
        assert response["timings"]["predicted_ms"] > 0
    # sampling in a batch: seeded per request, the same as alone
    sampled = _with(torch_smollm, batch_size=2).generate_many(
        [Request(CLAIM, CONTEXT, 0.9, 1), Request(CLAIM, CONTEXT, 0.9, 2)]
    )
    assert sampled[0].text == alone.generate(CLAIM, CONTEXT, temperature=0.9, seed=1).text
    assert sampled[1].text == alone.generate(CLAIM, CONTEXT, temperature=0.9, seed=2).text
    assert all(g.seconds > 0 for g in sampled)


def test_a_requests_token_budget_ends_it_alone_in_its_batch(torch_smollm):
    gen = _with(torch_smollm, batch_size=2)
    full, cut = gen.respond_many([Request(CLAIM, CONTEXT), Request(CLAIM, CONTEXT, max_tokens=3)])
    assert full["usage"]["completion_tokens"] > 3
    assert cut["usage"]["completion_tokens"] == 3
    assert cut["choices"][0]["finish_reason"] == "length"
    # greedy: the cut answer is the first three tokens of the whole one
    ids = gen.tokenizer.encode(read_completion(full).text, add_special_tokens=False)
    assert read_completion(cut).text == gen.tokenizer.decode(ids[:3], skip_special_tokens=True)


def test_a_prompt_starts_from_the_prefix_it_shares_and_answers_as_a_full_pass(torch_smollm):
    """The position probe's three orders of one claim's passages: the first and second share
    only the head, the third shares the second's first passage too."""
    passages = [*CONTEXT, "Venus has no moons at all."]
    orders = [passages, [passages[1], passages[0], passages[2]], passages[1:] + passages[:1]]
    reuse = _with(torch_smollm, reuse_prefix=True, _last=None, tokens_reused=0)
    full = _with(torch_smollm, reuse_prefix=False, _last=None, tokens_reused=0)
    requests = [Request(CLAIM, order) for order in orders]
    assert [g.text for g in reuse.generate_many(requests)] == [
        g.text for g in full.generate_many(requests)
    ]
    ids = [reuse._prompt_ids(CLAIM, order) for order in orders]
    head = len(reuse._head[0])
    assert all(x[:head] == reuse._head[0] for x in ids)
    shared = next(i for i, (a, b) in enumerate(zip(ids[1], ids[2], strict=False)) if a != b)
    assert shared > head + 5  # "[1] Phobos orbits Mars ..." as well
    assert reuse.tokens_reused == head + head + shared and full.tokens_reused == 0


def test_a_sample_drawn_after_its_batch_starts_from_its_answers_kept_prompt(torch_smollm):
    """Self-consistency's samples come after their batch of answers: with keep_prompts, a
    sample evaluates its prompt's last token only, from the same keys and values as a sample
    drawn right after its own answer (the previous prompt's reuse), and so samples alike."""
    from collections import OrderedDict

    kept = _with(torch_smollm, _last=None, _kept=OrderedDict(), keep=0, tokens_reused=0)
    kept.keep_prompts(2)
    kept.generate_many([Request(CLAIM, CONTEXT), Request("Deimos orbits Venus.", CONTEXT[:1])])
    before = kept.tokens_reused
    sample = kept.generate(CLAIM, CONTEXT, temperature=0.9, seed=1)  # not the last prompt
    assert kept.tokens_reused - before == len(kept._prompt_ids(CLAIM, CONTEXT)) - 1
    after = _with(torch_smollm, _last=None, _kept=OrderedDict(), keep=0, tokens_reused=0)
    after.generate(CLAIM, CONTEXT)
    assert sample.text == after.generate(CLAIM, CONTEXT, temperature=0.9, seed=1).text
    kept.keep_prompts(0)
    assert not kept._kept


@pytest.mark.full  # make test-all: more decoding
def test_a_request_too_long_fails_alone_in_its_batch(torch_smollm):
    short = torch_smollm.respond(CLAIM, CONTEXT[:1])["usage"]["prompt_tokens"]
    n_ctx = short + torch_smollm.max_tokens  # the short prompt and its answer just fit
    tight = _with(torch_smollm, batch_size=2, n_ctx=n_ctx)
    out = tight.generate_many([Request(CLAIM, CONTEXT * 3), Request(CLAIM, CONTEXT[:1])])
    assert isinstance(out[0], ValueError) and f"exceeds n_ctx {n_ctx}" in str(out[0])
    assert out[1].text.split(".")[0] in VERDICT_LABELS


def test_prepare_converts_only_what_is_not_cached(torch_smollm, gguf_cache, tmp_path, monkeypatch):
    from ragrig.generate import torch_gguf

    path = Path(resolve_model(torch_smollm.model_name))
    assert torch_gguf.prepare(torch_smollm.model_name) == (gguf_cache_dir(path), False)
    loads: list[Path] = []
    monkeypatch.setattr(torch_gguf, "load_gguf", loads.append)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert torch_gguf.prepare(torch_smollm.model_name) == (gguf_cache_dir(path), True)
    assert loads == [path] and gguf_cache_dir(path).parent == tmp_path


def test_the_estimate_counts_the_prompt_tokens_the_generator_reports(torch_smollm):
    """`ragrig estimate` counts a local GGUF model's prompts with its own tokenizer: the count is
    the generator's own usage, token for token, before anything is generated."""
    from ragrig.report.config import Price
    from ragrig.report.estimate import generate_parts

    cfg = validate_section("generate", {**yaml.safe_load(
        (PROJECT / "conf" / "generate" / "smollm2_torch.yaml").read_text()), "max_tokens": 24})  # fmt: skip
    used = torch_smollm.respond(CLAIM, CONTEXT)["usage"]["prompt_tokens"]
    prices = {cfg.model: Price(input_per_mtok=0.0, output_per_mtok=0.0)}
    (part,) = generate_parts(cfg, ["q"], {"q": CLAIM}, {"q": CONTEXT}, prices, "2026-11-01")
    assert (part.prompt_tokens, part.tokens, part.calls) == (used, "tokenizer", 1)
    assert part.completion_tokens == 24 and part.usd == 0.0
