"""`ragrig prepare` (run by `make setup`): once per machine, the conversions that would
otherwise cost a first run its time. The packaged GGUF generator's weights de-quantized for
torch (ragrig.generate.torch_gguf.prepare), and the ONNX graphs of the shipped verifier and the
packaged MiniLM that `ragrig traces` and `quantize: onnx` judges read without torch
(ragrig.weights.onnx_export). Each is timed; what is already there is said so."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

ONNX_EMBEDDER = "packaged:all-MiniLM-L6-v2"


def prepare_onnx() -> list[tuple[str, Path, bool, float]]:
    """(what, file, whether this call exported it, seconds) of the shipped verifier and the
    packaged MiniLM encoder."""
    from ragrig.judge.verifier_model import SHIPPED, Verifier
    from ragrig.weights.models import resolve_model
    from ragrig.weights.onnx_export import encoder_onnx

    t0 = time.perf_counter()
    verifier = Verifier(SHIPPED, quantize="onnx").model
    out = [("shipped verifier", verifier.onnx_file, verifier.exported, time.perf_counter() - t0)]
    t0 = time.perf_counter()
    path, made = encoder_onnx(Path(resolve_model(ONNX_EMBEDDER)))
    out.append((ONNX_EMBEDDER, path, made, time.perf_counter() - t0))
    return out


def cmd_prepare(args: Any) -> int:
    from ragrig.generate.torch_gguf import prepare

    for model in args.models:
        t0 = time.perf_counter()
        cache, converted = prepare(model)
        took = f"converted in {time.perf_counter() - t0:.1f} s" if converted else "already there"
        print(f"ragrig prepare: {model}: {took} ({cache})")
    if not args.no_onnx:
        for what, path, made, seconds in prepare_onnx():
            took = f"exported to ONNX in {seconds:.1f} s" if made else "ONNX already there"
            print(f"ragrig prepare: {what}: {took} ({path})")
    return 0
