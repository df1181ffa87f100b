"""A sentence-transformers CrossEncoder reranker (`rerank=cross_encoder`: a local folder or a hub
id) and the cross-encoder the train_rerank stage fine-tunes (`rerank=trained`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ragrig.rerank.base import Candidate
from ragrig.rerank.config import TRAINED_OUTPUT


def cached_hub_models() -> list[str]:
    """Model repositories in the local Hugging Face cache (what an offline run can load by id)."""
    try:
        from huggingface_hub import scan_cache_dir

        return sorted(r.repo_id for r in scan_cache_dir().repos if r.repo_type == "model")
    except Exception:  # no cache folder yet, or an unreadable one: nothing cached
        return []


def available_models(trained_folder: str = TRAINED_OUTPUT) -> str:
    """One line naming what a cross-encoder reranker can load here."""
    trained = Path(trained_folder) / "manifest.json"
    if trained.is_file():
        import json

        ok = json.loads(trained.read_text(encoding="utf-8")).get("trained", False)
        mine = f"rerank=trained ({trained_folder}, {'trained' if ok else 'not trained'})"
    else:
        mine = f"rerank=trained after the train_rerank stage ({trained_folder})"
    hub = cached_hub_models()
    return (
        f"available: {mine}; any local cross-encoder folder; cached hub models: "
        f"{', '.join(hub) if hub else 'none'}; or rerank=identity"
    )


class CrossEncoderReranker:
    """Scores (query, passage) pairs with a cross-encoder; ties keep the retrieval order."""

    def __init__(self, model: str, batch_size: int = 16, max_length: int = 256):
        from sentence_transformers import CrossEncoder

        from ragrig.core.errors import ConfigError
        from ragrig.weights.models import resolve_model

        try:
            path = resolve_model(model)
        except KeyError as exc:
            raise ConfigError(f"unknown cross-encoder {model!r}: {exc.args[0]}") from None
        try:
            self.model = CrossEncoder(path, device="cpu", max_length=max_length)
        except OSError as exc:
            offline = os.environ.get("HF_HUB_OFFLINE", "")
            raise ConfigError(
                f"unknown cross-encoder {model!r}: not a local model folder, and hub ids need "
                f"network access (HF_HUB_OFFLINE={offline!r}); {available_models()} "
                f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
            ) from exc
        self.ref = model
        self.batch_size = batch_size

    @classmethod
    def from_config(cls, cfg: Any) -> CrossEncoderReranker:
        return cls(cfg.model, cfg.batch_size, cfg.max_length)

    def rerank(self, query: str, candidates: list[Candidate]) -> list[Candidate]:
        if not candidates:
            return []
        scores = self.model.predict(
            [(query, c.text) for c in candidates],
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        rescored = [
            (float(s), i, Candidate(c.doc_id, c.chunk_id, c.text, float(s)))
            for i, (c, s) in enumerate(zip(candidates, scores, strict=True))
        ]
        rescored.sort(key=lambda t: (-t[0], t[1]))
        return [c for _, _, c in rescored]


class TrainedReranker(CrossEncoderReranker):
    """The cross-encoder of a train_rerank output folder (``manifest.json`` + ``model/``)."""

    def __init__(self, folder: str, batch_size: int = 32, max_length: int | None = None):
        import json

        from ragrig.core.errors import ConfigError

        manifest_path = Path(folder) / "manifest.json"
        if not manifest_path.is_file():
            raise ConfigError(
                f"rerank.model {folder!r} is not a train_rerank output (no manifest.json): run "
                f"the train_rerank stage with train_rerank.enabled=true; {available_models()}"
            )
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if not manifest.get("trained"):
            raise ConfigError(
                f"rerank=trained: {folder} holds no trained model ({manifest.get('reason')}); "
                "set train_rerank.enabled=true, or use rerank=identity / rerank=cross_encoder"
            )
        from ragrig.core.io import verify_tree

        verify_tree(Path(folder) / "model")  # the weights as train_rerank recorded them
        self.manifest = manifest
        length = max_length or int(manifest["config"]["max_length"])
        super().__init__(str(Path(folder) / "model"), batch_size, length)
        self.ref = folder

    @classmethod
    def from_config(cls, cfg: Any) -> TrainedReranker:
        return cls(cfg.model, cfg.batch_size, cfg.max_length)
