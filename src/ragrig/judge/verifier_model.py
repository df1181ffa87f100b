"""Load a trained verifier and score (claim, evidence) pairs: P(SUPPORT) per pair, batched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragrig.core.errors import ConfigError
from ragrig.weights.precision import autocast, quantize_linear_int8

# The verifier's labels, in the order of its classifier head.
LABELS = ("SUPPORT", "CONTRADICT", "NOT_ADDRESSED")
SUPPORT, CONTRADICT, NOT_ADDRESSED = LABELS
# A training label only: "not SUPPORT", from a source that does not say which of the other two
# (ragrig.train_verifier.sources); the loss reads it as P(CONTRADICT) + P(NOT_ADDRESSED).
NOT_SUPPORTED = "NOT_SUPPORTED"

MODEL_DIR = "model"
MANIFEST = "manifest.json"


def locate(path: str | Path) -> Path:
    """The model folder of a train_verifier output (or a model folder itself); a clear error
    naming the path when it holds no trained model."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(
            f"verifier model {path} does not exist: run the train_verifier stage "
            "(dvc repro train_verifier) or set judge.model to a trained model folder"
        )
    manifest = path / MANIFEST
    if manifest.exists():
        info = json.loads(manifest.read_text(encoding="utf-8"))
        if not info.get("trained", True):
            raise ConfigError(
                f"verifier {path} holds no model: {info.get('reason', 'not trained')}"
            )
        path = path / MODEL_DIR
    elif not (path / "config.json").exists() and (path / MODEL_DIR / "config.json").exists():
        path = path / MODEL_DIR
    if not (path / "config.json").exists():
        raise ConfigError(
            f"verifier model {path} has no config.json: not a trained cross-encoder folder"
        )
    return path


QUANTIZE = ("none", "bf16", "int8")


class Verifier:
    """A 3-label cross-encoder; `support(pairs)` -> P(SUPPORT) of each pair.

    Pairs are scored once each (duplicates share one score) in batches of similar length (sorted
    by characters, ties by input order), so that little of a batch is padding. `quantize="int8"`
    replaces the Linear layers by dynamically quantized int8 ones (torch.ao, fbgemm);
    `quantize="bf16"` runs the matrix products in bfloat16 under torch's CPU autocast (the
    embedder's bf16). Both are faster on CPU, with scores close to but not identical with fp32
    (docs/benchmarks.md §5)."""

    def __init__(
        self,
        path: str | Path,
        max_length: int = 128,
        batch_size: int = 32,
        threads: int = 2,
        quantize: str = "none",
    ):
        import torch
        from sentence_transformers.cross_encoder import CrossEncoder

        torch.set_num_threads(threads)
        self.path = locate(path)
        try:
            self.model = CrossEncoder(str(self.path), max_length=max_length, device="cpu")
        except Exception as exc:  # a folder that is no loadable model: one clear line
            raise ConfigError(
                f"verifier model {self.path} cannot be loaded: {type(exc).__name__}: {exc}"
            ) from exc
        id2label = {int(k): v for k, v in self.model.config.id2label.items()}
        labels = {v: k for k, v in id2label.items()}
        if SUPPORT not in labels:
            raise ConfigError(
                f"verifier model {self.path} has labels {sorted(labels)}; needs {SUPPORT!r}"
            )
        self.support_index = labels[SUPPORT]
        self.batch_size = batch_size
        if quantize not in QUANTIZE:
            raise ConfigError(f"verifier quantize {quantize!r}: choose one of {list(QUANTIZE)}")
        self.quantize = quantize
        if quantize == "int8":
            quantize_linear_int8(self.model)

    def probabilities(self, pairs: list[tuple[str, str]]) -> Any:
        """(n, labels) softmax probabilities; an empty list gives an empty array."""
        import numpy as np

        if not pairs:
            return np.zeros((0, len(self.model.config.id2label)), dtype=np.float32)
        first: dict[tuple[str, str], int] = {}
        for pair in pairs:
            first.setdefault(tuple(pair), len(first))
        unique = list(first)
        order = sorted(range(len(unique)), key=lambda i: (len(unique[i][0]) + len(unique[i][1]), i))
        with autocast(self.quantize):
            scored = self.model.predict(
                [unique[i] for i in order],
                batch_size=self.batch_size,
                apply_softmax=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        probs = np.empty_like(scored)
        probs[order] = scored
        return probs[[first[tuple(pair)] for pair in pairs]]

    def support(self, pairs: list[tuple[str, str]]) -> list[float]:
        probs = self.probabilities(pairs)
        return [float(p) for p in probs[:, self.support_index]] if len(pairs) else []
