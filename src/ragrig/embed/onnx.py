"""ONNX transformer embedder (onnxruntime): tokenizer.json, mean pooling, L2 normalisation.

The packaged ONNX files hold the encoder only (no tokenizer, no pooling), so this does what
sentence-transformers' Transformer + Pooling(mean) + Normalize modules do:

* tokenise with the `tokenizers` library from a tokenizer.json ([CLS] ... [SEP]), truncated at
  `max_seq_length` tokens (special tokens included, as sentence-transformers counts them) and
  padded to the longest text of the batch;
* run the model; its token embeddings are the first output of rank 3 (batch, tokens, dim);
* mean over the tokens the attention mask keeps (padding excluded), then divide by the L2 norm.

Texts are batched in order of decreasing token count (ties by position), which keeps padding
small; vectors come back in input order. The same texts in the same order give byte-identical
vectors (fixed thread count, sequential execution). A text encoded alone and within a padded
batch agree to 1e-5 (other matrix shapes may round differently; tests/unit/test_embed.py).
onnxruntime's intra-op threads are `runtime.threads` (the stage exports it as OMP_NUM_THREADS).
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ragrig.core.io import file_sha256
from ragrig.embed.base import Prefixed
from ragrig.weights.models import model_fingerprint, resolve_model
from ragrig.weights.onnx_runtime import padded, session_options


def tokenizer_file(ref: str) -> Path:
    """tokenizer.json of a packaged model, a folder, or the file itself."""
    path = Path(resolve_model(ref))
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(f"tokenizer {ref!r}: no tokenizer.json at {path}")
    return path


def mean_pool(tokens: np.ndarray, mask: np.ndarray, normalize: bool) -> np.ndarray:
    """Mean of the token embeddings the mask keeps; L2-normalised if asked (a zero vector stays
    zero: it has no direction)."""
    m = mask.astype(np.float32)[..., None]
    summed = (tokens.astype(np.float32) * m).sum(axis=1)
    pooled = summed / np.maximum(m.sum(axis=1), 1.0)
    if normalize:
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        pooled = pooled / np.where(norms > 0, norms, 1.0)
    return pooled.astype(np.float32)


def _threads() -> int:
    """runtime.threads, which the stage exports as OMP_NUM_THREADS (0: onnxruntime's default)."""
    try:
        return max(int(os.environ.get("OMP_NUM_THREADS", "0")), 0)
    except ValueError:
        return 0


class OnnxEmbedder(Prefixed):
    def __init__(
        self,
        model: str,
        tokenizer: str = "packaged:all-MiniLM-L6-v2",
        batch_size: int = 32,
        max_seq_length: int = 256,
        normalize: bool = True,
        prefix: str = "",
    ):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.model_ref, self.tokenizer_ref = model, tokenizer
        path = Path(resolve_model(model))
        if not path.is_file():
            raise FileNotFoundError(f"onnx model {model!r}: no file at {path}")
        self.tokenizer_path = tokenizer_file(tokenizer)
        tok = Tokenizer.from_file(str(self.tokenizer_path))
        tok.enable_truncation(max_length=max_seq_length)
        tok.no_padding()  # tokenizer.json may pad to a fixed length; batches are padded here
        pad_id = tok.token_to_id("[PAD]")
        self.pad_id = 0 if pad_id is None else pad_id
        self.tokenizer = tok

        self.session = ort.InferenceSession(
            str(path), sess_options=session_options(_threads()), providers=["CPUExecutionProvider"]
        )
        self.input_names = {i.name for i in self.session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - self.input_names
        if missing:
            raise ValueError(f"onnx model {model!r} lacks inputs {sorted(missing)}")
        rank3 = [o.name for o in self.session.get_outputs() if len(o.shape) == 3]
        if not rank3:
            raise ValueError(f"onnx model {model!r} has no (batch, tokens, dim) output")
        self.output = rank3[0]
        (out_meta,) = [o for o in self.session.get_outputs() if o.name == self.output]
        self.dim = out_meta.shape[-1] if isinstance(out_meta.shape[-1], int) else None
        if self.dim is None:
            raise ValueError(f"onnx model {model!r}: output {self.output!r} has no fixed width")
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.normalize = normalize
        self.prefix = prefix

    @classmethod
    def from_config(cls, cfg: Any, role: str = "passage") -> OnnxEmbedder:
        prefix = cfg.query_prefix if role == "query" else cfg.passage_prefix
        return cls(
            cfg.model, cfg.tokenizer, cfg.batch_size, cfg.max_seq_length, cfg.normalize, prefix
        )

    def fingerprint(self) -> dict[str, Any]:
        return {
            "model": model_fingerprint(self.model_ref),
            "tokenizer": {
                "ref": self.tokenizer_ref,
                "tokenizer_json_sha256": file_sha256(self.tokenizer_path),
            },
            "runtime": f"onnxruntime=={importlib.metadata.version('onnxruntime')}",
            "max_seq_length": self.max_seq_length,
        }

    def _run(self, encodings: list) -> np.ndarray:
        """One batch: pad to its longest text, run, pool."""
        feed = padded(encodings, self.pad_id)
        if "token_type_ids" not in self.input_names:
            del feed["token_type_ids"]
        (tokens,) = self.session.run([self.output], feed)
        return mean_pool(tokens, feed["attention_mask"], self.normalize)

    def encode(
        self, texts: list[str], progress: bool = False, done: Callable[[int], None] | None = None
    ) -> np.ndarray:
        """`done(n)` after each batch of n texts (a whole-stage bar); else `progress` shows a
        batch bar of its own."""
        from tqdm import tqdm

        if self.prefix:
            texts = [self.prefix + t for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: (-len(encodings[i].ids), i))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in tqdm(
            range(0, len(order), self.batch_size),
            desc="embed",
            disable=not progress or done is not None,
        ):
            pick = order[start : start + self.batch_size]
            out[pick] = self._run([encodings[i] for i in pick])
            if done is not None:
                done(len(pick))
        return out
