"""The embed stage's computation: chunk vectors on the configured executor, queries timed."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ragrig.embed.base import Embedder, encode_windows


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
    from ragrig.core.progress import track

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
