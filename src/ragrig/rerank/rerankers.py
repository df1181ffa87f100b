"""Rerankers: identity, and a sentence-transformers CrossEncoder (local folder or hub id)."""

from __future__ import annotations

import os
from typing import Any

from ragrig.rerank import Candidate


class IdentityReranker:
    """Keeps the retrieval order and scores (the no-rerank baseline)."""

    @classmethod
    def from_config(cls, cfg: Any) -> IdentityReranker:
        return cls()

    def rerank(self, query: str, candidates: list[Candidate]) -> list[Candidate]:
        return list(candidates)


class CrossEncoderReranker:
    """Scores (query, passage) pairs with a cross-encoder; ties keep the retrieval order."""

    def __init__(self, model: str, batch_size: int = 16, max_length: int = 256):
        from sentence_transformers import CrossEncoder

        from ragrig.errors import ConfigError
        from ragrig.models import resolve_model

        try:
            self.model = CrossEncoder(resolve_model(model), device="cpu", max_length=max_length)
        except OSError as exc:
            raise ConfigError(
                f"cannot load cross-encoder {model!r}: not a local model folder, and hub ids need "
                f"network access (HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE', '')!r}): {exc}"
            ) from exc
        self.batch_size = batch_size

    @classmethod
    def from_config(cls, cfg: Any) -> CrossEncoderReranker:
        return cls(cfg.model, cfg.batch_size, cfg.max_length)

    def rerank(self, query: str, candidates: list[Candidate]) -> list[Candidate]:
        if not candidates:
            return []
        scores = self.model.predict(
            [(query, c.text) for c in candidates],
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        rescored = [
            (float(s), i, Candidate(c.doc_id, c.chunk_id, c.text, float(s)))
            for i, (c, s) in enumerate(zip(candidates, scores, strict=True))
        ]
        rescored.sort(key=lambda t: (-t[0], t[1]))
        return [c for _, _, c in rescored]
