"""embed: encode chunks and queries into normalised dense vectors."""

from __future__ import annotations

import copy
import time
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
    from ragrig.registry import resolve

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


def encode_chunks(
    cfg: Any,
    embedder: Embedder,
    table: Any,
    texts: Callable[[], list[str]],
    done: Callable[[int], None] | None = None,
) -> np.ndarray:
    """The chunk vectors, on the configured executor (`embed.executor.kind`)."""
    if cfg.executor.kind == "ray":
        from ragrig.embed.ray_data import encode_over_ray

        return encode_over_ray(cfg, table, done=done)
    return encode_windows(embedder, texts(), cfg.window, done=done)


def encode_queries_timed(
    embedder: Embedder,
    texts: list[str],
    progress: bool = True,
    done: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, list[float]]:
    """Encode queries one at a time, as a live system would, recording per-query latency (ms).

    `done(1)` after each query (a whole-stage bar); without it, `progress` gives a bar of its own.
    """
    from ragrig.progress import track

    vectors, latencies = [], []
    own = progress and done is None
    for text in track(texts, "embed queries", "queries") if own else texts:
        t0 = time.perf_counter()
        vectors.append(embedder.encode([text])[0])
        latencies.append((time.perf_counter() - t0) * 1000.0)
        if done is not None:
            done(1)
    dim = vectors[0].shape[0] if vectors else 0
    return np.asarray(vectors, dtype=np.float32).reshape(len(texts), dim), latencies
