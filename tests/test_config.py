"""Config: every option of every group composes and validates; params.yaml is the composed default."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ragrig.config import SECTIONS, load_section, validate_all, validate_section
from ragrig.errors import ConfigError
from ragrig.params import compose, compose_yaml

from .conftest import PROJECT

CONF = PROJECT / "conf"


def _options() -> list[tuple[str, str]]:
    out = []
    for path in sorted(CONF.rglob("*.yaml")):
        rel = path.relative_to(CONF)
        if rel.parent != Path("."):
            out.append((rel.parent.as_posix(), rel.stem))
    return out


OPTIONS = _options()


def test_every_group_has_options():
    groups = {g for g, _ in OPTIONS}
    assert groups == {
        "dataset",
        "parse",
        "chunk",
        "embed",
        "index/dense",
        "index/sparse",
        "retrieve",
        "rerank",
        "generate",
        "judge",
        "report",
    }
    assert len(OPTIONS) >= 20


@pytest.mark.parametrize(("group", "option"), OPTIONS, ids=[f"{g}={o}" for g, o in OPTIONS])
def test_every_option_composes_and_validates(group, option):
    overrides = [f"{group}={option}"]
    if (group, option) == ("dataset", "beir"):
        overrides.append("dataset.root=/data/mine")
    cfg = validate_all(compose(CONF, overrides))
    section = group.split("/")[0]
    assert set(cfg) == set(SECTIONS)
    if group.startswith("index/"):
        assert getattr(cfg["index"], group.split("/")[1]).method == option
    elif section in {"chunk", "rerank", "judge", "parse"}:
        assert cfg[section].method == option


def test_committed_params_yaml_is_the_composed_default():
    assert (PROJECT / "params.yaml").read_text(encoding="utf-8") == compose_yaml(CONF)


def test_set_overrides_compose_like_dvc_exp_run_s():
    cfg = validate_all(
        compose(
            CONF,
            [
                "retrieve.ef_search=64",
                "index/dense=flat",
                "chunk=recursive",
                "chunk.max_tokens=128",
            ],
        )
    )
    assert cfg["retrieve"].ef_search == 64
    assert cfg["index"].dense.method == "flat"
    assert (cfg["chunk"].method, cfg["chunk"].max_tokens) == ("recursive", 128)


def test_default_values():
    cfg = validate_all(compose(CONF))
    assert cfg["dataset"].root == "../shared/datasets/scifact"
    assert cfg["retrieve"].method == "hybrid_rrf" and cfg["retrieve"].rrf_k == 60
    assert (cfg["index"].dense.m, cfg["index"].dense.ef_construction) == (32, 200)
    assert cfg["generate"].method == "llama_cpp" and cfg["generate"].max_queries == 50


@pytest.mark.parametrize(
    ("section", "raw", "message"),
    [
        ("chunk", {"method": "recursive", "max_tokens": 64, "overlap": 64}, "overlap"),
        ("chunk", {"method": "document", "max_tokens": 10}, "Extra inputs"),
        ("retrieve", {"method": "nearest"}, "does not match any of the expected tags"),
        ("retrieve", {"method": "hybrid_convex", "alpha": 1.5}, "less than or equal to 1"),
        (
            "index",
            {"dense": {"method": "hnsw", "m": 1}, "sparse": {"method": "bm25s"}},
            "greater than 1",
        ),
        ("generate", {"method": "extractive", "max_queries": 0}, "greater than 0"),
    ],
)
def test_invalid_sections_fail_before_compute(section, raw, message):
    with pytest.raises(ConfigError, match=message):
        validate_section(section, raw)


def test_unknown_section_and_missing_sections():
    with pytest.raises(ConfigError, match="unknown config section"):
        validate_section("embedding", {})
    with pytest.raises(ConfigError, match="missing"):
        validate_all({"dataset": {}})


def test_load_section_reads_params_file(tmp_path):
    (tmp_path / "params.yaml").write_text(compose_yaml(CONF, ["retrieve=bm25"]))
    assert load_section("retrieve", tmp_path / "params.yaml").method == "bm25"
    with pytest.raises(ConfigError, match="no 'nope' section"):
        load_section("nope", tmp_path / "params.yaml")


@pytest.mark.parametrize(
    ("overrides", "path"),
    [
        (["chunk=recursive", "+chunk.size=128"], "chunk.size"),
        (["+index.dense.nfiles=3"], "index.dense.nfiles"),
        (["+report.mlflow.size=1"], "report.mlflow.size"),
        (["+size=1"], "size"),
    ],
)
def test_parameters_named_size_or_nfiles_are_rejected_at_any_depth(overrides, path):
    # DVC's run-cache drops such keys from its key (treeverse/dvc#10296): reject them up front
    with pytest.raises(ConfigError, match=rf"parameter name\(s\) {re.escape(path)} not allowed"):
        validate_all(compose(CONF, overrides))


def test_reserved_keys_found_inside_lists_and_by_the_stage_loader(tmp_path):
    from ragrig.config import reserved_key_paths

    assert reserved_key_paths({"a": [{"b": 1}, {"nfiles": 2}], "size": {"size": 0}}) == [
        "a[1].nfiles",
        "size",
        "size.size",
    ]
    params = tmp_path / "params.yaml"
    params.write_text("chunk: {method: recursive, size: 64}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"chunk\.size not allowed"):
        load_section("chunk", params)


def test_no_conf_option_uses_a_reserved_name():
    from ragrig.config import reserved_key_paths

    for path in sorted(CONF.rglob("*.yaml")):
        assert reserved_key_paths(yaml.safe_load(path.read_text(encoding="utf-8"))) == [], path
