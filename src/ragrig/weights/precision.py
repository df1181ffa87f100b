"""Reduced-precision inference of the torch models (embedder, verifier, the torch generator's
prompt pass): bf16 autocast and dynamic int8 Linear layers, chosen by a config's `precision` /
`quantize`, whose default `auto` is bf16 only on a CPU with native bf16 matrix units."""

from __future__ import annotations

import contextlib
from functools import lru_cache
from pathlib import Path
from typing import Any


def quantize_linear_int8(model: Any) -> None:
    """Replace every torch.nn.Linear of the loaded model, in place, by its dynamically quantised
    int8 version (weights int8 per tensor, activations quantised per batch; fbgemm/oneDNN VNNI
    kernels on x86). Embeddings, LayerNorm and attention softmax stay fp32."""
    import warnings

    import torch

    with warnings.catch_warnings():  # torch 2.x: the eager-mode API is deprecated, not removed
        warnings.simplefilter("ignore")
        torch.ao.quantization.quantize_dynamic(
            model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True
        )


def autocast(precision: str) -> contextlib.AbstractContextManager:
    """bf16: torch's CPU autocast (matrix products in bfloat16, reductions such as LayerNorm and
    softmax in fp32, the weights kept fp32); else nothing."""
    if precision != "bf16":
        return contextlib.nullcontext()
    import torch

    return torch.autocast("cpu", dtype=torch.bfloat16)


# CPU flags of native bfloat16 matrix arithmetic: AMX tiles, or AVX-512 BF16 dot products. Without
# either, torch emulates bf16 and the same encode ran 7.5x slower than fp32 (an AVX2-only EPYC).
NATIVE_BF16 = ("amx_bf16", "avx512_bf16")
PRECISION_CHOICES = ("auto", "fp32", "bf16", "int8")


@lru_cache(maxsize=1)
def cpu_info() -> tuple[str, frozenset[str]]:
    """(model name, feature flags) of this machine's CPU, read once from /proc/cpuinfo; ("", no
    flags) where there is none (not Linux), so that `auto` resolves to fp32 there."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "", frozenset()
    return parse_cpuinfo(text)


def parse_cpuinfo(text: str) -> tuple[str, frozenset[str]]:
    """(model name, flags) of the first processor listed in a /proc/cpuinfo text."""
    model = flags = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = value
        if model and flags:
            break
    return model, frozenset(flags.split())


def resolve_precision(
    requested: str, fp32: str = "fp32", flags: frozenset[str] | None = None
) -> str:
    """`auto`: bf16 where the CPU has native bf16 matrix units (NATIVE_BF16), else `fp32` (the
    name the caller gives full precision, e.g. the verifier's "none"); any other value as it is
    (an explicit choice always wins)."""
    if requested != "auto":
        return requested
    have = cpu_info()[1] if flags is None else flags
    return "bf16" if have & set(NATIVE_BF16) else fp32


def precision_record(requested: str, resolved: str) -> dict[str, Any]:
    """What a manifest and the MLflow run say of a model's precision: asked, used, and the CPU
    that decided it (two runs that differ only by machine then say why their last bits do)."""
    model, flags = cpu_info()
    return {
        "requested": requested,
        "resolved": resolved,
        "cpu": model,
        "cpu_bf16_flags": sorted(flags & set(NATIVE_BF16)),
    }
