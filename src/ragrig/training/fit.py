"""Fine-tuning sentence-transformers models on the CPU, deterministically: what the trained
verifier (train_verifier), the trained reranker (train_rerank) and the trained bi-encoder
(train_embed) share."""

from __future__ import annotations

import hashlib
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

_COMMON_ARGS = {
    "save_strategy": "no",
    "report_to": "none",
    "logging_steps": 25,
    "use_cpu": True,
    "dataloader_num_workers": 0,
    "disable_tqdm": True,
}


def step_bar(name: str, stream: Any = None) -> Any:
    """A transformers TrainerCallback drawing the training's steps on a ragrig.core.progress bar
    (rate and ETA from the first step; the loss as a note), in place of the trainer's own."""
    from transformers import TrainerCallback

    from ragrig.core.progress import Bar

    class StepBar(TrainerCallback):
        bar: Bar | None = None

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.bar = Bar(f"{name} training", state.max_steps or None, "steps", stream)

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if self.bar is not None:
                self.bar.update(1)

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if self.bar is not None and logs and "loss" in logs:
                self.bar.note(f"loss {logs['loss']:.4f}")

        def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if self.bar is not None:
                self.bar.close()

    return StepBar()


def _fit(
    trainer_cls: Any,
    args_cls: Any,
    model: Any,
    dataset: Any,
    loss: Any,
    cfg: Any,
    out_dir: Path,
    model_dir: str,
    name: str,
    **extra: Any,
) -> tuple[Any, float]:
    with tempfile.TemporaryDirectory(prefix=f"{name}.") as tmp:
        args = args_cls(
            output_dir=tmp,
            num_train_epochs=cfg.epochs,
            per_device_train_batch_size=cfg.batch_size,
            learning_rate=cfg.learning_rate,
            warmup_ratio=cfg.warmup_ratio,
            seed=cfg.seed,
            data_seed=cfg.seed,
            **_COMMON_ARGS,
            **extra,
        )
        trainer = trainer_cls(
            model=model,
            args=args,
            train_dataset=dataset,
            loss=loss,
            callbacks=[step_bar(name)],
        )
        t0 = time.perf_counter()
        result = trainer.train()
        seconds = time.perf_counter() - t0
    model.save_pretrained(str(Path(out_dir) / model_dir), create_model_card=False)
    return result, seconds


def fit_cross_encoder(
    model: Any, dataset: Any, loss: Any, cfg: Any, out_dir: Path, model_dir: str, name: str
) -> tuple[Any, float]:
    """Train `model` on `dataset` with `loss` for `cfg` (epochs, batch_size, learning_rate,
    warmup_ratio, seed), save it to out_dir/model_dir; return (the trainer's result, seconds).
    No checkpoint, no report, no worker process: the same seed gives the same weights."""
    from sentence_transformers.cross_encoder import (
        CrossEncoderTrainer,
        CrossEncoderTrainingArguments,
    )

    return _fit(
        CrossEncoderTrainer,
        CrossEncoderTrainingArguments,
        model,
        dataset,
        loss,
        cfg,
        out_dir,
        model_dir,
        name,
    )


def fit_sentence_transformer(
    model: Any, dataset: Any, loss: Any, cfg: Any, out_dir: Path, model_dir: str, name: str
) -> tuple[Any, float]:
    """As `fit_cross_encoder`, for a bi-encoder (SentenceTransformer). Batches hold no text
    twice (sentence-transformers' NO_DUPLICATES sampler), so an in-batch negative is never
    another copy of the example's own query or positive."""
    from sentence_transformers import (
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.training_args import BatchSamplers

    return _fit(
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
        model,
        dataset,
        loss,
        cfg,
        out_dir,
        model_dir,
        name,
        batch_sampler=BatchSamplers.NO_DUPLICATES,
    )


def quiet_training_logs() -> None:
    for name in ("transformers", "sentence_transformers", "datasets", "accelerate"):
        logging.getLogger(name).setLevel(logging.ERROR)


def weights_sha256(model_dir: Path) -> str:
    """sha256 over the model folder's weight files (sorted by name)."""
    files = sorted(Path(model_dir).glob("*.safetensors")) or sorted(Path(model_dir).glob("*.bin"))
    if not files:
        raise FileNotFoundError(f"{model_dir}: no *.safetensors or *.bin weights")
    h = hashlib.sha256()
    for f in files:
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
    return h.hexdigest()
