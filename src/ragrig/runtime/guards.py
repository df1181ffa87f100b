"""Environment guards: fail early on installs known to break the CPU torch stack."""

from __future__ import annotations

import importlib.util


def check_no_torchvision() -> None:
    """Raise if torchvision is importable: beside the CPU torch it breaks transformers."""
    if importlib.util.find_spec("torchvision") is not None:
        raise RuntimeError(
            "torchvision is installed; with the CPU torch build it breaks transformers and "
            "sentence-transformers imports. Uninstall it: pip uninstall -y torchvision"
        )


def check_cpu_torch(expected: str = "2.13.0") -> None:
    """Raise unless the pinned CPU torch build is installed."""
    import torch

    if not torch.__version__.startswith(expected):
        raise RuntimeError(
            f"torch {torch.__version__} installed; ragrig pins torch=={expected} (CPU)"
        )
    if torch.version.cuda is not None:
        raise RuntimeError(
            f"a CUDA torch build is installed ({torch.version.cuda}); install the CPU build"
        )


def main() -> int:
    check_no_torchvision()
    check_cpu_torch()
    print("environment guards passed: CPU torch, no torchvision")
    return 0
