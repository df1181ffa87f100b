"""Config: every option of every group composes and validates; params.yaml is the composed default."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ragrig.compose.params import compose, compose_yaml, validate_composition
from ragrig.core.config import SECTIONS, load_section, validate_all, validate_section
from ragrig.core.errors import ConfigError

from .conftest import PROJECT

CONF = PROJECT / "conf"


def _options() -> list[tuple[str, str]]:
    out = []
    for path in sorted(CONF.rglob("*.yaml")):
        rel = path.relative_to(CONF)
        # conf/experiment/ holds sweep presets, not options (tests/unit/test_sweep_plan.py);
        # conf/hydra/ Hydra's own settings (launcher presets: tests/unit/test_sweep_launchers.py)
        if rel.parent != Path(".") and rel.parts[0] not in ("experiment", "hydra"):
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
        "filters",
        "rerank",
        "generate",
        "train_verifier",
        "train_rerank",
        "train_embed",
        "judge",
        "report",
        "report/mlflow",
        "storage",
    }
    assert len(OPTIONS) >= 20


@pytest.mark.parametrize(("group", "option"), OPTIONS, ids=[f"{g}={o}" for g, o in OPTIONS])
def test_every_option_composes_and_validates(group, option):
    overrides = [f"{group}={option}"]
    if (group, option) == ("dataset", "beir"):
        overrides.append("dataset.root=/data/mine")
    if (group, option) == ("generate", "openai_http"):  # a paid model needs a dated price
        overrides += [f"+report.prices.gpt-4o-mini.{k}_per_mtok=1.0" for k in ("input", "output")]
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
    # SciFact's first stage (conf/dataset/scifact.yaml): the packaged embedder and the convex
    # hybrid, alpha tuned on the train claims (the adapted embedder: +experiment=scifact_trained),
    # recorded for SciFact's corpus only; other datasets RRF, whose k tuned on SciFact applies
    # to SciFact alone (ragrig.retrieve.tuning: elsewhere the untuned k=60)
    scifact = "3ff41cf0930701c6335383a86e188d0d62d63e27d1db0156fd36bd253707c8af"
    assert cfg["retrieve"].method == "hybrid_convex" and cfg["retrieve"].alpha is None
    assert [(t.corpus_sha256, t.value) for t in cfg["retrieve"].tuned] == [(scifact, 0.4)]
    assert (cfg["embed"].model, cfg["train_embed"].enabled) == ("packaged:all-MiniLM-L6-v2", False)
    tiny = validate_all(compose(CONF, ["dataset=tiny"]))
    assert tiny["retrieve"].method == "hybrid_rrf" and tiny["retrieve"].rrf_k is None
    assert [(t.corpus_sha256, t.value) for t in tiny["retrieve"].tuned] == [(scifact, 5)]
    assert (cfg["index"].dense.m, cfg["index"].dense.ef_construction) == (32, 200)
    assert cfg["generate"].method == "torch_gguf" and cfg["generate"].max_queries == 50


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
    from ragrig.core.config import reserved_key_paths

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
    from ragrig.core.config import reserved_key_paths

    for path in sorted(CONF.rglob("*.yaml")):
        assert reserved_key_paths(yaml.safe_load(path.read_text(encoding="utf-8"))) == [], path


def test_generator_without_a_price_fails_at_composition_before_any_stage(tmp_path):
    from ragrig.compose.params import write_params

    with pytest.raises(
        ConfigError,
        match=r"no price for model 'gpt-4o-mini': add 'gpt-4o-mini' under report\.prices",
    ):
        validate_composition(compose(CONF, ["generate=openai_http"]))
    out = tmp_path / "params.yaml"
    out.write_text("untouched\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="no price for model 'gpt-4o-mini'"):
        write_params(CONF, out, ["generate=openai_http"])
    assert out.read_text(encoding="utf-8") == "untouched\n"  # nothing written


def test_cli_params_write_refuses_a_missing_price_in_one_line(tmp_path, capsys):
    from ragrig.cli import app as cli

    out = tmp_path / "params.yaml"
    code = cli.main(
        ["params", "write", "generate=openai_http", "--conf", str(CONF), "--output", str(out)]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and not out.exists()
    assert len(err) == 1 and err[0].startswith("ragrig: error: no price for model 'gpt-4o-mini'")


def test_report_k_beyond_retrieve_depth_is_refused():
    with pytest.raises(ConfigError, match=r"report.k_values \[100\] exceed retrieve.depth 50"):
        validate_composition(compose(CONF, ["retrieve.depth=50"]))
    with pytest.raises(ConfigError, match="generate.n_passages 5 exceeds retrieve.depth 4"):
        validate_composition(
            compose(CONF, ["retrieve.depth=4", "generate.n_passages=5", "report.k_values=[1]"])
        )


def test_verifier_judge_needs_its_training_switched_on():
    # by default judge=verifier reads the verifier that ships with ragrig: no training stage
    shipped = validate_composition(compose(CONF, ["judge=verifier"]))
    assert shipped["judge"].model == "shipped" and not shipped["train_verifier"].enabled
    # the train_verifier stage's output (model: null) needs the stage switched on
    with pytest.raises(ConfigError, match=r"judge=verifier .* add train_verifier\.enabled=true"):
        validate_composition(compose(CONF, ["judge=verifier", "judge.model=null"]))
    ok = validate_composition(
        compose(CONF, ["judge=verifier", "judge.model=null", "train_verifier.enabled=true"])
    )
    assert ok["train_verifier"].enabled and ok["judge"].method == "verifier"
    # a model folder given directly needs no training stage
    given = validate_composition(compose(CONF, ["judge=verifier", "judge.model=/models/v"]))
    assert not given["train_verifier"].enabled


def test_claim_level_correctness_reads_the_reports_reference_column():
    on = ["+judge.correctness={reference_column: answer}"]
    with pytest.raises(ConfigError, match="judge.correctness.reference_column 'answer' is not "):
        validate_composition(compose(CONF, on))
    ok = validate_composition(compose(CONF, [*on, "report.scorecard.reference_column=answer"]))
    assert ok["judge"].correctness.reference_column == "answer"
    assert ok["judge"].correctness.model == "shipped"
    assert ok["report"].scorecard.claim_level_min_tokens == 8


def test_an_unknown_key_in_params_write_is_one_line_naming_the_fix():
    with pytest.raises(ConfigError) as info:
        compose_yaml(CONF, ["generate.nope=1"])
    assert str(info.value) == (
        "Could not override 'generate.nope'. To append to your config use +generate.nope=1 "
        "(Key 'nope' is not in struct)"
    )
