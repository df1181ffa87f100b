"""Dataset paths with spaces or special characters: Hydra's quoting, and the hint when it is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragrig.compose.params import compose
from ragrig.core.errors import ConfigError

PROJECT = Path(__file__).resolve().parents[1]
CONF = PROJECT / "conf"
HINT = "\"dataset.root='/a b/c'\""


def test_quoted_path_with_spaces_and_specials_composes() -> None:
    cfg = compose(CONF, ["dataset.root='/data/my set (v2), #1'"])
    assert cfg["dataset"]["root"] == "/data/my set (v2), #1"


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (["dataset.root=/data/my", "set/v2"], "override 'set/v2' is not key=value"),
        (
            ["dataset.root=/data/my set (v2)"],
            "cannot read override 'dataset.root=/data/my set (v2)'",
        ),
        (["dataset.root=/data/a,b"], "Ambiguous value for argument 'dataset.root=/data/a,b'"),
    ],
)
def test_unquoted_path_error_points_to_quoting(overrides: list[str], named: str) -> None:
    with pytest.raises(ConfigError) as exc:
        compose(CONF, overrides)
    msg = str(exc.value)
    assert "\n" not in msg
    assert named in msg
    assert HINT in msg


def test_cli_params_write_unquoted_path_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "params.yaml"
    proc = subprocess.run(
        [sys.executable, "-m", "ragrig", "params", "write", "dataset.root=/data/my", "set"]
        + ["--conf", str(CONF), "--output", str(out)],
        env={**os.environ, "PYTHONPATH": str(PROJECT / "src")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("ragrig: error: override 'set' is not key=value")
    assert HINT in lines[0]
    assert not out.exists()
