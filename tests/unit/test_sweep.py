"""Sweep grids and overrides handed to `dvc exp run -S`."""

from __future__ import annotations

import os
import subprocess
import sys

from hydra.core.override_parser.overrides_parser import OverridesParser

from ragrig.sweep import grid, point_overrides

from ..conftest import PROJECT


def test_grid_is_the_product_of_sweep_values_in_order():
    points = grid(
        [
            "dataset=tiny",
            "retrieve.ef_search=16,64",
            "chunk=document,recursive",
            "hydra/launcher=joblib",
        ]
    )
    assert points == [
        ["dataset=tiny", "retrieve.ef_search=16", "chunk=document"],
        ["dataset=tiny", "retrieve.ef_search=16", "chunk=recursive"],
        ["dataset=tiny", "retrieve.ef_search=64", "chunk=document"],
        ["dataset=tiny", "retrieve.ef_search=64", "chunk=recursive"],
    ]
    assert grid(["retrieve.ef_search=range(16,48,16)"]) == [
        ["retrieve.ef_search=16"],
        ["retrieve.ef_search=32"],
    ]
    assert grid([]) == [[]]


def test_outside_root_with_spaces_is_quoted_so_hydra_reads_it_back(tmp_path):
    project = tmp_path / "my proj" / "ragrig"
    project.mkdir(parents=True)
    (override,) = point_overrides([], "../data sets/scifact", project)[-1:]
    parsed = OverridesParser.create().parse_overrides([override])[0]
    assert parsed.value() == str((tmp_path / "my proj" / "data sets" / "scifact").resolve())
    swept = grid(["dataset.root='/a b/c','/d'"])
    assert [OverridesParser.create().parse_overrides(p)[0].value() for p in swept] == [
        "/a b/c",
        "/d",
    ]


def test_sweep_refuses_a_reserved_parameter_name_before_any_point(tmp_path):
    for cmd in (
        ["prepare", "chunk=recursive", "+chunk.size=12"],
        ["--multirun", "dataset=tiny", "chunk=recursive", "+chunk.nfiles=1,2"],
        ["queue", "-j", "2", "dataset=tiny", "+index.dense.size=3"],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "ragrig.sweep", *cmd],
            cwd=PROJECT,
            capture_output=True,
            text=True,
            env={**os.environ, "RAGRIG_MLFLOW_URI": f"sqlite:///{tmp_path / 'm.db'}"},
        )
        assert proc.returncode == 1, cmd
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith("ragrig sweep: error: parameter name(s) ") and "not allowed" in line
        assert not (tmp_path / "m.db").exists()


def test_make_exp_refuses_an_unpriced_generator_before_dvc_runs(tmp_path):
    # `make exp ARGS="-S generate=openai_http"` runs `ragrig.sweep prepare -S generate=openai_http`
    # first: the paid model has no price in report.prices, so nothing runs and no call is made
    proc = subprocess.run(
        [sys.executable, "-m", "ragrig.sweep", "prepare", "-S", "generate=openai_http"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        env={**os.environ, "RAGRIG_MLFLOW_URI": f"sqlite:///{tmp_path / 'm.db'}"},
    )
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("ragrig sweep: error: no price for model 'gpt-4o-mini'")
    assert not (tmp_path / "m.db").exists()
    makefile = (PROJECT / "Makefile").read_text(encoding="utf-8")
    assert "ragrig.sweep prepare $(ARGS)\n\t$(BIN)/dvc exp run $(ARGS)" in makefile
