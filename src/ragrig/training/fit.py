"""The training stages' runs of `ragrig.training.loop`, checkpointed beside their output."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragrig.training import loop

# the stages' optimiser keeps the weight decay they were first tuned with (transformers'
# Trainer default, 0); the loop's own default (0.01) is the shipped verifier's
WEIGHT_DECAY = 0.0
# the expected-time probe runs its batches twice before training: at most this many, and no
# more than a twentieth of the run's steps, so it adds at most ~10% to a run (a run of fewer
# than 20 steps has none: its bar's ETA comes after the first step)
PROBE_BATCHES = 6


_NOT_IN_RUN = ("stop_after", "checkpoint_every_s", "probe_batches")


class TrainingStopped(Exception):
    """A run stopped after `stop_after` steps (a test's stand-in for a kill): the checkpoint is
    kept, the stage's output is not written, the same call resumes."""

    def __init__(self, step: int, steps: int) -> None:
        super().__init__(f"stopped at step {step:,} of {steps:,}: run it again to resume")
        self.step = step
        self.steps = steps


def settings(
    cfg: Any,
    n: int,
    *,
    bucket_batches: int = 50,
    stop_after: int | None = None,
) -> loop.LoopSettings:
    """The loop's settings for a stage's config section (epochs, batch_size, learning_rate,
    warmup_ratio, seed) and `n` training items; fp32 on the CPU, as the stages always trained."""
    s = loop.LoopSettings(
        epochs=cfg.epochs,
        batch_size=cfg.batch_size,
        learning_rate=cfg.learning_rate,
        warmup_ratio=cfg.warmup_ratio,
        weight_decay=WEIGHT_DECAY,
        seed=cfg.seed,
        precision="fp32",
        device="cpu",
        bucket_batches=bucket_batches,
        stop_after=stop_after,
    )
    s.probe_batches = min(PROBE_BATCHES, loop.total_steps(n, s)[1] // 20)
    return s


def fingerprint(stage: str, cfg: Any, items: list[dict[str, Any]], s: loop.LoopSettings) -> str:
    """What decides a stage's run: its config, its training items (texts included) and the
    loop's settings, less those that do not change the weights (a stopped run and its resume
    are one run, whenever either checkpoints)."""
    h = hashlib.sha256()
    head = {
        "stage": stage,
        "cfg": cfg.model_dump(mode="json"),
        "settings": {k: v for k, v in vars(s).items() if k not in _NOT_IN_RUN},
    }
    h.update(json.dumps(head, sort_keys=True).encode())
    for item in items:
        h.update(json.dumps(item, sort_keys=True, ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()


def checkpoint_dir(work: Path, fp: str) -> Path:
    """Where the run of fingerprint `fp` keeps its checkpoint: a hidden sibling of the stage's
    output folder, `.<name>.checkpoint-<fp>`. Not the output itself: DVC deletes a stage's
    outputs before it reruns one, and the output is written as a temporary folder that a
    restart removes."""
    work = Path(work)
    return work.parent / f".{work.name}.checkpoint-{fp[:16]}"


def discard_checkpoints(work: Path, keep: Path | None = None) -> None:
    """Remove the checkpoints beside `work` (all but `keep`): after a successful end, or those
    of other settings when a run starts (a checkpoint weighs about three models)."""
    work = Path(work)
    for path in work.parent.glob(f".{work.name}.checkpoint-*"):
        if keep is None or path != keep:
            shutil.rmtree(path, ignore_errors=True)


def fit(
    model: Any,
    lengths: Sequence[int],
    make_batch: Callable[[list[int]], Any],
    loss_fn: Callable[[Any, Any], Any],
    s: loop.LoopSettings,
    work: Path,
    fp: str,
    name: str,
) -> dict[str, Any]:
    """Train `model` in place with `ragrig.training.loop`, resuming the checkpoint beside `work`
    when a killed run of the same fingerprint left one; returns the loop's figures. Raises
    `TrainingStopped` after `s.stop_after` steps. The checkpoint stays until the stage's output
    is in place (`discard_checkpoints`): a kill after the last step resumes at the end."""
    folder = checkpoint_dir(work, fp)
    discard_checkpoints(work, keep=folder)
    figures = loop.run(model, lengths, make_batch, loss_fn, s, folder, fp, name)
    if "stopped_at" in figures:
        raise TrainingStopped(figures["stopped_at"], figures["steps"])
    return figures


def pair_batches(
    model: Any, firsts: list[str], seconds: list[str], max_length: int
) -> tuple[list[int], Callable[[list[int]], Any]]:
    """A cross-encoder's (lengths, make_batch) for text pairs: each pair's token count (for the
    loop's length buckets) and the batch the model's own preprocessing makes of the pairs at
    `indices` (the same truncation as at inference)."""
    enc = model.tokenizer(
        firsts, seconds, truncation=True, max_length=max_length, return_attention_mask=False
    )
    lengths = [len(ids) for ids in enc["input_ids"]]

    def make_batch(indices: list[int]) -> Any:
        return model.preprocess([(firsts[i], seconds[i]) for i in indices])

    return lengths, make_batch


def quiet_training_logs() -> None:
    for name in ("transformers", "sentence_transformers"):
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


def fit_cross_encoder(
    stage: str,
    model: Any,
    firsts: list[str],
    seconds: list[str],
    targets: Any,
    loss_fn: Callable[[Any, Any], Any],
    cfg: Any,
    records: list[dict[str, Any]],
    out_dir: Path,
    work: Path | None = None,
    stop_after: int | None = None,
) -> dict[str, Any]:
    """Train a cross-encoder on text pairs with their `targets` (what the reranker and the
    verifier share): length-bucketed batches of the model's own preprocessing, `loss_fn(model,
    (features, targets))`, the run fingerprinted by `records`, the checkpoint beside `work`
    (default `out_dir`); the model saved to `out_dir/model`. Returns the loop's figures."""
    lengths, inputs = pair_batches(model, firsts, seconds, cfg.max_length)

    def make_batch(idx: list[int]) -> tuple[Any, Any]:
        return inputs(idx), targets[idx]

    s = settings(cfg, len(firsts), stop_after=stop_after)
    fp = fingerprint(stage, cfg, records, s)
    figures = fit(model, lengths, make_batch, loss_fn, s, work or out_dir, fp, f"{stage} training")
    model.save_pretrained(str(Path(out_dir) / "model"), create_model_card=False)
    return figures
