"""sentence-transformers embedder, loading packaged weights, a local folder or a hub id."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ragrig.core.io import verify_tree
from ragrig.embed.base import Prefixed
from ragrig.weights.models import model_fingerprint, resolve_model
from ragrig.weights.precision import autocast, quantize_linear_int8, resolve_precision

PRECISIONS = ("fp32", "bf16", "int8")


class SentenceTransformerEmbedder(Prefixed):
    def __init__(
        self,
        model: str,
        batch_size: int = 32,
        max_seq_length: int | None = None,
        normalize: bool = True,
        prefix: str = "",
        precision: str = "fp32",
    ):
        from sentence_transformers import SentenceTransformer

        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r}: one of {', '.join(PRECISIONS)}")
        self.model_ref = model
        refuse_untrained_folder(model)
        if Path(model).is_dir():  # a train_embed output: its files as the stage recorded them
            verify_tree(Path(model))
        self.model = SentenceTransformer(resolve_model(model), device="cpu")
        if max_seq_length is not None:
            self.model.max_seq_length = max_seq_length
        if precision == "int8":
            quantize_linear_int8(self.model)
        self.precision = precision
        self.batch_size = batch_size
        self.normalize = normalize
        self.prefix = prefix

    @classmethod
    def from_config(cls, cfg: Any, role: str = "passage") -> SentenceTransformerEmbedder:
        prefix = cfg.query_prefix if role == "query" else cfg.passage_prefix
        return cls(
            cfg.model,
            cfg.batch_size,
            cfg.max_seq_length,
            cfg.normalize,
            prefix,
            resolve_precision(cfg.precision),
        )

    def fingerprint(self) -> dict[str, Any]:
        return {
            "model": model_fingerprint(self.model_ref),
            "runtime": "sentence-transformers=="
            + importlib.metadata.version("sentence-transformers"),
            "max_seq_length": self.model.max_seq_length,
            # vectors of another precision differ in their last bits: never reused for this one
            "precision": self.precision,
        }

    def encode(
        self, texts: list[str], progress: bool = False, done: Callable[[int], None] | None = None
    ) -> np.ndarray:
        """`done(n)` after each batch of n texts (a whole-stage bar); else `progress` shows
        sentence-transformers' own batch bar."""
        if self.prefix:
            texts = [self.prefix + t for t in texts]
        with _batches_reported(len(texts), self.batch_size, done), autocast(self.precision):
            vecs = self.model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=self.normalize,
                convert_to_numpy=True,
                show_progress_bar=progress and done is None,
            )
        return np.ascontiguousarray(vecs, dtype=np.float32)


def refuse_untrained_folder(model: str) -> None:
    """A train_embed output's model folder (`<out>/model`) that the stage did not write (it was
    off) is refused in one line with the manifest's reason, not looked up on a model hub."""
    from ragrig.core.errors import ConfigError

    path = Path(model)
    manifest = path.parent / "manifest.json"
    if path.exists() or not manifest.is_file():
        return
    reason = json.loads(manifest.read_text(encoding="utf-8")).get("reason")
    raise ConfigError(
        f"embed.model {model!r}: {path.parent} holds no trained model ({reason}); set "
        "train_embed.enabled=true, or use embed=minilm"
    )


@contextlib.contextmanager
def _batches_reported(
    n: int, batch_size: int, done: Callable[[int], None] | None
) -> Iterator[None]:
    """Call `done(k)` as sentence-transformers finishes each batch of k texts.

    One `encode` call over every text keeps its global length-sorted batching, hence the
    vectors, byte-identical; splitting the call to count batches would change the batches.
    So the batch loop's range (`trange` in sentence_transformers.sentence_transformer.model,
    sentence-transformers 5.x-6.x) is wrapped for the call. Where that name is absent (another
    version), the texts are reported all at once when the call returns.
    """
    if done is None:
        yield
        return
    try:
        from sentence_transformers.sentence_transformer import model as st_model
    except ImportError:
        st_model = None
    original = getattr(st_model, "trange", None)
    if original is None:
        yield
        done(n)
        return
    reported = 0

    def counted(*args: Any, **kwargs: Any) -> Iterator[int]:
        nonlocal reported
        for start in original(*args, **{**kwargs, "disable": True}):
            yield start
            k = min(batch_size, n - start)
            reported += k
            done(k)

    st_model.trange = counted
    try:
        yield
    finally:
        st_model.trange = original
    if reported < n:  # e.g. a batch loop that did not go through the wrapped range
        done(n - reported)
