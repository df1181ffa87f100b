"""onnxruntime on the CPU, as every ragrig ONNX graph runs: one set of session options
(sequential, quiet, no memory arena), sessions that fail in one line, and `tokenizers`
encodings padded into a batch. The graphs come from the packages (embed.onnx) or from
ragrig.weights.onnx_export."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ragrig.core.errors import ConfigError


def session_options(threads: int) -> Any:
    """onnxruntime options of every ragrig session: `threads` intra-op threads (0: its default),
    sequential, quiet, and no memory arena: batches of varying shapes would grow it and keep it
    resident (docs/benchmarks.md §21)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = max(int(threads), 0)
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3
    opts.enable_cpu_mem_arena = False
    opts.enable_mem_pattern = False
    return opts


def padded(encodings: list, pad_id: int) -> dict[str, np.ndarray]:
    """A batch of `tokenizers` encodings as int64 arrays padded to its longest: input_ids,
    attention_mask, token_type_ids."""
    width = max(len(e.ids) for e in encodings)
    ids = np.full((len(encodings), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(encodings), width), dtype=np.int64)
    types = np.zeros((len(encodings), width), dtype=np.int64)
    for row, e in enumerate(encodings):
        n = len(e.ids)
        ids[row, :n], mask[row, :n], types[row, :n] = e.ids, e.attention_mask, e.type_ids
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def load_session(path: Path, threads: int) -> Any:
    """An onnxruntime CPU session of `path`, sequential, `threads` intra-op threads; a file
    that does not load is one line naming it (delete it and the next use exports it again)."""
    import onnxruntime as ort

    try:
        return ort.InferenceSession(
            str(path), sess_options=session_options(threads), providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime raises its own exception types
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(
            f"ONNX file {path} cannot be loaded ({first[:200]}): delete it and it is exported "
            "again on next use (ragrig prepare)"
        ) from None
