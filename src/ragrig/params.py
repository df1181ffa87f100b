"""Compose conf/ into params.yaml exactly as `dvc exp run` does with Hydra enabled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ragrig.errors import ConfigError

QUOTING_HINT = (
    "a value with spaces or any of ( ) [ ] { } , = ~ ' # needs Hydra quotes inside the shell's: "
    "\"dataset.root='/a b/c'\" (dvc exp run -S \"dataset.root='/a b/c'\"; see README)"
)


def compose(conf_dir: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """Compose conf/config.yaml with Hydra overrides and return it as plain data."""
    text = compose_yaml(conf_dir, overrides)
    return yaml.safe_load(text)


def compose_yaml(conf_dir: str | Path, overrides: list[str] | None = None) -> str:
    """Return the YAML text DVC would write to params.yaml for these overrides."""
    import tempfile

    from dvc.utils.hydra import compose_and_dump
    from hydra.errors import ConfigCompositionException, OverrideParseException

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "params.yaml"
        try:
            compose_and_dump(
                out,
                str(Path(conf_dir).resolve()),
                None,
                "config",
                str(Path(conf_dir).resolve().parent),
                list(overrides or []),
            )
        except OverrideParseException as exc:
            raise ConfigError(_override_error(exc, overrides)) from exc
        except ConfigCompositionException as exc:
            if "Ambiguous value" not in str(exc):
                raise
            raise ConfigError(_override_error(exc, overrides)) from exc
        return out.read_text(encoding="utf-8")


def _override_error(exc: Exception, overrides: list[str] | None) -> str:
    """One line: which override Hydra could not read, why, and how to quote it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    bad = []
    for o in overrides or []:
        try:
            parser.parse_override(o)
        except Exception:
            bad.append(o)
    why = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
    if bad and "=" not in bad[0]:
        which = f"override {bad[0]!r} is not key=value (a path with spaces split by the shell?)"
    else:
        which = f"cannot read override {bad[0]!r} ({why})" if bad else why
    return f"{which}; {QUOTING_HINT}"


def write_params(
    conf_dir: str | Path, output: str | Path, overrides: list[str] | None = None
) -> str:
    """Validate the composition (every section and what sections require of each other), then
    write it atomically; return its text. An invalid composition leaves `output` untouched."""
    from ragrig.config import validate_all
    from ragrig.io import atomic_write_text

    text = compose_yaml(conf_dir, overrides)
    validate_all(yaml.safe_load(text))
    atomic_write_text(Path(output), text)
    return text
