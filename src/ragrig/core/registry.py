"""Lazy, name-keyed backend registries.

Each stage package holds its own registry, a dict of backend name -> "module:attribute", so
that importing ragrig never imports torch, faiss or docling, and adding a backend to one stage
changes only that stage's code (and cache key).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any


def resolve(registry: Mapping[str, str], name: str, kind: str) -> Any:
    """Import and return the object registered as `name`."""
    try:
        target = registry[name]
    except KeyError:
        raise KeyError(f"no {kind} named {name!r}; known: {sorted(registry)}") from None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)
