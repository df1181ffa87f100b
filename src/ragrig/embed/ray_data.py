"""embed.executor.kind=ray: the chunk vectors computed over Ray Data.

The chunk table is cut into windows of `embed.window` consecutive rows. A dataset of window
starts goes through `map_batches` to a pool of encoder actors (each loads the model once); an
actor reads only its window's rows from the parquet file (the row groups that hold them), and
encodes them with the same embedder and the same call as the local path (`encode_windows`),
so the vectors are byte-identical to it. The driver receives the windows in order and writes
them into the output array; it never holds the chunk texts.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ragrig.core.errors import RagrigError
from ragrig.runtime.ray_probe import probe

# what an encoder actor needs from the driver's environment (offline models, thread counts)
_FORWARDED_ENV = (
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
)


def window_rows(row_group_rows: list[int], start: int, stop: int) -> tuple[list[int], int]:
    """The row groups holding rows [start, stop) of a parquet file whose row groups have
    `row_group_rows` rows, and the offset of `start` within the first of them."""
    groups, first, offset = [], None, 0
    for i, n in enumerate(row_group_rows):
        if offset + n > start and offset < stop:
            groups.append(i)
            if first is None:
                first = start - offset
        offset += n
    if stop > offset or start < 0 or start >= stop:
        raise ValueError(f"rows [{start}, {stop}) outside a table of {offset} rows")
    return groups, int(first or 0)


class WindowEncoder:
    """A Ray actor: loads the embedder once, encodes the windows it is given."""

    def __init__(self, cfg: dict[str, Any], table: str, window: int, threads: int):
        import pyarrow.parquet as pq

        from ragrig.core.config import validate_section
        from ragrig.embed.base import make_embedder
        from ragrig.runtime.stage import apply_torch_threads

        apply_torch_threads(threads)
        self.embedder = make_embedder(validate_section("embed", cfg), role="passage")
        self.file = pq.ParquetFile(table)
        meta = self.file.metadata
        self.groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        self.rows = meta.num_rows
        self.window = window

    def texts(self, start: int) -> list[str]:
        stop = min(start + self.window, self.rows)
        groups, first = window_rows(self.groups, start, stop)
        col = self.file.read_row_groups(groups, columns=["text"]).column("text")
        return col.slice(first, stop - start).to_pylist()

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, Any]:
        starts = [int(s) for s in batch["start"]]
        vecs = [self.embedder.encode(self.texts(s)) for s in starts]
        return {
            "start": np.asarray(starts, dtype=np.int64),
            "rows": np.asarray([v.shape[0] for v in vecs], dtype=np.int64),
            "vectors": np.asarray([v.astype(np.float32).tobytes() for v in vecs], dtype=object),
        }


def _init(executor: Any, src: Path) -> bool:
    """Connect to the configured cluster, or start one here; True when this call started it."""
    import ray

    env = {k: os.environ[k] for k in _FORWARDED_ENV if k in os.environ}
    runtime_env = {"env_vars": {**env, "PYTHONPATH": str(src)}}
    address = executor.address or os.environ.get("RAY_ADDRESS")
    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, runtime_env=runtime_env, log_to_driver=False)
        return True
    ray.init(
        num_cpus=executor.actors * executor.cpus_per_actor,
        object_store_memory=executor.object_store_mb * 1024 * 1024,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="WARNING",
        runtime_env=runtime_env,
    )
    return True


def encode_over_ray(
    cfg: Any,
    table: Path,
    done: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Vectors of every chunk of `table` (chunks.parquet), in table order."""
    import pyarrow.parquet as pq
    import ray

    import ragrig

    ex = cfg.executor
    if ex.address or os.environ.get("RAY_ADDRESS"):  # one line in seconds, before Ray's retries
        probe(
            ex.address or os.environ["RAY_ADDRESS"],
            "embed.executor.address" if ex.address else "RAY_ADDRESS",
        )
    rows = pq.ParquetFile(table).metadata.num_rows
    starts = list(range(0, rows, cfg.window))
    if not starts:
        raise RagrigError(f"{table}: no chunks to embed")
    started = _init(ex, Path(ragrig.__file__).resolve().parents[1])
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True
        ctx.enable_progress_bars = False
        threads = int(os.environ.get("OMP_NUM_THREADS", ex.cpus_per_actor))
        ds = ray.data.from_items([{"start": s} for s in starts], override_num_blocks=len(starts))
        encoded = ds.map_batches(
            WindowEncoder,
            fn_constructor_kwargs={
                "cfg": cfg.model_dump(mode="json"),
                "table": str(Path(table).resolve()),
                "window": cfg.window,
                "threads": min(threads, ex.cpus_per_actor),
            },
            batch_size=1,
            compute=ray.data.ActorPoolStrategy(size=ex.actors),
            num_cpus=ex.cpus_per_actor,
        )
        out: np.ndarray | None = None
        seen = 0
        for batch in encoded.iter_batches(batch_size=None, batch_format="numpy"):
            for start, n, raw in zip(batch["start"], batch["rows"], batch["vectors"], strict=True):
                vec = np.frombuffer(raw, dtype=np.float32).reshape(int(n), -1)
                if out is None:
                    out = np.empty((rows, vec.shape[1]), dtype=np.float32)
                if int(start) != seen:
                    raise RagrigError(f"Ray returned window {start} where {seen} was due")
                out[seen : seen + int(n)] = vec
                seen += int(n)
                if done is not None:
                    done(int(n))
        if out is None or seen != rows:
            raise RagrigError(f"Ray encoded {seen} of {rows} chunks")
        return out
    finally:
        if started:
            ray.shutdown()
