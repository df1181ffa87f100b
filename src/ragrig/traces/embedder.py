"""A sentence-transformers model of the common shape (Transformer, mean Pooling, Normalize) run
with transformers alone, for processes that embed but must stay small (`ragrig traces`):
importing sentence-transformers brings scikit-learn, SciPy and datasets, about 300 MB of
resident memory before a weight is loaded.

It does what those three modules do: tokenise (truncated at `max_seq_length`, padded to the
longest text of a batch), run the encoder, average the token embeddings the attention mask keeps,
divide by the L2 norm; bf16 under the same CPU autocast as the full embedder. Texts are batched longest first, as sentence-transformers orders them,
and vectors come back in input order; they agree with sentence-transformers' to 1e-5
(tests/unit/test_embed.py). `light_embedder` returns None for any other shape or method, a
precision other than fp32 and bf16 (int8 quantises the full model's layers), or a model that is
not packaged, and the caller loads the full embedder. With `runtime="onnx"` (conf/traces.yaml's
`runtime`) the same model runs as an fp32 ONNX graph through onnxruntime, with no torch at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ragrig.embed.base import Prefixed

_SHAPE = [
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
]


def _mean_pooled(folder: Path) -> bool:
    """The folder holds Transformer + mean Pooling (+ Normalize) and nothing else."""
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        kinds = [m["type"] for m in modules]
        pooling = next(m for m in modules if m["type"].endswith(".Pooling"))
        pool = json.loads((folder / pooling["path"] / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, StopIteration, TypeError):
        return False
    modes = {k for k, v in pool.items() if k.startswith("pooling_mode") and v}
    return kinds in (_SHAPE, _SHAPE[:2]) and modes == {"pooling_mode_mean_tokens"}


class MeanPoolEmbedder(Prefixed):
    def __init__(self, folder: Path, max_seq_length: int, batch_size: int, normalize: bool,
                 prefix: str = "", precision: str = "fp32"):  # fmt: skip
        from transformers import AutoModel, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self.model = AutoModel.from_pretrained(str(folder)).eval()
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self.normalize = normalize
        self.prefix = prefix
        self.precision = precision

    def encode(
        self, texts: list[str], progress: bool = False, done: Callable[[int], None] | None = None
    ) -> np.ndarray:
        import torch

        from ragrig.embed.onnx import mean_pool
        from ragrig.weights.precision import autocast

        # sentence-transformers strips each text after the prefix is added
        texts = [(self.prefix + t).strip() for t in texts]
        order = np.argsort([-len(t) for t in texts])
        out = np.zeros((len(texts), self.model.config.hidden_size), dtype=np.float32)
        with torch.inference_mode(), autocast(self.precision):
            for start in range(0, len(texts), self.batch_size):
                idx = order[start : start + self.batch_size]
                enc = self.tokenizer(
                    [texts[i] for i in idx],
                    padding=True,
                    truncation="longest_first",
                    max_length=self.max_seq_length,
                    return_tensors="pt",
                )
                tokens = self.model(**enc).last_hidden_state.float().numpy()
                out[idx] = mean_pool(tokens, enc["attention_mask"].numpy(), self.normalize)
                if done is not None:
                    done(len(idx))
        return out


def light_embedder(cfg: Any, role: str = "passage", runtime: str = "torch") -> Any:
    """The embed section's model without sentence-transformers, when it can be (module doc);
    `runtime="onnx"`: its fp32 graph through onnxruntime (ragrig.weights.onnx_export; no torch,
    the same vectors as fp32 to ~1e-6), whatever precision the section names."""
    from ragrig.weights.models import resolve_model
    from ragrig.weights.precision import resolve_precision

    if cfg.method != "sentence_transformers":
        return None
    precision = resolve_precision(cfg.precision)
    if (
        precision not in ("fp32", "bf16")
        or not str(cfg.model).startswith("packaged:")  # a trained folder: verified by the full one
    ):
        return None
    try:
        folder = Path(resolve_model(cfg.model))
    except Exception:  # not resolvable here: the full embedder says why
        return None
    if not folder.is_dir() or not _mean_pooled(folder):
        return None
    length = cfg.max_seq_length
    if length is None:
        try:
            st = json.loads((folder / "sentence_bert_config.json").read_text(encoding="utf-8"))
            length = int(st["max_seq_length"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
    prefix = cfg.query_prefix if role == "query" else cfg.passage_prefix
    if runtime == "onnx":
        from ragrig.embed.onnx import OnnxEmbedder
        from ragrig.weights.onnx_export import encoder_onnx

        graph, _ = encoder_onnx(folder)
        return OnnxEmbedder(str(graph), str(folder), cfg.batch_size, length, cfg.normalize, prefix)
    return MeanPoolEmbedder(folder, length, cfg.batch_size, cfg.normalize, prefix, precision)


def embed_section(params: Path, batch_size: int | None = None) -> Any:
    """The params' embed section, with `batch_size` texts per encoder call when given
    (conf/traces.yaml `embed_batch_size`; the vectors do not depend on it)."""
    from ragrig.core.config import load_section

    cfg = load_section("embed", params)
    return cfg if batch_size is None else cfg.model_copy(update={"batch_size": batch_size})


def section_embedder(cfg: Any, role: str, runtime: str = "torch") -> Any:
    """The section's model without sentence-transformers' imports where it can be (~300 MB,
    `light_embedder`), else the full embedder."""
    from ragrig.embed import make_embedder

    return light_embedder(cfg, role, runtime) or make_embedder(cfg, role=role)
