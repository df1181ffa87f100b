"""One training loop for ragrig's models: length-bucketed batches, bf16 where the CPU (or GPU)
has native bf16 units, an expected time printed before the first step, a progress bar with loss
and ETA, checkpoints every few minutes and a resume after a kill that ends in the same weights as
an uninterrupted run.

The loop knows nothing of the model's task: the caller gives the number of examples, their
lengths (for bucketing), `make_batch(indices) -> inputs` and `loss(model, inputs) -> tensor`.
Everything that decides a step (the order of batches, the optimiser's and the learning-rate
schedule's state, torch's random state for dropout) is a function of the seed and the step, or is
saved in the checkpoint, so a run stopped after step k and resumed computes steps k+1.. exactly as
the uninterrupted run does (on one machine and device; tested in tests/unit/test_training_loop.py).

A checkpoint is written to a temporary file and renamed over the last one: a kill or a full
disk mid-write leaves the previous checkpoint whole (and the full disk is one line naming it).
It records a fingerprint of the run's settings and data; a checkpoint of another run is refused
with one line, not resumed."""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragrig.core.errors import ConfigError, RagrigError

CHECKPOINT = "checkpoint.pt"


class CheckpointError(RagrigError):
    """A checkpoint that cannot be written or does not belong to this run."""


@dataclass
class LoopSettings:
    epochs: float = 1.0
    batch_size: int = 32
    learning_rate: float = 5e-5
    warmup_ratio: float = 0.06
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    seed: int = 13
    # bf16: autocast to bfloat16 (native bf16 units); fp32: none
    precision: str = "fp32"
    checkpoint_every_s: float = 300.0
    # batches are formed from runs of bucket_batches * batch_size shuffled examples sorted by
    # length, so a batch holds examples of similar length (little padding)
    bucket_batches: int = 50
    device: str = "cpu"
    # batches of the first epoch the expected-time probe runs (twice) before training; 0: none
    probe_batches: int = 6
    # stop after this many steps in this process (a test's stand-in for a kill); None: run out
    stop_after: int | None = None


def epoch_batches(
    lengths: Sequence[int], batch_size: int, seed: int, epoch: int, bucket: int
) -> list[list[int]]:
    """The batches of one epoch: a seeded permutation, cut into runs of `bucket` batches, each
    run sorted by length (ties by position) and cut into batches, the batches shuffled."""
    import numpy as np

    rng = np.random.default_rng([seed, epoch])
    perm = rng.permutation(len(lengths)).tolist()
    run = max(1, bucket) * batch_size
    batches: list[list[int]] = []
    for start in range(0, len(perm), run):
        chunk = sorted(perm[start : start + run], key=lambda i: (lengths[i], i))
        batches += [chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size)]
    order = rng.permutation(len(batches)).tolist()
    return [batches[i] for i in order]


def total_steps(n: int, settings: LoopSettings) -> tuple[int, int]:
    """(steps per epoch, steps in all) for `n` examples."""
    per_epoch = math.ceil(n / settings.batch_size)
    return per_epoch, max(1, round(settings.epochs * per_epoch))


def _schedule(optimizer: Any, warmup: int, total: int) -> Any:
    import torch

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def autocast(settings: LoopSettings) -> Any:
    """bf16 autocast on the settings' device, or nothing for fp32."""
    import contextlib

    import torch

    if settings.precision == "bf16":
        return torch.autocast(settings.device.split(":")[0], dtype=torch.bfloat16)
    if settings.precision != "fp32":
        raise ConfigError(f"training precision {settings.precision!r}: choose bf16 or fp32")
    return contextlib.nullcontext()


def _rng_state(device: str) -> dict[str, Any]:
    import torch

    state = {"torch": torch.get_rng_state()}
    if device.startswith("cuda"):
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def _set_rng_state(state: dict[str, Any], device: str) -> None:
    import torch

    torch.set_rng_state(state["torch"])
    if device.startswith("cuda") and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"])


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """`state` written atomically to `path` (a temporary file renamed over it)."""
    import torch

    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(state, tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise CheckpointError(
            f"checkpoint {path} not written ({exc.strerror or exc}); the previous one is kept"
        ) from None


def load_checkpoint(path: Path, fingerprint: str) -> dict[str, Any] | None:
    import torch

    path = Path(path)
    if not path.exists():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # a truncated or foreign file: one line
        raise CheckpointError(
            f"checkpoint {path} cannot be read ({type(exc).__name__}); delete it to start over"
        ) from None
    if state.get("fingerprint") != fingerprint:
        raise CheckpointError(
            f"checkpoint {path} belongs to another run (other settings or data); delete it or "
            "choose another output folder to start over"
        )
    return state


def probe_rate(
    model: Any,
    make_batch: Callable[[list[int]], Any],
    loss_fn: Callable[[Any, Any], Any],
    batches: list[list[int]],
    settings: LoopSettings,
) -> float:
    """Examples per second of a training step on `batches`, the optimiser's update included but
    made with a learning rate of 0 on a throwaway AdamW (the weights do not move, the real
    optimiser's state is untouched): the figure the expected time is computed from. The batches
    are run twice and only
    the second pass is timed: the first call of each new batch shape builds its kernels (oneDNN
    primitives, CUDA's), which a whole run pays once per shape and a short probe would count on
    every batch."""
    import torch

    model.train()
    still = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.0)

    def one_pass() -> int:
        n = 0
        for idx in batches:
            with autocast(settings):
                loss = loss_fn(model, make_batch(idx))
            loss.backward()
            still.step()
            model.zero_grad(set_to_none=True)
            n += len(idx)
        if settings.device.startswith("cuda"):
            torch.cuda.synchronize()
        return n

    one_pass()
    t0 = time.perf_counter()
    n = one_pass()
    seconds = time.perf_counter() - t0
    return n / seconds if seconds > 0 else float("nan")


def run(
    model: Any,
    lengths: Sequence[int],
    make_batch: Callable[[list[int]], Any],
    loss_fn: Callable[[Any, Any], Any],
    settings: LoopSettings,
    out_dir: Path,
    fingerprint: str,
    name: str = "training",
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Train `model` in place; returns the run's figures. `out_dir/checkpoint.pt` is resumed
    when it is there (and is this run's), written every `checkpoint_every_s` and at the end."""
    import torch

    from ragrig.core.progress import Bar

    say = log or (lambda text: print(text, file=sys.stderr, flush=True))
    n = len(lengths)
    if n == 0:
        raise ConfigError(f"{name}: no training examples")
    per_epoch, steps = total_steps(n, settings)
    ckpt_path = Path(out_dir) / CHECKPOINT
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": settings.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=settings.learning_rate,
    )
    warmup = round(settings.warmup_ratio * steps)
    scheduler = _schedule(optimizer, warmup, steps)
    state = load_checkpoint(ckpt_path, fingerprint)
    start = 0
    history: list[float] = []
    elapsed_before = 0.0
    if state is None:
        # the expected time, from a few batches of the first epoch (the weights do not move)
        probe = epoch_batches(
            lengths, settings.batch_size, settings.seed, 0, settings.bucket_batches
        )[: settings.probe_batches]
        rate = probe_rate(model, make_batch, loss_fn, probe, settings) if probe else float("nan")
        torch.manual_seed(settings.seed)
        examples = steps * settings.batch_size
        if math.isfinite(rate):
            say(
                f"{name}: {steps:,} steps of {settings.batch_size} ({settings.epochs:g} epochs of "
                f"{n:,} examples) at ~{rate:.0f} examples/s ({settings.precision}, "
                f"{settings.device}): expected {examples / rate / 60:.1f} min"
            )
    else:
        model.load_state_dict(state["model"], strict=False)
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        _set_rng_state(state["rng"], settings.device)
        start = state["step"]
        history = list(state["history"])
        elapsed_before = state.get("seconds", 0.0)
        say(f"{name}: resumed from {ckpt_path} at step {start:,} of {steps:,}")

    trainable = {k for k, p in model.named_parameters() if p.requires_grad}

    def checkpoint(step: int, seconds: float) -> None:
        save_checkpoint(
            ckpt_path,
            {
                "fingerprint": fingerprint,
                "step": step,
                "model": {k: v for k, v in model.state_dict().items() if k in trainable},
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "rng": _rng_state(settings.device),
                "history": history,
                "seconds": seconds,
                "settings": asdict(settings),
            },
        )

    bar = Bar(f"{name}", steps, "steps")
    bar.update(start)
    model.train()
    t0 = time.perf_counter()
    last_ckpt = t0
    epoch_cache: tuple[int, list[list[int]]] | None = None
    ema = None
    step = start
    ran = 0
    while step < steps:
        epoch, within = divmod(step, per_epoch)
        if epoch_cache is None or epoch_cache[0] != epoch:
            epoch_cache = (
                epoch,
                epoch_batches(
                    lengths, settings.batch_size, settings.seed, epoch, settings.bucket_batches
                ),
            )
        idx = epoch_cache[1][within]
        with autocast(settings):
            loss = loss_fn(model, make_batch(idx))
        loss.backward()
        if settings.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(params, settings.max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        value = float(loss.detach())
        history.append(value)
        ema = value if ema is None else 0.98 * ema + 0.02 * value
        step += 1
        ran += 1
        bar.update(1)
        bar.note(f"loss {ema:.3f}")
        now = time.perf_counter()
        if step < steps and now - last_ckpt >= settings.checkpoint_every_s:
            checkpoint(step, elapsed_before + now - t0)
            last_ckpt = now
        if settings.stop_after is not None and ran >= settings.stop_after and step < steps:
            checkpoint(step, elapsed_before + now - t0)
            bar.close()
            return {"stopped_at": step, "steps": steps}
    seconds = elapsed_before + time.perf_counter() - t0
    bar.close()
    checkpoint(step, seconds)
    model.eval()
    window = history[-max(1, per_epoch // 10) :]
    return {
        "steps": steps,
        "steps_per_epoch": per_epoch,
        "examples_seen": steps * settings.batch_size,
        "seconds": round(seconds, 1),
        "examples_per_s": round(steps * settings.batch_size / seconds, 1) if seconds else None,
        "resumed_at": start or None,
        "loss_first": round(sum(history[:20]) / max(1, len(history[:20])), 4),
        "loss_last": round(sum(window) / len(window), 4),
        "loss_mean": round(sum(history) / len(history), 4),
    }
