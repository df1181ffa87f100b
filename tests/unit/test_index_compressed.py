"""index/dense=ivf_pq and hnsw_sq: compressed FAISS indexes for millions of vectors."""

from __future__ import annotations

import faiss
import numpy as np
import pytest

from ragrig.core.config import validate_section
from ragrig.core.errors import ConfigError
from ragrig.index.dense import (
    build_flat,
    build_hnsw,
    build_hnsw_sq,
    build_ivf_pq,
    search,
    set_search_params,
    training_sample,
)


def _clustered(n: int = 4000, d: int = 32, centres: int = 20, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centres, d))
    x = c[rng.integers(0, centres, n)] + 0.3 * rng.standard_normal((n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32)


def _dense(**kw):
    return validate_section("index", {"dense": kw, "sparse": {"method": "bm25s"}}).dense


def _recall(index, exact, queries, k=10) -> float:
    _, a = search(index, queries, k)
    _, e = search(exact, queries, k)
    return float(np.mean([len(set(a[i]) & set(e[i])) / k for i in range(len(queries))]))


def test_training_sample_is_seeded_in_row_order_and_whole_when_small():
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    s1, s2 = training_sample(x, 4, 7), training_sample(x, 4, 7)
    assert s1.shape == (4, 2) and np.array_equal(s1, s2)
    assert list(s1[:, 0]) == sorted(s1[:, 0])  # row order kept
    assert not np.array_equal(s1, training_sample(x, 4, 8))  # another seed, another sample
    assert training_sample(x, 10, 7) is x


def test_ivf_pq_is_reproducible_and_refine_recovers_recall():
    x = _clustered()
    exact = build_flat(x, None)
    cfg = _dense(method="ivf_pq", nlist=16, pq_m=8, pq_bits=6, train_sample=2000)
    a, b = build_ivf_pq(x, cfg), build_ivf_pq(x, cfg)
    assert np.array_equal(faiss.serialize_index(a), faiss.serialize_index(b))
    set_search_params(a, 16, 16)  # every list: only quantisation loses neighbours
    plain = _recall(a, exact, x[:200])
    refined = {}
    for refine in ("sq8", "flat"):
        r = build_ivf_pq(x, cfg.model_copy(update={"refine": refine, "k_factor": 32}))
        set_search_params(r, 16, 16)
        assert faiss.extract_index_ivf(r).nprobe == 16  # set through the IndexRefine
        assert r.k_factor == 32
        refined[refine] = _recall(r, exact, x[:200])
    # re-scoring 32 x k candidates: sq8 codes recover most neighbours, exact vectors all
    assert 0.15 < plain < refined["sq8"] < refined["flat"] == 1.0
    # 8 sub-quantisers of 6 bits: far below float32's 128 bytes per vector
    assert len(faiss.serialize_index(a)) / len(x) < 0.5 * 4 * x.shape[1]


def test_ivf_pq_bad_settings_are_one_clear_error():
    x = _clustered(n=300)
    with pytest.raises(ConfigError, match="pq_m=5 must divide the vector dimension 32"):
        build_ivf_pq(x, _dense(method="ivf_pq", nlist=4, pq_m=5))
    with pytest.raises(ConfigError, match="300 training vectors for nlist=4 and 2\\^pq_bits=512"):
        build_ivf_pq(x, _dense(method="ivf_pq", nlist=4, pq_m=8, pq_bits=9))


def test_hnsw_sq_is_reproducible_smaller_than_hnsw_and_finds_the_neighbours():
    x = _clustered(n=2000)
    cfg = _dense(method="hnsw_sq", m=16, ef_construction=64)
    a, b = build_hnsw_sq(x, cfg), build_hnsw_sq(x, cfg)
    assert np.array_equal(faiss.serialize_index(a), faiss.serialize_index(b))  # one thread
    set_search_params(a, 64, 1)
    assert a.hnsw.efSearch == 64
    assert _recall(a, build_flat(x, None), x[:200]) > 0.9
    full = build_hnsw(x, _dense(method="hnsw", m=16, ef_construction=64))
    # 8-bit codes: 32 bytes instead of 128 per vector, the same graph cost
    saved = len(faiss.serialize_index(full)) - len(faiss.serialize_index(a))
    assert saved == pytest.approx(len(x) * (4 - 1) * x.shape[1], rel=0.01)


def test_index_options_are_in_conf():
    from pathlib import Path

    import yaml

    conf = Path(__file__).resolve().parents[2] / "conf" / "index" / "dense"
    for name in ("ivf_pq", "hnsw_sq"):
        cfg = _dense(**yaml.safe_load((conf / f"{name}.yaml").read_text()))
        assert cfg.method == name
