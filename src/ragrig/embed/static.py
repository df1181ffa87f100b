"""wordllama static embeddings: a token embedding table, mean-pooled, L2-normalised.

Loaded from the files inside the wordllama package (weights/<config>_<dim>.safetensors and
tokenizers/<config>_tokenizer_config.json) with downloads disabled. Pooling and normalisation
are wordllama's mean over the attention mask; the normalisation is done here so that a text with
no known token gives a zero vector instead of NaN.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ragrig.core.io import file_sha256
from ragrig.embed.base import Prefixed
from ragrig.weights.models import model_fingerprint, resolve_model


class WordLlamaEmbedder(Prefixed):
    def __init__(
        self,
        model: str = "packaged:wordllama-l2-supercat-256",
        config_name: str = "l2_supercat",
        dim: int = 256,
        batch_size: int = 64,
        normalize: bool = True,
        prefix: str = "",
    ):
        import logging

        from wordllama import WordLlama

        weights = Path(resolve_model(model))
        if weights.name != f"{config_name}_{dim}.safetensors" or weights.parent.name != "weights":
            raise ValueError(
                f"wordllama model {model!r}: expected weights/{config_name}_{dim}.safetensors, "
                f"got {weights}"
            )
        self.model_ref = model
        self.cache_dir = weights.parent.parent
        self.tokenizer_path = self.cache_dir / "tokenizers" / f"{config_name}_tokenizer_config.json"
        logging.getLogger("wordllama").setLevel(logging.WARNING)
        self.wl = WordLlama.load(
            config=config_name, dim=dim, cache_dir=self.cache_dir, disable_download=True
        )
        self.batch_size = batch_size
        self.normalize = normalize
        self.prefix = prefix
        self.dim = dim

    @classmethod
    def from_config(cls, cfg: Any, role: str = "passage") -> WordLlamaEmbedder:
        prefix = cfg.query_prefix if role == "query" else cfg.passage_prefix
        return cls(cfg.model, cfg.config_name, cfg.dim, cfg.batch_size, cfg.normalize, prefix)

    def fingerprint(self) -> dict[str, Any]:
        return {
            "model": model_fingerprint(self.model_ref),
            "tokenizer": {
                "ref": str(self.tokenizer_path.relative_to(self.cache_dir)),
                "tokenizer_json_sha256": file_sha256(self.tokenizer_path),
            },
            "runtime": f"wordllama=={importlib.metadata.version('wordllama')}",
        }

    def encode(
        self, texts: list[str], progress: bool = False, done: Callable[[int], None] | None = None
    ) -> np.ndarray:
        """One call over every text (static vectors are fast); `done(n)` once at the end."""
        if self.prefix:
            texts = [self.prefix + t for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = np.asarray(
            self.wl.embed(texts, norm=False, batch_size=self.batch_size), dtype=np.float32
        )
        if self.normalize:
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            vecs = vecs / np.where(norms > 0, norms, 1.0)
        if done is not None:
            done(len(texts))
        return np.ascontiguousarray(vecs, dtype=np.float32)
