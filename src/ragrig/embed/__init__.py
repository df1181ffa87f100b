"""embed: encode chunks and queries into normalised dense vectors."""

from __future__ import annotations

import time
from typing import Any, Protocol

import numpy as np

EMBEDDERS = {
    "sentence_transformers": "ragrig.embed.st:SentenceTransformerEmbedder",
    "onnx": "ragrig.embed.onnx:OnnxEmbedder",
    "wordllama": "ragrig.embed.static:WordLlamaEmbedder",
}


def make_embedder(cfg: Any, role: str = "passage") -> Embedder:
    from ragrig.registry import resolve

    return resolve(EMBEDDERS, cfg.method, "embedder").from_config(cfg, role=role)


class Embedder(Protocol):
    def encode(self, texts: list[str], progress: bool = False) -> np.ndarray:
        """Return a float32 array (len(texts), dim)."""
        ...

    def with_prefix(self, prefix: str) -> Embedder:
        """The same loaded model with another text prefix (queries vs passages)."""
        ...

    def fingerprint(self) -> dict[str, Any]:
        """What was loaded: {"model": package version and weights sha256, ...}."""
        ...


def encode_queries_timed(
    embedder: Embedder, texts: list[str], progress: bool = True
) -> tuple[np.ndarray, list[float]]:
    """Encode queries one at a time, as a live system would, recording per-query latency (ms)."""
    from tqdm import tqdm

    vectors, latencies = [], []
    for text in tqdm(texts, desc="embed queries", disable=not progress):
        t0 = time.perf_counter()
        vectors.append(embedder.encode([text])[0])
        latencies.append((time.perf_counter() - t0) * 1000.0)
    dim = vectors[0].shape[0] if vectors else 0
    return np.asarray(vectors, dtype=np.float32).reshape(len(texts), dim), latencies
