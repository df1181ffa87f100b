"""BM25 indexes: bm25s (fast, default) and rank-bm25 (reference implementation)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ragrig.text import tokenize


class Bm25sIndex:
    """bm25s with Lucene-style BM25 (k1, b)."""

    def __init__(self, cfg: Any, model: Any = None):
        self.cfg = cfg
        self.model = model

    @classmethod
    def build(cls, texts: list[str], cfg: Any) -> Bm25sIndex:
        import bm25s

        model = bm25s.BM25(k1=cfg.k1, b=cfg.b, method="lucene")
        model.index(tokenize(texts, cfg.stemmer, cfg.stopwords), show_progress=False)
        return cls(cfg, model)

    def save(self, folder: Path) -> None:
        self.model.save(str(folder))

    @classmethod
    def load(cls, folder: Path, cfg: Any) -> Bm25sIndex:
        import bm25s

        return cls(cfg, bm25s.BM25.load(str(folder)))

    def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Return (scores, row ids) of shape (n_queries, k'), best first."""
        toks = tokenize(queries, self.cfg.stemmer, self.cfg.stopwords)
        n_docs = int(self.model.scores["num_docs"])
        k = min(k, n_docs)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        ids = np.full((len(queries), k), -1, dtype=np.int64)
        for i, qt in enumerate(toks):
            full = self.model.get_scores(qt)
            top = _top_k(full, k)
            ids[i], scores[i] = top, full[top]
        return scores, ids


class RankBm25Index:
    """rank-bm25 BM25Okapi over the same tokens (rebuilt from stored tokens on load)."""

    def __init__(self, cfg: Any, tokens: list[list[str]]):
        from rank_bm25 import BM25Okapi

        self.cfg = cfg
        self.tokens = tokens
        self.model = BM25Okapi(tokens, k1=cfg.k1, b=cfg.b, epsilon=cfg.epsilon)

    @classmethod
    def build(cls, texts: list[str], cfg: Any) -> RankBm25Index:
        return cls(cfg, tokenize(texts, cfg.stemmer, cfg.stopwords))

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tokens.json").write_text(json.dumps(self.tokens), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path, cfg: Any) -> RankBm25Index:
        return cls(cfg, json.loads((folder / "tokens.json").read_text(encoding="utf-8")))

    def search(self, queries: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        toks = tokenize(queries, self.cfg.stemmer, self.cfg.stopwords)
        k = min(k, len(self.tokens))
        scores = np.zeros((len(queries), k), dtype=np.float32)
        ids = np.full((len(queries), k), -1, dtype=np.int64)
        for i, qt in enumerate(toks):
            full = np.asarray(self.model.get_scores(qt), dtype=np.float32)
            top = _top_k(full, k)
            ids[i], scores[i] = top, full[top]
        return scores, ids


def _top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Row ids of the k best scores; ties broken by row id (ascending) for determinism."""
    order = np.lexsort((np.arange(len(scores)), -scores))
    return order[:k]
