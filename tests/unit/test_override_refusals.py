"""Overrides refused before anything is written: unreadable ones and ones reading the environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ragrig.compose.params import compose, parse_overrides, write_params
from ragrig.core.errors import ConfigError
from ragrig.sweep import grid

from ..conftest import PROJECT

CONF = PROJECT / "conf"
SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
UNREADABLE = "retrieve.ef_search=1; touch X"


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("dataset.name=${oc.env:AWS_SECRET_ACCESS_KEY}", "reads the environment (${oc.env:...})"),
        ("dataset.name=${ oc.env : AWS_SECRET_ACCESS_KEY }", "(${oc.env:...})"),
        ("dataset.name='s3-${oc.env:AWS_SECRET_ACCESS_KEY}'", "(${oc.env:...})"),
        ("dataset.name='${oc.select:nope,${oc.env:AWS_SECRET_ACCESS_KEY}}'", "(${oc.env:...})"),
        ("dataset.name=x,${oc.env:AWS_SECRET_ACCESS_KEY}", "(${oc.env:...})"),
        ("+dataset.tags={k:${env:AWS_SECRET_ACCESS_KEY}}", "(${env:...})"),
        ("dataset.name='${oc.decode:a}'", "(${oc.decode:...})"),
        ("dataset.name='${${x}:AWS_SECRET_ACCESS_KEY}'", "whose name is computed (${x})"),
    ],
)
def test_an_override_reading_the_environment_is_refused_in_one_line(
    override: str, named: str, monkeypatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    with pytest.raises(ConfigError) as exc:
        parse_overrides(["retrieve.ef_search=64", override])
    msg = str(exc.value)
    assert msg.startswith(f"override {override!r} ") and named in msg
    assert "\n" not in msg and SECRET not in msg


def test_node_interpolations_and_sweeps_pass() -> None:
    parsed = parse_overrides(["dataset.name=${dataset.root}", "retrieve.ef_search=16,32"])
    assert [o.key_or_group for o in parsed] == ["dataset.name", "retrieve.ef_search"]


def test_params_write_refuses_before_writing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    out = tmp_path / "params.yaml"
    out.write_text("before\n")
    with pytest.raises(ConfigError, match="reads the environment"):
        write_params(CONF, out, ["dataset.name=${oc.env:AWS_SECRET_ACCESS_KEY}"])
    assert out.read_text() == "before\n"


def test_unreadable_override_in_a_sweep_grid_is_one_line() -> None:
    with pytest.raises(ConfigError) as exc:
        grid(["chunk=recursive", UNREADABLE], CONF)
    msg = str(exc.value)
    assert msg.startswith(f"cannot read override {UNREADABLE!r} (token recognition error at: ';')")
    assert "\n" not in msg


def test_conf_reads_no_environment_and_api_keys_stay_names(monkeypatch) -> None:
    """conf/ names a key's variable (api_key_env); the stage reads it: never in params.yaml."""
    for path in CONF.rglob("*.yaml"):
        text = path.read_text(encoding="utf-8")
        assert "${oc.env" not in text and "${oc.decode" not in text, path
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    cfg = compose(CONF, ["generate=openai_http"])
    assert cfg["generate"]["api_key_env"] == "OPENAI_API_KEY"
    assert SECRET not in yaml.safe_dump(cfg)


@pytest.mark.parametrize(
    "command",
    [
        ["params", "write"],
        ["sweep", "prepare", "-S"],  # what `make exp ARGS="-S ..."` runs before dvc exp run
        ["sweep", "--multirun", "dataset=tiny"],
        ["sweep", "queue", "dataset=tiny"],
    ],
    ids=["params-write", "exp", "sweep", "queue"],
)
def test_commands_taking_overrides_answer_in_one_line(command: list[str], tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(PROJECT / "src"),
        "RAGRIG_MLFLOW_URI": f"sqlite:///{tmp_path / 'm.db'}",
        "AWS_SECRET_ACCESS_KEY": SECRET,
    }
    extra = ["--output", str(tmp_path / "params.yaml")] if command[0] == "params" else []
    for override, starts in (
        (UNREADABLE, f"cannot read override {UNREADABLE!r}"),
        ("dataset.name=${oc.env:AWS_SECRET_ACCESS_KEY}", "override 'dataset.name=${oc.env:"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "ragrig", *command, override, *extra],
            cwd=PROJECT,
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert proc.returncode == 1, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert starts in line and "Traceback" not in line
        assert SECRET not in proc.stdout + proc.stderr
    assert list(tmp_path.iterdir()) == []  # neither params.yaml nor an MLflow store


def test_a_secret_resolved_into_params_is_refused_by_every_stage_before_it_writes(
    tmp_path, monkeypatch, capsys
):
    """The path ragrig does not compose (plain `dvc exp run -S 'x=${oc.env:...}'`): the value
    lands in params.yaml, and the first stage to read it refuses, naming the parameter and the
    variable, never the value."""
    import yaml

    from ragrig.core.config import load_section, secret_params
    from ragrig.core.errors import ConfigError

    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # too short to be told from chance
    monkeypatch.setenv("HOME_DIR", secret)  # not a credential by name
    params = yaml.safe_load((PROJECT / "params.yaml").read_text())
    params["dataset"]["name"] = secret
    params["report"]["mlflow"]["tracking_uri"] = f"http://user:{secret}@host/"
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    assert secret_params(params) == [
        ("dataset.name", "AWS_SECRET_ACCESS_KEY"),
        ("report.mlflow.tracking_uri", "AWS_SECRET_ACCESS_KEY"),
    ]
    with pytest.raises(ConfigError) as err:
        load_section("parse", path)  # any section: the whole file is refused
    msg = str(err.value)
    assert msg.startswith(
        f"{path}: 2 parameters (dataset.name ($AWS_SECRET_ACCESS_KEY), "
        "report.mlflow.tracking_uri ($AWS_SECRET_ACCESS_KEY)) hold the value of a credential "
        "environment variable"
    )
    assert secret not in msg and "\n" not in msg
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    assert load_section("dataset", path).name == secret  # without the variable: a plain string
