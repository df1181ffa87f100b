"""The shipped verifier and the packaged MiniLM exported to ONNX (ragrig.weights.onnx_export):
the same numbers as torch's fp32 through onnxruntime, written whole into the cache, a broken
file one line, and the judge settings `ragrig traces` switches to it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragrig.core.errors import ConfigError
from ragrig.judge import verifier_model as VM
from ragrig.judge.confirm import shared_verifier
from ragrig.weights import onnx_export

PAIRS = [
    ("Aspirin lowers fever in most adults.", "Aspirin reduces fever in most adults within hours."),
    ("Aspirin does not reduce fever.", "Aspirin reduces fever in most adults within hours."),
    ("Aspirin cures diabetes.", "Aspirin is a common drug. " * 60),  # truncated at max_length
    ("The trial enrolled 120 patients.", "Of the 120 patients enrolled, 60 got the drug."),
]


def test_the_onnx_verifier_reads_as_torch_fp32_does():
    onnx = shared_verifier("shipped", 192, 32, 2, "onnx")
    torch_fp32 = shared_verifier("shipped", 192, 32, 2, "none")
    got, want = onnx.probabilities(PAIRS), torch_fp32.probabilities(PAIRS)
    assert got.shape == (4, 3)
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert onnx.readings(PAIRS[:1])[0][0] > 0.5  # the paraphrase supported, as in torch
    file = onnx.model.onnx_file
    assert file.parent == onnx_export.cache_root() and VM.SHIPPED_SHA256[:16] in file.name


def test_the_onnx_encoder_embeds_as_the_torch_one_does():
    from ragrig.core.config import load_section
    from ragrig.traces.embedder import light_embedder

    cfg = load_section("embed", Path(__file__).parents[2] / "params.yaml")
    cfg = cfg.model_copy(update={"precision": "fp32"})
    texts = ["a question about fever", "Aspirin reduces fever in most adults. " * 40, "x"]
    onnx, torch_fp32 = light_embedder(cfg, "passage", "onnx"), light_embedder(cfg, "passage")
    assert type(onnx).__name__ == "OnnxEmbedder" and type(torch_fp32).__name__ == "MeanPoolEmbedder"
    np.testing.assert_allclose(onnx.encode(texts), torch_fp32.encode(texts), atol=1e-5)


def test_traces_embed_batch_size_is_honoured_and_leaves_the_vectors_as_they_are():
    from ragrig.traces.axes import _LazyEmbedders

    params = Path(__file__).parents[2] / "params.yaml"
    texts = [f"Aspirin reduces fever in {n} adults. " * (1 + n % 7) for n in range(20)]
    small, full = _LazyEmbedders(params, "onnx", 3).pair(), _LazyEmbedders(params, "onnx").pair()
    assert [e.batch_size for e in small] == [3, 3] and [e.batch_size for e in full] == [32, 32]
    # the same vectors in 7 padded batches as in one: the cosine the semantic part reads
    np.testing.assert_allclose(small[1].encode(texts), full[1].encode(texts), atol=1e-6)


def test_a_cached_file_that_does_not_load_is_one_line_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv(onnx_export.CACHE_ENV, str(tmp_path))
    path = onnx_export.cached_path("verifier", VM.SHIPPED_SHA256)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not a graph")  # e.g. a file someone truncated by hand
    with pytest.raises(ConfigError) as err:
        VM.Verifier("shipped", 192, 32, 2, "onnx")
    assert str(path) in str(err.value) and "delete it" in str(err.value)
    assert "\n" not in str(err.value)


def test_an_export_killed_midway_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.setenv(onnx_export.CACHE_ENV, str(tmp_path))
    target = onnx_export.cached_path("x", "0" * 64)

    with pytest.raises(KeyboardInterrupt), onnx_export._writing_to(target) as tmp:
        tmp.write_bytes(b"half a graph")
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []
    with onnx_export._writing_to(target) as tmp:
        tmp.write_bytes(b"whole")
    assert [p.name for p in tmp_path.iterdir()] == [target.name]
    assert target.read_bytes() == b"whole" and target.stat().st_mode & 0o777 == 0o644


def test_traces_switch_every_verifier_of_the_judge_section_to_onnx():
    from ragrig.judge.config import ConsistencyConfig, onnx_verifiers
    from ragrig.weights.precision import resolve_precision

    assert onnx_verifiers(ConsistencyConfig(quantize="none")).quantize == "onnx"
    assert onnx_verifiers(ConsistencyConfig(quantize="bf16")).quantize == "onnx"
    assert onnx_verifiers(ConsistencyConfig(quantize="int8")).quantize == "onnx_int8"
    assert resolve_precision("auto", fp32="none") in ("none", "bf16")
    assert onnx_verifiers(ConsistencyConfig(quantize="auto")).quantize == "onnx"
    # nested sections too (the confirmation, self-consistency), the rest as it was
    from ragrig.core.config import load_section

    judge = load_section("judge", Path(__file__).parents[2] / "params.yaml")
    switched = onnx_verifiers(judge)
    assert judge.confirm.quantize == "auto" and switched.confirm.quantize == "onnx"
    assert switched.consistency.quantize == "onnx"
    parts = {"confirm", "consistency"}
    assert switched.model_dump(exclude=parts) == judge.model_dump(exclude=parts)
    assert switched.confirm.model_dump(exclude={"quantize"}) == judge.confirm.model_dump(
        exclude={"quantize"}
    )
    with pytest.raises(ConfigError, match="choose one of"):
        VM.Verifier("shipped", quantize="onnx_fp8")
