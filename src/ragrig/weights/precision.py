"""Reduced-precision inference of the torch models (embedder, verifier, the torch generator's
prompt pass): bf16 autocast and dynamic int8 Linear layers, chosen by a config's `precision` /
`quantize`, whose default `auto` is bf16 only on a CPU with native bf16 matrix units that torch's
oneDNN may use (`ONEDNN_MAX_CPU_ISA` can forbid them: then `auto` is fp32, as on a CPU without)."""

from __future__ import annotations

import contextlib
import os
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


# oneDNN's ISA levels (dnnl_cpu_isa_t bit masks) and the lowest level that runs each bf16 unit:
# `ONEDNN_MAX_CPU_ISA=AVX2` (or the older DNNL_MAX_CPU_ISA) keeps torch's oneDNN kernels at AVX2
# on any CPU, so bf16 autocast would be emulated there: the same machine as one without the units
# (which is how an AVX2-only machine's path is run on one with AMX: docs/benchmarks.md §18).
ONEDNN_ISA = {
    "SSE41": 0x1,
    "AVX": 0x3,
    "AVX2": 0x7,
    "AVX2_VNNI": 0xF,
    "AVX2_VNNI_2": 0x1F,
    "AVX512_CORE": 0x27,
    "AVX512_CORE_VNNI": 0x67,
    "AVX512_CORE_BF16": 0xE7,
    "AVX10_1_512": 0x1EF,
    "AVX512_CORE_FP16": 0x1EF,
    "AVX10_1_512_AMX": 0xFEF,
    "AVX512_CORE_AMX": 0xFEF,
    "AVX10_1_512_AMX_FP16": 0x1FEF,
    "AVX512_CORE_AMX_FP16": 0x1FEF,
}
BF16_UNIT_ISA = {"avx512_bf16": "AVX512_CORE_BF16", "amx_bf16": "AVX512_CORE_AMX"}


def isa_cap() -> str | None:
    """The oneDNN ISA cap this process runs under (ONEDNN_MAX_CPU_ISA, else DNNL_MAX_CPU_ISA),
    upper-cased; None when there is none or it names no level (ALL, DEFAULT, unknown)."""
    value = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or ""
    value = value.strip().upper()
    return value if value in ONEDNN_ISA else None


def usable_flags(flags: frozenset[str], cap: str | None) -> frozenset[str]:
    """`flags` less the bf16 units that oneDNN may not use under `cap`."""
    if cap is None:
        return flags
    allowed = ONEDNN_ISA[cap]
    barred = {f for f, isa in BF16_UNIT_ISA.items() if ONEDNN_ISA[isa] & ~allowed}
    return flags - barred


def resolve_precision(
    requested: str, fp32: str = "fp32", flags: frozenset[str] | None = None
) -> str:
    """`auto`: bf16 where the CPU has native bf16 matrix units (NATIVE_BF16) that oneDNN may use
    (isa_cap), else `fp32` (the name the caller gives full precision, e.g. the verifier's
    "none"); any other value as it is (an explicit choice always wins)."""
    if requested != "auto":
        return requested
    have = usable_flags(cpu_info()[1] if flags is None else flags, isa_cap())
    return "bf16" if have & set(NATIVE_BF16) else fp32


def precision_record(requested: str, resolved: str) -> dict[str, Any]:
    """What a manifest and the MLflow run say of a model's precision: asked, used, and the CPU
    that decided it (two runs that differ only by machine then say why their last bits do)."""
    model, flags = cpu_info()
    record = {
        "requested": requested,
        "resolved": resolved,
        "cpu": model,
        "cpu_bf16_flags": sorted(flags & set(NATIVE_BF16)),
    }
    cap = isa_cap()
    if cap is not None:  # named only when set: records of uncapped runs keep their shape
        record["onednn_max_cpu_isa"] = cap
    return record
