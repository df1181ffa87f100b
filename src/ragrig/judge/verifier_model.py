"""Load a trained verifier and score (claim, evidence) pairs: P(SUPPORT) per pair, batched.

Two kinds of model load: the verifier that ships inside ragrig (`SHIPPED`, the default of
judge=verifier: `ragrig/weights/verifier/verifier.safetensors`, trained by `ragrig train-verifier`
on the public claim-verification sets; every weight but the word embeddings, which come from the
packaged all-MiniLM-L6-v2 they were frozen at), checked against the sha256 recorded here before
anything is judged; or a folder (a train_verifier stage output or any sequence-classification
cross-encoder with the three labels), for a team's own model or a hub model it has downloaded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragrig.core.errors import ConfigError
from ragrig.core.io import verify_tree
from ragrig.weights.precision import autocast, quantize_linear_int8

# The verifier's labels, in the order of its classifier head.
LABELS = ("SUPPORT", "CONTRADICT", "NOT_ADDRESSED")
SUPPORT, CONTRADICT, NOT_ADDRESSED = LABELS
# A training label only: "not SUPPORT", from a source that does not say which of the other two
# (ragrig.train_verifier.sources); the loss reads it as P(CONTRADICT) + P(NOT_ADDRESSED).
NOT_SUPPORTED = "NOT_SUPPORTED"

MODEL_DIR = "model"
MANIFEST = "manifest.json"
SHIPPED = "shipped"
SHIPPED_DIR = Path(__file__).resolve().parents[1] / "weights" / "verifier"
SHIPPED_WEIGHTS = "verifier.safetensors"
# The shipped weights' digest: a missing, truncated or swapped file is refused before judging.
# Replaced only with the file, when a retrained model beats it (docs/judge.md).
SHIPPED_SHA256 = "4b66875c6212ad3f156b8cbd37f9ccb158c8a5c6892c5e634940c7c025e77400"
SHIPPED_BASE = "packaged:all-MiniLM-L6-v2"
# the weights the shipped file leaves out: read from the packaged base model
SHIPPED_FROZEN = ("bert.embeddings.word_embeddings.weight",)


def shipped_path() -> Path:
    return SHIPPED_DIR / SHIPPED_WEIGHTS


def check_shipped(path: Path | None = None, sha256: str = SHIPPED_SHA256) -> Path:
    """The shipped weights file, after checking it exists and has the recorded sha256."""
    from ragrig.core.io import file_sha256

    path = shipped_path() if path is None else Path(path)
    if not path.is_file():
        raise ConfigError(
            f"shipped verifier weights {path} are missing: reinstall ragrig (pip install -e .) "
            "or set judge.model to a trained verifier folder"
        )
    digest = file_sha256(path)
    if digest != sha256:
        raise ConfigError(
            f"shipped verifier weights {path} have sha256 {digest[:12]}..., not the recorded "
            f"{sha256[:12]}...: the file is truncated or was replaced; restore it (git checkout) "
            "or retrain with `ragrig train-verifier`"
        )
    return path


def base_classifier(base_path: str) -> Any:
    """The 3-label sequence classifier (LABELS, fp32) on the encoder at `base_path`, its head
    newly initialised; transformers' load report and weight-loading bar kept quiet (the head is
    new by design). Training (ragrig.train_verifier.public) and the shipped loader build it so."""
    import torch
    from transformers import AutoModelForSequenceClassification
    from transformers import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    return AutoModelForSequenceClassification.from_pretrained(
        base_path,
        dtype=torch.float32,
        num_labels=len(LABELS),
        id2label=dict(enumerate(LABELS)),
        label2id={lab: i for i, lab in enumerate(LABELS)},
    )


class _ShippedCrossEncoder:
    """The shipped verifier behind the slice of CrossEncoder's interface that Verifier uses
    (`predict`, `config`): the base model's classifier with the shipped weights laid over it."""

    def __init__(self, path: Path, max_length: int, sha256: str = SHIPPED_SHA256):
        from safetensors import SafetensorError
        from safetensors.torch import load_file
        from transformers import AutoTokenizer

        from ragrig.weights.models import resolve_model

        path = check_shipped(path, sha256)
        base = resolve_model(SHIPPED_BASE)
        self.tokenizer = AutoTokenizer.from_pretrained(base)
        self.model = base_classifier(base)
        try:
            tensors = load_file(str(path))
        except (SafetensorError, OSError, ValueError) as exc:
            raise ConfigError(f"shipped verifier weights {path} cannot be read: {exc}") from None
        own = self.model.state_dict()
        wrong = [k for k, v in tensors.items() if k not in own or own[k].shape != v.shape]
        missing = [k for k in own if k not in tensors and k not in SHIPPED_FROZEN]
        if wrong or missing:
            raise ConfigError(
                f"shipped verifier weights {path} do not fit {SHIPPED_BASE}'s architecture "
                f"({len(wrong)} unexpected or misshapen, {len(missing)} missing, e.g. "
                f"{(wrong or missing)[0]})"
            )
        self.model.load_state_dict({k: v.float() for k, v in tensors.items()}, strict=False)
        self.model.eval()
        self.config = self.model.config
        self.max_length = max_length

    def predict(self, pairs: list[tuple[str, str]], batch_size: int = 32, **_: Any) -> Any:
        import numpy as np
        import torch

        out = []
        with torch.inference_mode():
            for s in range(0, len(pairs), batch_size):
                chunk = pairs[s : s + batch_size]
                enc = self.tokenizer(
                    [a for a, _ in chunk],
                    [b for _, b in chunk],
                    truncation=True,
                    max_length=self.max_length,
                    padding=True,
                    return_tensors="pt",
                )
                logits = self.model(**enc).logits
                out.append(torch.softmax(logits.float(), dim=-1).numpy())
        return np.concatenate(out) if out else np.zeros((0, len(LABELS)), dtype=np.float32)


class _OnnxCrossEncoder:
    """A cross-encoder through onnxruntime (`quantize: onnx` / `onnx_int8`), behind the same
    slice of CrossEncoder's interface: its fp32 graph exported once per machine from the torch
    weights (ragrig.weights.onnx_export), tokenised by the `tokenizers` library from the model's
    tokenizer.json (pairs truncated longest first, as transformers' tokenizer truncates them).
    No torch is imported once the file exists; scores agree with the torch fp32 path to ~1e-6
    (int8: close, not the same)."""

    def __init__(self, path: str | Path | None, max_length: int, threads: int, int8: bool):
        from tokenizers import Tokenizer

        from ragrig.weights import onnx_export, onnx_runtime
        from ragrig.weights.models import resolve_model

        if path is None or str(path) == SHIPPED:
            weights = check_shipped()
            self.path = weights
            folder = Path(resolve_model(SHIPPED_BASE))
            id2label = dict(enumerate(LABELS))
            name, digest = "verifier", SHIPPED_SHA256

            def load() -> Any:
                return _ShippedCrossEncoder(weights, max_length).model

        else:
            folder = locate(path)
            self.path = folder
            found = sorted(folder.glob("*.safetensors"))
            if not found:
                raise ConfigError(f"verifier model {folder} has no safetensors weights for ONNX")
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            id2label = {int(k): v for k, v in (config.get("id2label") or {}).items()}
            name, digest = f"cross-{folder.parent.name}-{folder.name}", _digest(found)

            def load() -> Any:
                from transformers import AutoModelForSequenceClassification

                return AutoModelForSequenceClassification.from_pretrained(str(folder))

        tokenizer_json = folder / "tokenizer.json"
        if not tokenizer_json.is_file():
            raise ConfigError(f"verifier model {folder} has no tokenizer.json for ONNX")

        file, made = onnx_export.cross_encoder_onnx(name, digest, load, folder, int8)
        self.session = onnx_runtime.load_session(file, threads)
        self.onnx_file, self.exported = file, made
        tok = Tokenizer.from_file(str(tokenizer_json))
        tok.no_padding()
        tok.enable_truncation(max_length=max_length, strategy="longest_first")
        self.tokenizer = tok
        pad = tok.token_to_id("[PAD]")
        self.pad_id = 0 if pad is None else pad
        self.config = type("Config", (), {"id2label": id2label})()
        self.max_length = max_length

    def predict(self, pairs: list[tuple[str, str]], batch_size: int = 32, **_: Any) -> Any:
        import numpy as np

        from ragrig.weights.onnx_runtime import padded

        out = []
        for s in range(0, len(pairs), batch_size):
            encs = self.tokenizer.encode_batch([(a, b) for a, b in pairs[s : s + batch_size]])
            feed = padded(encs, self.pad_id)
            logits = self.session.run(["logits"], feed)[0].astype(np.float64)
            z = np.exp(logits - logits.max(axis=1, keepdims=True))
            out.append((z / z.sum(axis=1, keepdims=True)).astype(np.float32))
        return np.concatenate(out) if out else np.zeros((0, len(LABELS)), dtype=np.float32)


def _digest(files: list[Path]) -> str:
    import hashlib

    from ragrig.core.io import file_sha256

    return hashlib.sha256("".join(file_sha256(f) for f in files).encode()).hexdigest()


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
        verify_tree(path)  # the weights as train_verifier recorded them
    elif not (path / "config.json").exists() and (path / MODEL_DIR / "config.json").exists():
        path = path / MODEL_DIR
    if not (path / "config.json").exists():
        raise ConfigError(
            f"verifier model {path} has no config.json: not a trained cross-encoder folder"
        )
    return path


QUANTIZE = ("none", "bf16", "int8", "onnx", "onnx_int8")


class Verifier:
    """A 3-label cross-encoder; `support(pairs)` -> P(SUPPORT) of each pair.

    Pairs are scored once each (duplicates share one score) in batches of similar length (sorted
    by characters, ties by input order), so that little of a batch is padding. `quantize="int8"`
    replaces the Linear layers by dynamically quantized int8 ones (torch.ao, fbgemm);
    `quantize="bf16"` runs the matrix products in bfloat16 under torch's CPU autocast (the
    embedder's bf16). Both are faster on CPU, with scores close to but not identical with fp32
    (docs/benchmarks.md §5). `quantize="onnx"` runs the same fp32 model through onnxruntime
    (the same scores to ~1e-6, no torch; faster than torch's fp32 on an AVX2-only CPU), and
    `onnx_int8` its int8 copy (docs/benchmarks.md §21)."""

    def __init__(
        self,
        path: str | Path | None = SHIPPED,
        max_length: int = 128,
        batch_size: int = 32,
        threads: int = 2,
        quantize: str = "none",
    ):
        if quantize not in QUANTIZE:
            raise ConfigError(f"verifier quantize {quantize!r}: choose one of {list(QUANTIZE)}")
        if quantize.startswith("onnx"):  # onnxruntime: no torch imported once exported
            self.model = _OnnxCrossEncoder(path, max_length, threads, quantize == "onnx_int8")
            self.path = self.model.path
        elif path is None or str(path) == SHIPPED:
            import torch

            torch.set_num_threads(threads)
            self.path = shipped_path()
            self.model = _ShippedCrossEncoder(self.path, max_length)
        else:
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
        self.quantize = quantize
        if quantize == "int8":
            quantize_linear_int8(
                self.model.model if isinstance(self.model, _ShippedCrossEncoder) else self.model
            )

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

    def readings(self, pairs: list[tuple[str, str]]) -> list[tuple[float, float]]:
        """(P(SUPPORT), P(CONTRADICT)) of each pair (read by label name); a model without a
        CONTRADICT label gives 0 for it."""
        probs = self.probabilities(pairs)
        labels = {v: int(k) for k, v in self.model.config.id2label.items()}
        c = labels.get(CONTRADICT)
        return [
            (float(p[self.support_index]), float(p[c]) if c is not None else 0.0) for p in probs
        ]

    def support(self, pairs: list[tuple[str, str]]) -> list[float]:
        probs = self.probabilities(pairs)
        return [float(p) for p in probs[:, self.support_index]] if len(pairs) else []
