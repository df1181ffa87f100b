"""embed.executor.kind=ray: the chunk vectors over Ray Data, byte-identical to the local path."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from ragrig.core.config import validate_section
from ragrig.core.errors import ConfigError, ServiceError
from ragrig.embed import encode_windows, make_embedder
from ragrig.embed.ray_data import encode_over_ray, window_rows
from ragrig.runtime.ray_probe import probe
from tests.conftest import FIXTURE

pytestmark = pytest.mark.full  # make test-all (CI) only


def _cfg(**over):
    base = {
        "method": "sentence_transformers",
        "model": "packaged:all-MiniLM-L6-v2",
        "batch_size": 4,
        "max_seq_length": 128,
        # fp32 on every CPU: bf16 (what auto is on AMX) rounds by batch composition
        "precision": "fp32",
    }
    return validate_section("embed", {**base, **over})


def test_window_rows_spans_row_groups():
    # row groups of 3, 3, 3, 2 rows: rows 2..7 lie in groups 0, 1, 2, starting at offset 2
    assert window_rows([3, 3, 3, 2], 2, 8) == ([0, 1, 2], 2)
    assert window_rows([3, 3, 3, 2], 9, 11) == ([3], 0)
    assert window_rows([11], 7, 11) == ([0], 7)
    with pytest.raises(ValueError, match="outside a table of 11 rows"):
        window_rows([3, 3, 3, 2], 7, 12)


def test_ray_needs_a_window():
    with pytest.raises(ConfigError, match="needs embed.window > 0"):
        _cfg(executor={"kind": "ray"})
    assert _cfg(window=5, executor={"kind": "ray"}).executor.actors == 2


def test_unreachable_cluster_fails_in_seconds_naming_it():
    t0 = time.perf_counter()
    with pytest.raises(
        ServiceError,
        match=r"^Ray cluster at 127\.0\.0\.1:9 \(embed\.executor\.address\) is unreachable: ",
    ):
        encode_over_ray(_cfg(window=5, executor={"kind": "ray", "address": "127.0.0.1:9"}), "x")
    assert time.perf_counter() - t0 < 6
    with pytest.raises(ServiceError, match=r"embed\.executor\.address='h:x': expected host:port"):
        probe("h:x", "embed.executor.address")


def test_windows_change_the_batches_not_the_meaning():
    texts = pd.read_json(FIXTURE / "corpus.jsonl", lines=True)["text"].tolist()
    emb = make_embedder(_cfg())
    whole = encode_windows(emb, texts, 0)
    windowed = encode_windows(emb, texts, 7)
    assert windowed.shape == whole.shape == (len(texts), 384)
    # the same texts, other batches: equal to float rounding, one vector per text, in order
    assert np.allclose(windowed, whole, atol=1e-5)
    per_window = np.concatenate([emb.encode(texts[i : i + 7]) for i in range(0, len(texts), 7)])
    assert np.array_equal(windowed, per_window)


def test_ray_vectors_identical_to_local_on_two_workers(tmp_path):
    corpus = pd.read_json(FIXTURE / "corpus.jsonl", lines=True)
    texts = corpus["text"].tolist()
    table = tmp_path / "chunks.parquet"
    # row groups of 3 rows: every window of 7 crosses row groups
    pq.write_table(
        pa.table({"chunk_id": corpus["_id"].astype(str), "text": texts}), table, row_group_size=3
    )
    cfg = _cfg(window=7, executor={"kind": "ray", "actors": 2, "cpus_per_actor": 1})
    seen: list[int] = []
    over_ray = encode_over_ray(cfg, table, done=seen.append)
    # each actor encodes on one torch thread; bf16 products on AMX CPUs round by thread count
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        local = encode_windows(make_embedder(cfg), texts, 7)
    finally:
        torch.set_num_threads(threads)
    assert over_ray.dtype == np.float32 and over_ray.shape == (20, 384)
    assert over_ray.tobytes() == local.tobytes()
    assert seen == [7, 7, 6]


def test_embed_stage_over_ray_writes_the_local_stages_bytes(tmp_path):
    import json
    import subprocess
    import sys

    import yaml

    from tests.conftest import PROJECT, project_env, write_tiny_stage_inputs

    chunks = write_tiny_stage_inputs(tmp_path)
    conf = PROJECT / "conf" / "embed"
    ray_cfg = yaml.safe_load((conf / "minilm_ray.yaml").read_text(encoding="utf-8"))
    local_cfg = yaml.safe_load((conf / "minilm.yaml").read_text(encoding="utf-8"))
    assert {k: v for k, v in ray_cfg.items() if k not in {"window", "executor"}} == {
        k: v for k, v in local_cfg.items() if k not in {"window", "executor"}
    }
    ray_cfg["window"] = local_cfg["window"] = 8
    outs = {}
    for name, cfg in (("ray", ray_cfg), ("local", local_cfg)):
        params = tmp_path / f"params_{name}.yaml"
        params.write_text(yaml.safe_dump({"embed": cfg, "runtime": {"threads": 1, "seed": 13}}))
        out = tmp_path / f"embed_{name}"
        subprocess.run(
            [sys.executable, str(PROJECT / "stages" / "embed.py"), "--params", str(params)]
            + ["--out", str(out), "--inputs", str(tmp_path / "parse"), str(tmp_path / "chunk")],
            env=project_env({"RAGRIG_STAGE_LOG": str(tmp_path / "log.jsonl")}),
            check=True,
            capture_output=True,
        )
        outs[name] = out
    assert (outs["ray"] / "chunks.npy").read_bytes() == (outs["local"] / "chunks.npy").read_bytes()
    assert np.load(outs["ray"] / "chunks.npy").shape == (len(chunks), 384)
    manifest = json.loads((outs["ray"] / "manifest.json").read_text())
    assert (manifest["executor"], manifest["window"], manifest["chunks"]) == ("ray", 8, len(chunks))
