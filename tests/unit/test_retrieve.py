"""Chunk-to-document aggregation, lanes and ANN recall on small exact examples."""

from __future__ import annotations

import faiss
import numpy as np
import pytest

from ragrig.core.config import validate_section
from ragrig.index.dense import build_flat, build_hnsw, build_ivf
from ragrig.index.sparse import Bm25sIndex, RankBm25Index
from ragrig.retrieve import Hits, ann_recall, check_ann, retrieve_all, to_documents


def test_document_score_is_best_chunk_and_ties_by_id():
    chunk_doc = np.array(["b", "a", "b", "c"])
    chunk_ids = np.array(["b#0", "a#0", "b#1", "c#0"])
    hits = Hits(rows=np.array([2, 1, 0, 3, -1]), scores=np.array([0.9, 0.5, 0.4, 0.5, 0.0]))
    assert to_documents(hits, chunk_doc, chunk_ids, depth=10) == [
        ("b", "b#1", 0.9),
        ("a", "a#0", 0.5),
        ("c", "c#0", 0.5),
    ]
    assert len(to_documents(hits, chunk_doc, chunk_ids, depth=2)) == 2


TEXTS = [
    "mars moons phobos deimos",
    "venus thick atmosphere",
    "insulin lowers glucose",
    "mars rover curiosity",
]


@pytest.mark.parametrize("method", ["bm25s", "rank_bm25"])
def test_bm25_backends_rank_the_matching_text_first(method, tmp_path):
    cfg = validate_section(
        "index", {"dense": {"method": "flat"}, "sparse": {"method": method}}
    ).sparse
    cls = Bm25sIndex if method == "bm25s" else RankBm25Index
    index = cls.build(TEXTS, cfg)
    index.save(tmp_path / "bm25")
    loaded = cls.load(tmp_path / "bm25", cfg)
    scores, rows = loaded.search(["Which moons does Mars have?", "glucose"], k=4)
    assert rows[0][0] == 0 and rows[1][0] == 2
    assert scores[0][0] > scores[0][1] >= scores[0][2]


def _vectors(n=400, d=16, seed=0):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, d)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_hnsw_recall_against_exact_and_determinism():
    vecs, queries = _vectors(), _vectors(20, seed=1)
    cfg = validate_section(
        "index",
        {
            "dense": {"method": "hnsw", "m": 16, "ef_construction": 100},
            "sparse": {"method": "bm25s"},
        },
    ).dense
    a, b = build_hnsw(vecs, cfg), build_hnsw(vecs, cfg)
    assert faiss.serialize_index(a).tobytes() == faiss.serialize_index(b).tobytes()
    a.hnsw.efSearch = 200
    table, timing = ann_recall(
        a, build_flat(vecs, None), [str(i) for i in range(20)], queries, ks=[10, 50]
    )
    assert sorted(table["k"].unique()) == [10, 50] and len(table) == 40
    assert table[table["k"] == 10]["recall"].mean() >= 0.95
    assert set(timing) == {"approx_ms", "exact_ms"}


def test_flat_search_recall_is_exact():
    vecs = _vectors()
    flat = build_flat(vecs, None)
    table, _ = ann_recall(flat, build_flat(vecs, None), ["q"], vecs[:1], ks=[5])
    assert table["recall"].tolist() == [1.0]


class _FixedAnn:
    """An approximate index whose neighbours are given: rows [0, 1, 5, 3, 4, 2] for any query."""

    d, ntotal, nprobe = 2, 6, 1

    def search(self, queries, k):
        rows = np.array([[0, 1, 5, 3, 4, 2][:k]] * len(queries))
        return np.zeros(rows.shape, dtype=np.float32), rows


def test_check_ann_recall_at_reported_k_and_lane_depth():
    # exact order for the query (1, 0): rows 0..5 by falling inner product
    chunks = np.array(
        [[1, 0], [0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.6, 0.4], [0.5, 0.5]], dtype=np.float32
    )
    cfg = validate_section(
        "retrieve", {"method": "dense", "ann_recall_k": 2, "chunk_depth": 4, "nprobe": 3}
    )
    ann = _FixedAnn()
    table, fields = check_ann(cfg, ann, chunks, ["q"], np.array([[1, 0]], dtype=np.float32))
    assert ann.nprobe == 3  # the configured search parameter, set before measuring
    # top 2: {0, 1} vs {0, 1} -> 1.0; top 4: {0, 1, 5, 3} vs {0, 1, 2, 3} -> 0.75
    assert table.to_dict("records") == [
        {"qid": "q", "k": 2, "recall": 1.0},
        {"qid": "q", "k": 4, "recall": 0.75},
    ]
    assert list(fields)[:2] == ["exact_dense", "ann_recall_mean"]
    assert fields["exact_dense"] is False and fields["ann_recall_mean"] == 1.0
    assert set(fields) == {"exact_dense", "ann_recall_mean", "approx_ms", "exact_ms"}

    cfg_k4 = validate_section("retrieve", {"method": "dense", "ann_recall_k": 4, "chunk_depth": 4})
    table, fields = check_ann(cfg_k4, ann, chunks, ["q"], np.array([[1, 0]], dtype=np.float32))
    assert table["k"].tolist() == [4] and fields["ann_recall_mean"] == 0.75


def test_check_ann_exact_or_absent_dense_index_has_no_table():
    vecs = _vectors(n=10, d=4)
    cfg = validate_section("retrieve", {"method": "dense"})
    assert check_ann(cfg, build_flat(vecs, None), vecs, ["q"], vecs[:1]) == (
        None,
        {"exact_dense": True},
    )
    assert check_ann(cfg, None, vecs, ["q"], None) == (None, {"exact_dense": None})


def test_ivf_rejects_more_lists_than_vectors():
    from ragrig.core.errors import ConfigError

    cfg = validate_section(
        "index", {"dense": {"method": "ivf", "nlist": 64}, "sparse": {"method": "bm25s"}}
    ).dense
    with pytest.raises(ConfigError, match="nlist=64"):
        build_ivf(_vectors(n=20), cfg)


def test_retrieve_all_hybrid_lanes_and_run():
    vecs = _vectors(n=4, d=8)
    dense = build_flat(vecs, None)
    sparse_cfg = validate_section(
        "index", {"dense": {"method": "flat"}, "sparse": {"method": "bm25s"}}
    ).sparse
    sparse = Bm25sIndex.build(TEXTS, sparse_cfg)
    cfg = validate_section("retrieve", {"method": "hybrid_rrf", "depth": 3, "chunk_depth": 4})
    run, lanes, latency = retrieve_all(
        cfg,
        ["q1"],
        ["mars moons"],
        vecs[:1],
        dense,
        sparse,
        np.array(["d0", "d1", "d2", "d3"]),
        np.array(["d0#0", "d1#0", "d2#0", "d3#0"]),
        progress=False,
    )
    assert run["rank"].tolist() == [1, 2, 3]
    assert run["doc_id"].iloc[0] == "d0"  # first in both lanes
    assert sorted(lanes["lane"].unique()) == ["bm25", "dense"]
    assert latency["stage"].tolist() == ["retrieve"]


@pytest.mark.parametrize("method", ["bm25s", "rank_bm25"])
def test_bm25_returns_only_matching_documents_and_survives_empty_queries(method):
    cfg = validate_section(
        "index", {"dense": {"method": "flat"}, "sparse": {"method": method}}
    ).sparse
    index = (Bm25sIndex if method == "bm25s" else RankBm25Index).build(TEXTS, cfg)
    scores, rows = index.search(["phobos", "the and a", ""], k=4)
    assert rows[0].tolist() == [0, -1, -1, -1] and scores[0][0] > 0
    assert rows[1].tolist() == [-1] * 4 and rows[2].tolist() == [-1] * 4
    assert scores[1].tolist() == [0.0] * 4


def test_top_k_matches_a_full_sort_with_id_tie_break():
    from ragrig.index.sparse import _top_k

    rng = np.random.default_rng(3)
    scores = rng.integers(0, 5, size=500).astype(np.float32)  # many ties, many zeros
    for k in (1, 7, 50, 499, 600):
        full = np.lexsort((np.arange(500), -scores))
        expected = [i for i in full if scores[i] > 0][:k]
        assert _top_k(scores, k).tolist() == expected
