"""sentence-transformers embedder, loading packaged weights, a local folder or a hub id."""

from __future__ import annotations

import copy
import importlib.metadata
from typing import Any

import numpy as np

from ragrig.models import model_fingerprint, resolve_model


class SentenceTransformerEmbedder:
    def __init__(
        self,
        model: str,
        batch_size: int = 32,
        max_seq_length: int | None = None,
        normalize: bool = True,
        prefix: str = "",
    ):
        from sentence_transformers import SentenceTransformer

        self.model_ref = model
        self.model = SentenceTransformer(resolve_model(model), device="cpu")
        if max_seq_length is not None:
            self.model.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self.normalize = normalize
        self.prefix = prefix

    @classmethod
    def from_config(cls, cfg: Any, role: str = "passage") -> SentenceTransformerEmbedder:
        prefix = cfg.query_prefix if role == "query" else cfg.passage_prefix
        return cls(cfg.model, cfg.batch_size, cfg.max_seq_length, cfg.normalize, prefix)

    def with_prefix(self, prefix: str) -> SentenceTransformerEmbedder:
        """Same loaded model, another text prefix (queries vs passages)."""
        clone = copy.copy(self)
        clone.prefix = prefix
        return clone

    def fingerprint(self) -> dict[str, Any]:
        return {
            "model": model_fingerprint(self.model_ref),
            "runtime": "sentence-transformers=="
            + importlib.metadata.version("sentence-transformers"),
            "max_seq_length": self.model.max_seq_length,
        }

    def encode(self, texts: list[str], progress: bool = False) -> np.ndarray:
        if self.prefix:
            texts = [self.prefix + t for t in texts]
        vecs = self.model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=self.normalize,
            convert_to_numpy=True,
            show_progress_bar=progress,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)
