"""Sweep grids and overrides handed to `dvc exp run -S`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from ragrig.sweep import SweepError, grid, link_dataset_root

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


def test_swept_values_with_spaces_keep_their_quotes():
    swept = grid(["dataset.root='/a b/c','/d'"])
    assert [OverridesParser.create().parse_overrides(p)[0].value() for p in swept] == [
        "/a b/c",
        "/d",
    ]


def test_outside_dataset_root_resolves_the_same_from_dvc_experiment_copies(tmp_path):
    # the point keeps `dataset.root=../data sets/scifact` (its params equal a plain run's);
    # from DVC's copy <project>/.dvc/tmp/exps[/standalone]/tmpXXXX the same relative path
    # reaches the real folder through a link under .dvc/tmp
    project = tmp_path / "my proj" / "ragrig"
    data = tmp_path / "my proj" / "data sets" / "scifact"
    data.mkdir(parents=True)
    (data / "corpus.jsonl").write_text("{}\n")
    project.mkdir()
    links = link_dataset_root(project, "../data sets/scifact")
    assert len(links) == 2
    for parent in (".dvc/tmp/exps/standalone", ".dvc/tmp/exps"):
        copy = project / parent / "tmpabc123"
        copy.mkdir(parents=True)
        assert (copy / "../data sets/scifact/corpus.jsonl").read_text() == "{}\n"
    assert link_dataset_root(project, "../data sets/scifact") == links  # idempotent
    assert link_dataset_root(project, "tests/fixtures/tiny_beir") == []
    assert link_dataset_root(project, str(data)) == []
    with pytest.raises(SweepError, match="climbs above"):
        link_dataset_root(project, "../../../../../elsewhere")


def test_sweep_refuses_a_reserved_parameter_name_before_any_point(tmp_path):
    for cmd in (
        ["prepare", "chunk=recursive", "+chunk.size=12"],
        ["--multirun", "dataset=tiny", "chunk=recursive", "+chunk.nfiles=1,2"],
        ["queue", "-j", "2", "dataset=tiny", "+index.dense.size=3"],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "ragrig", "sweep", *cmd],
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
        [sys.executable, "-m", "ragrig", "sweep", "prepare", "-S", "generate=openai_http"],
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
    assert "ragrig sweep prepare $(ARGS)\n\t$(BIN)/dvc exp run $(ARGS)" in makefile


def test_sweep_rows_render_as_the_html_sweep_page(tmp_path):
    """The rows the sweep writes are the HTML page's input (contract 2): the page is written
    beside rows.json and shows every point, the failed one with its error."""
    from ragrig.sweep import results

    rows = [
        results.row(
            "retrieve.ef_search=32",
            {"retrieve.ef_search": 32},
            {"retrieval/ndcg_at_10": 0.6123, "retrieval/recall_at_100": 0.9},
            "ok",
            None,
            1.5,
        ),
        results.row("retrieve.ef_search=64", {"retrieve.ef_search": 64}, {}, "failed", "boom", 2.0),
    ]
    results.write_rows(rows, tmp_path)
    page = results.write_sweep_page(rows, tmp_path)
    assert page == tmp_path / "index.html"
    html = page.read_text(encoding="utf-8")
    assert "0.6123" in html and "boom" in html and "ef_search" in html
