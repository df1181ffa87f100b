"""A fusion setting tuned on one corpus is used on that corpus only (ragrig.retrieve.tuning),
and the report flags a fused ranking below its better lane (ragrig.metrics.ir)."""

from __future__ import annotations

import hashlib

import pandas as pd
import pytest

from ragrig.core.config import validate_section
from ragrig.core.errors import ConfigError
from ragrig.metrics.ir import fusion_against_lanes
from ragrig.report.summary import fusion_warning
from ragrig.retrieve.tuning import choose_fusion, corpus_fingerprint, documents_fingerprint

DOCS = pd.DataFrame(
    {"doc_id": ["d2", "d1"], "title": ["Deimos", "Phobos"], "text": ["small", "large"]}
)


def _expected(rows):
    h = hashlib.sha256()
    for row in rows:
        for field in row:
            data = field.encode()
            h.update(len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


def test_the_fingerprint_is_of_the_content_in_doc_id_order_with_fields_kept_apart():
    fp = documents_fingerprint(DOCS)
    assert fp == _expected([("d1", "Phobos", "large"), ("d2", "Deimos", "small")])
    assert fp == documents_fingerprint(DOCS.iloc[::-1])  # row order does not matter
    moved = corpus_fingerprint([("d1", "Phobo", "slarge"), ("d2", "Deimos", "small")])
    assert moved != fp  # text moved between fields is another corpus


def _hybrid(method, **kw):
    return validate_section("retrieve", {"method": method, **kw})


FP = documents_fingerprint(DOCS)
TUNED = [{"corpus_sha256": FP, "value": 5, "source": "tuned on the moons"}]


@pytest.mark.parametrize(
    ("cfg", "fingerprint", "expected"),
    [
        # on the corpus it was tuned on: the tuned value
        (_hybrid("hybrid_rrf", tuned=TUNED), FP, ("rrf_k", 5, "tuned", "tuned on the moons")),
        # on any other corpus: the setting that needs no tuning
        (_hybrid("hybrid_rrf", tuned=TUNED), "0" * 64, ("rrf_k", 60, "untuned", None)),
        (_hybrid("hybrid_convex"), FP, ("alpha", 0.5, "untuned", None)),
        # a value set in the config is used as given, tuned list or not
        (_hybrid("hybrid_rrf", rrf_k=20, tuned=TUNED), FP, ("rrf_k", 20, "configured", None)),
    ],
)
def test_a_tuned_setting_applies_to_its_own_corpus_only(cfg, fingerprint, expected):
    param, value, source, reason = expected
    filled, choice = choose_fusion(cfg, fingerprint)
    assert (choice.param, choice.value, choice.source) == (param, value, source)
    assert getattr(filled, param) == value
    if reason:
        assert choice.reason == reason
    if source == "untuned":
        assert choice.reason.startswith(f"no value tuned on this corpus (sha256 {fingerprint[:12]}")


def test_a_method_without_fusion_is_left_alone_and_bad_tuned_entries_are_refused():
    dense = _hybrid("dense")
    assert choose_fusion(dense, FP) == (dense, None)
    with pytest.raises(ConfigError, match="rrf_k values must be whole numbers"):
        _hybrid("hybrid_rrf", tuned=[{**TUNED[0], "value": 2.5}])
    with pytest.raises(ConfigError, match="tuned.0.corpus_sha256: String should match pattern"):
        _hybrid("hybrid_convex", tuned=[{**TUNED[0], "corpus_sha256": "scifact", "value": 0.4}])


def test_a_fused_ranking_below_its_better_lane_is_flagged():
    lanes = {"dense": {"ndcg@10": 0.5137}, "bm25": {"ndcg@10": 0.41}}
    low = fusion_against_lanes({"ndcg@10": 0.4722}, lanes, "ndcg@10")
    assert low == {
        "measure": "ndcg@10",
        "fused": 0.4722,
        "best_lane": "dense",
        "best_lane_value": 0.5137,
        "below_best_lane": True,
    }
    assert fusion_warning(low) == (
        "  warning: the fused ranking's ndcg@10 0.4722 (before reranking) is below its dense "
        "lane's 0.5137: the fusion setting does not suit this corpus (docs/metrics.md "
        '"Fusion settings")'
    )
    assert not fusion_against_lanes({"ndcg@10": 0.52}, lanes, "ndcg@10")["below_best_lane"]
    assert fusion_against_lanes({"ndcg@10": 0.5}, {"dense": lanes["dense"]}, "ndcg@10") is None
