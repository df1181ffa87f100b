"""Compose conf/ into params.yaml exactly as `dvc exp run` does with Hydra enabled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def compose(conf_dir: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """Compose conf/config.yaml with Hydra overrides and return it as plain data."""
    text = compose_yaml(conf_dir, overrides)
    return yaml.safe_load(text)


def compose_yaml(conf_dir: str | Path, overrides: list[str] | None = None) -> str:
    """Return the YAML text DVC would write to params.yaml for these overrides."""
    import tempfile

    from dvc.utils.hydra import compose_and_dump

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "params.yaml"
        compose_and_dump(
            out,
            str(Path(conf_dir).resolve()),
            None,
            "config",
            str(Path(conf_dir).resolve().parent),
            list(overrides or []),
        )
        return out.read_text(encoding="utf-8")


def write_params(
    conf_dir: str | Path, output: str | Path, overrides: list[str] | None = None
) -> str:
    """Write the composed params file atomically; return its text."""
    from ragrig.io import atomic_write_text

    text = compose_yaml(conf_dir, overrides)
    atomic_write_text(Path(output), text)
    return text
