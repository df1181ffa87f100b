"""What every embedder shares: the protocol, the prefix, the backend registry, windowed encoding."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

EMBEDDERS = {
    "sentence_transformers": "ragrig.embed.st:SentenceTransformerEmbedder",
    "onnx": "ragrig.embed.onnx:OnnxEmbedder",
    "wordllama": "ragrig.embed.static:WordLlamaEmbedder",
}


class Prefixed:
    """What every embedder shares: a text prefix, and `with_prefix` giving the same loaded model
    with another one (queries vs passages)."""

    prefix: str

    def with_prefix(self, prefix: str) -> Any:
        clone = copy.copy(self)
        clone.prefix = prefix
        return clone


def make_embedder(cfg: Any, role: str = "passage") -> Embedder:
    from ragrig.core.registry import resolve

    return resolve(EMBEDDERS, cfg.method, "embedder").from_config(cfg, role=role)


class Embedder(Protocol):
    def encode(
        self, texts: list[str], progress: bool = False, done: Callable[[int], None] | None = None
    ) -> np.ndarray:
        """Return a float32 array (len(texts), dim); `done(n)` after each n texts encoded."""
        ...

    def with_prefix(self, prefix: str) -> Embedder:
        """The same loaded model with another text prefix (queries vs passages)."""
        ...

    def fingerprint(self) -> dict[str, Any]:
        """What was loaded: {"model": package version and weights sha256, ...}."""
        ...


def encode_windows(
    embedder: Embedder,
    texts: list[str],
    window: int,
    done: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Encode `texts` in calls of `window` consecutive texts (0: one call over all of them).

    An embedder sorts and batches the texts of one call by length, so the window fixes the
    batches, hence the vectors to the last bit; the Ray executor encodes the same windows."""
    if window <= 0 or len(texts) <= window:
        return embedder.encode(texts, done=done)
    parts = [
        embedder.encode(texts[i : i + window], done=done) for i in range(0, len(texts), window)
    ]
    return np.concatenate(parts).astype(np.float32, copy=False)
