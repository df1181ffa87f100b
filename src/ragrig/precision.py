"""Reduced-precision inference of the torch models (embedder, verifier): bf16 autocast and
dynamic int8 Linear layers, chosen by a config's `precision` / `quantize`."""

from __future__ import annotations

import contextlib
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
