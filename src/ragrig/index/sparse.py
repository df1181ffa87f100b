"""BM25 indexes: bm25s (fast, default) and rank-bm25 (reference implementation)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ragrig.core.errors import DataValidationError
from ragrig.core.text import tokenize


class Bm25sIndex:
    """bm25s with Lucene-style BM25 (k1, b)."""

    def __init__(self, cfg: Any, model: Any = None):
        self.cfg = cfg
        self.model = model

    @classmethod
    def build(cls, texts: list[str], cfg: Any) -> Bm25sIndex:
        import bm25s

        model = bm25s.BM25(k1=cfg.k1, b=cfg.b, method="lucene")
        model.index(
            _sorted_vocab_ids(tokenize(texts, cfg.stemmer, cfg.stopwords)), show_progress=False
        )
        return cls(cfg, model)

    def save(self, folder: Path) -> None:
        self.model.save(str(folder))

    @classmethod
    def load(cls, folder: Path, cfg: Any) -> Bm25sIndex:
        import bm25s

        return cls(cfg, bm25s.BM25.load(str(folder)))

    def search(
        self, queries: list[str], k: int, rows: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Return (scores, row ids) of shape (n_queries, k'), best first; see `_top_k`.
        `rows`: only these chunk rows may be returned (a hard filter's score mask)."""
        toks = tokenize(queries, self.cfg.stemmer, self.cfg.stopwords)
        n_docs = int(self.model.scores["num_docs"])
        return _search_all(
            lambda qt: self.model.get_scores(qt) if qt else np.zeros(n_docs),
            toks,
            min(k, n_docs),
            rows,
        )


def _sorted_vocab_ids(tokens: list[list[str]]) -> tuple[list[list[int]], dict[str, int]]:
    """Token ids from a vocabulary numbered in sorted order.

    Given tokens, bm25s numbers its vocabulary in the iteration order of a Python set, which
    follows the string hash seed (PYTHONHASHSEED): the saved vocabulary and score matrix would
    then differ byte for byte between two builds of the same corpus, and every rebuild would
    miss DVC's run-cache downstream. Passing (ids, vocabulary) makes the numbering ours.
    """
    vocab = {token: i for i, token in enumerate(sorted({t for doc in tokens for t in doc}))}
    if not vocab:
        raise DataValidationError("bm25: no chunk has an indexable token (all empty or stopwords)")
    return [[vocab[t] for t in doc] for doc in tokens], vocab


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

    def search(
        self, queries: list[str], k: int, rows: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        toks = tokenize(queries, self.cfg.stemmer, self.cfg.stopwords)
        n_docs = len(self.tokens)
        return _search_all(
            lambda qt: self.model.get_scores(qt) if qt else np.zeros(n_docs),
            toks,
            min(k, n_docs),
            rows,
        )


def _search_all(
    score_fn, query_tokens: list[list[str]], k: int, rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    scores = np.zeros((len(query_tokens), k), dtype=np.float32)
    ids = np.full((len(query_tokens), k), -1, dtype=np.int64)
    for i, qt in enumerate(query_tokens):
        full = np.asarray(score_fn(qt), dtype=np.float32)
        if rows is not None:  # a hard filter: every other chunk scores 0, so it is no hit
            masked = np.zeros_like(full)
            masked[rows] = full[rows]
            full = masked
        top = _top_k(full, k)
        ids[i, : len(top)], scores[i, : len(top)] = top, full[top]
    return scores, ids


def _top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Row ids of the k best positive scores, ties broken by row id (ascending).

    Documents that share no term with the query (score 0) are not hits: they would otherwise
    pad short result lists and take part in fusion. A partial selection keeps this O(n).
    """
    if k <= 0 or scores.size == 0:
        return np.empty(0, dtype=np.int64)
    kth = min(k, scores.size) - 1
    threshold = np.partition(-scores, kth)[kth]  # -(k-th best score)
    cand = np.flatnonzero((-scores <= threshold) & (scores > 0))  # all ties at the boundary
    order = np.lexsort((cand, -scores[cand]))
    return cand[order][:k]
