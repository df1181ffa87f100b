"""Full-dataset regression on BEIR SciFact: counts, claim labels, BM25 against the published figure."""

from __future__ import annotations

import pytest

from ragrig.core.config import validate_section
from ragrig.dataset.beir import load_beir
from ragrig.dataset.claims import load_claims
from ragrig.index.sparse import Bm25sIndex
from ragrig.metrics.ir import mean_measures
from ragrig.parse import documents_table, queries_table

from .conftest import SHARED

ROOT = SHARED / "datasets" / "scifact"
# Full-dataset tests run with `make test-slow` (pytest -m slow); the default run leaves them out.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not ROOT.exists(), reason="SciFact not present"),
]


@pytest.fixture(scope="module")
def scifact():
    return load_beir(ROOT, "test")


def test_counts_and_claim_labels(scifact):
    assert (len(scifact.corpus), len(scifact.queries)) == (5183, 300)
    assert sum(len(v) for v in scifact.qrels.values()) == 339
    claims = load_claims([ROOT / "original/claims_dev.jsonl", ROOT / "original/claims_train.jsonl"])
    labels = queries_table(scifact, claims)["claim_label"].value_counts().to_dict()
    assert labels == {"SUPPORT": 124, "NOT_ENOUGH_INFO": 112, "CONTRADICT": 64}


def test_bm25_ndcg_at_10_close_to_published(scifact):
    docs = documents_table(scifact, "beir:scifact", ". ")
    cfg = validate_section(
        "index", {"dense": {"method": "flat"}, "sparse": {"method": "bm25s"}}
    ).sparse
    index = Bm25sIndex.build(docs["content"].tolist(), cfg)
    qids = sorted(scifact.queries)
    _, rows = index.search([scifact.queries[q] for q in qids], k=100)
    doc_ids = docs["doc_id"].to_numpy()
    rankings = {q: doc_ids[r[r >= 0]].tolist() for q, r in zip(qids, rows, strict=True)}
    means = mean_measures(rankings, scifact.qrels, ["ndcg@10", "recall@100"])
    assert means["ndcg@10"] == pytest.approx(0.6762, abs=5e-4)
    assert abs(means["ndcg@10"] - 0.679) <= 0.015  # published flat BM25 (Anserini) figure
    assert means["recall@100"] == pytest.approx(0.9127, abs=5e-4)
