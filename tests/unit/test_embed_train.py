"""The bi-encoder the pipeline adapts (stage train_embed): examples from the train split only
(disjoint from the evaluated queries), BM25-mined hard negatives, deterministic training on a
tiny fixture, embed=trained, and its bad inputs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from ragrig.core.config import load_params, validate_section
from ragrig.core.errors import ConfigError, DataValidationError
from ragrig.train_embed import data as D

PROJECT = Path(__file__).resolve().parents[2]
TINY = PROJECT / "tests" / "fixtures" / "tiny_beir"
# tiny_beir with a train split (its README): t1-t5 are kept; "3" (a test query's id) and "t6"
# (test query 1's text in capitals) must be dropped.
TRAIN_FIXTURE = PROJECT / "tests" / "fixtures" / "tiny_beir_train"


def tiny_cfg(**kw):
    base = {
        "enabled": True,
        "epochs": 1.0,
        "batch_size": 4,
        "max_seq_length": 64,
        "hard_negatives_per_query": 2,
        "mining": {"depth": 5},
        "max_pairs": None,
        "seed": 13,
    }
    return validate_section("train_embed", {**base, **kw})


def sections(root: Path):
    dataset = validate_section("dataset", {"name": "tiny_train", "root": str(root)})
    parse = validate_section("parse", {"method": "beir"})
    return dataset, parse


def test_training_and_evaluated_queries_are_disjoint():
    from ragrig.dataset.beir import load_beir
    from ragrig.train_embed.train import load_training_examples
    from ragrig.training.split import check_disjoint

    dataset, parse = sections(TRAIN_FIXTURE)
    stats: dict = {}
    examples, train = load_training_examples(tiny_cfg(), dataset, parse, stats)
    evaluated = load_beir(TRAIN_FIXTURE, "test")
    trained_on = {e.qid for e in examples}
    assert trained_on == {"t1", "t2", "t3", "t4", "t5"}
    assert stats["dropped_eval_overlap"] == ["3", "t6"]  # by id, by case-folded text
    assert not trained_on & set(evaluated.queries)
    texts = {" ".join(t.casefold().split()) for t in evaluated.queries.values()}
    assert not {" ".join(e.query.casefold().split()) for e in examples} & texts
    leak = D.Example("1", "d01", "whatever", "text", (), (), ())
    with pytest.raises(DataValidationError, match=r"hold 1 evaluated query \('1'\)$"):
        check_disjoint([*examples, leak], train)


def test_examples_hold_the_positive_and_bm25_hard_negatives():
    from ragrig.train_embed.train import load_training_examples

    dataset, parse = sections(TRAIN_FIXTURE)
    examples, _ = load_training_examples(tiny_cfg(), dataset, parse)
    t1 = [e for e in examples if e.qid == "t1"]
    assert [e.doc_id for e in t1] == ["d01"]
    # BM25 hits of "Phobos orbits Mars closer than Deimos." other than d01: Mars documents
    assert "d01" not in t1[0].negative_ids and "d02" in t1[0].negative_ids
    assert t1[0].positive.startswith("Mars moons. Mars has two moons")  # parse's separator
    for e in examples:  # exactly k negatives, none judged relevant; BM25 ones first
        assert len(e.negatives) == len(e.negative_ids) == 2 and e.doc_id not in e.negative_ids
        kinds = list(e.negative_kinds)
        assert kinds == sorted(kinds)  # "bm25_negative" < "random_negative"
    cols = D.as_columns(examples)
    assert list(cols) == ["anchor", "positive", "negative_1", "negative_2"]
    assert len({len(v) for v in cols.values()}) == 1


def test_a_query_short_of_bm25_hits_is_topped_up_with_counted_random_negatives():
    from ragrig.training.split import TrainingQueries

    train = TrainingQueries({"q": "x"}, {"q": ["a"]}, [], frozenset(), frozenset())
    docs = {"a": "A", "b": "B", "c": "C", "d": "D"}
    (ex,) = D.build_examples(train, docs, {"q": ["c"]}, per_query=3, seed=1)
    assert ex.negative_ids[0] == "c" and sorted(ex.negative_ids) == ["b", "c", "d"]
    assert ex.negative_kinds == ("bm25_negative", "random_negative", "random_negative")
    with pytest.raises(DataValidationError, match="only 3 documents not judged relevant"):
        D.build_examples(train, docs, {"q": ["c"]}, per_query=4, seed=1)


def test_evaluating_the_train_split_is_refused():
    with pytest.raises(ConfigError, match=r"train_embed.split 'train' is the evaluated split"):
        D.training_queries(TRAIN_FIXTURE, "tiny", "train", "train")


def test_no_train_split_asks_for_a_pretrained_embedder(tmp_path):
    from ragrig.train_embed.train import run_stage

    dataset, parse = sections(TINY)
    with pytest.raises(DataValidationError) as err:
        run_stage(tiny_cfg(), dataset, parse, tmp_path / "out")
    msg = str(err.value)
    assert msg.startswith("dataset 'tiny_train' has no train split (")
    assert "embed=minilm" in msg and "train_embed.enabled=false" in msg and "\n" not in msg
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, dict]:
    from ragrig.train_embed.train import run_stage

    dataset, parse = sections(TRAIN_FIXTURE)
    out = tmp_path_factory.mktemp("trained") / "train_embed"
    return out, run_stage(tiny_cfg(), dataset, parse, out, threads=2)


def test_training_is_deterministic_and_changes_the_weights(trained, tmp_path, monkeypatch, capsys):
    from ragrig.train_embed.train import run_stage
    from ragrig.training.fit import weights_sha256

    out, manifest = trained
    assert manifest["trained"] is True
    assert manifest["examples"] == 5 and manifest["queries_in_examples"] == 5
    assert manifest["negatives"]["bm25"] + manifest["negatives"]["random"] == 10
    assert manifest["weights_sha256"] == weights_sha256(out / "model")
    assert manifest["weights_sha256"] != manifest["base_model"]["weights_sha256"]
    assert sorted(p.name for p in out.iterdir()) == ["examples.jsonl", "manifest.json", "model"]
    rows = [json.loads(x) for x in (out / "examples.jsonl").read_text().splitlines()]
    assert sorted(r["qid"] for r in rows) == ["t1", "t2", "t3", "t4", "t5"]
    dataset, parse = sections(TRAIN_FIXTURE)
    monkeypatch.setenv("RAGRIG_PROGRESS", "1")  # the training's step bar, drawn as on a terminal
    capsys.readouterr()
    again = run_stage(tiny_cfg(), dataset, parse, tmp_path / "again", threads=2)
    drawn = capsys.readouterr().err
    assert re.search(r"train_embed training: 100%.* (\d+)/\1 ", drawn), drawn[-500:]
    assert again["weights_sha256"] == manifest["weights_sha256"]  # the bar changes nothing
    other = run_stage(tiny_cfg(seed=14), dataset, parse, tmp_path / "other", threads=2)
    assert other["weights_sha256"] != manifest["weights_sha256"]


def test_embed_trained_loads_and_fingerprints_the_trained_model(trained):
    from ragrig.embed import make_embedder

    out, manifest = trained
    cfg = validate_section(
        "embed", {"method": "sentence_transformers", "model": str(out / "model")}
    )
    embedder = make_embedder(cfg)
    fp = embedder.fingerprint()
    assert fp["model"]["weights_sha256"] == manifest["weights_sha256"]
    vecs = embedder.encode(["Phobos orbits Mars.", "Vaccination prevents measles."])
    assert vecs.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    base = make_embedder(validate_section("embed", {"method": "sentence_transformers"}))
    assert not np.allclose(
        vecs, base.encode(["Phobos orbits Mars.", "Vaccination prevents measles."])
    )


def test_switched_off_output_is_refused_with_its_reason(tmp_path):
    from ragrig.embed import make_embedder
    from ragrig.train_embed.train import run_stage

    dataset, parse = sections(TRAIN_FIXTURE)
    manifest = run_stage(tiny_cfg(enabled=False), dataset, parse, tmp_path / "off")
    assert manifest["trained"] is False
    assert sorted(p.name for p in (tmp_path / "off").iterdir()) == ["manifest.json"]
    cfg = validate_section(
        "embed", {"method": "sentence_transformers", "model": str(tmp_path / "off" / "model")}
    )
    with pytest.raises(ConfigError, match="holds no trained model .*enabled is false"):
        make_embedder(cfg)


def test_scifact_trains_the_embedder_in_its_preset_and_the_default_keeps_the_packaged_one():
    from ragrig.compose.params import compose

    params = load_params(PROJECT / "params.yaml")
    cfg = validate_section("train_embed", params["train_embed"])
    assert params["dataset"]["name"] == "scifact"
    # the default: no training (it would cost more than the inference path), the convex hybrid
    assert cfg.enabled is False
    assert params["embed"]["model"] == "packaged:all-MiniLM-L6-v2"
    assert params["retrieve"]["method"] == "hybrid_convex"
    # the preset: SciFact has a train split, the embedder is adapted on it
    best = compose(PROJECT / "conf", ["+experiment=scifact_trained"])
    assert best["train_embed"]["enabled"] is True and best["train_embed"]["split"] == "train"
    assert best["embed"]["model"] == "data/train_embed/model"
    assert best["retrieve"]["method"] == "hybrid_convex"
    # a dataset without a train split (the fixture) keeps the packaged embedder, training off
    tiny = compose(PROJECT / "conf", ["dataset=tiny"])
    assert tiny["train_embed"]["enabled"] is False
    assert tiny["embed"]["model"] == "packaged:all-MiniLM-L6-v2"
    assert tiny["retrieve"]["method"] == "hybrid_rrf"
    # a command-line choice still wins over the dataset's
    chosen = compose(PROJECT / "conf", ["embed=minilm", "train_embed.enabled=false"])
    assert (chosen["embed"]["model"], chosen["train_embed"]["enabled"]) == (
        "packaged:all-MiniLM-L6-v2",
        False,
    )


def test_downstream_changes_never_retrain_and_embed_reads_the_trained_folder():
    import yaml

    stages = yaml.safe_load((PROJECT / "dvc.yaml").read_text())["stages"]
    assert stages["train_embed"]["params"] == ["train_embed", "dataset", "parse", "runtime.threads"]
    assert "data/train_embed" in stages["embed"]["deps"]
    assert stages["train_embed"]["outs"] == ["data/train_embed"]


def test_params_check_asks_for_the_training_stage():
    from ragrig.compose.params import compose, validate_composition

    conf = PROJECT / "conf"
    with pytest.raises(ConfigError, match="embed=trained reads the model the train_embed"):
        validate_composition(compose(conf, ["embed=trained", "train_embed.enabled=false"]))
    with pytest.raises(ConfigError, match="embed=trained reads the model the train_embed"):
        validate_composition(compose(conf, ["dataset=tiny", "embed=trained"]))
    validate_composition(compose(conf, ["embed=trained", "train_embed.enabled=true"]))
    validate_composition(compose(conf))  # SciFact's default: the packaged embedder
    validate_composition(compose(conf, ["+experiment=scifact_trained"]))  # trained, training on


SCIFACT = PROJECT.parent / "shared" / "datasets" / "scifact"


@pytest.mark.skipif(not (SCIFACT / "qrels" / "train.tsv").exists(), reason="SciFact not present")
def test_scifact_training_examples_are_disjoint_from_its_test_queries():
    from ragrig.dataset.beir import load_qrels, load_queries

    train = D.training_queries(SCIFACT, "scifact", "train", "test")
    test_qids = set(load_qrels(SCIFACT / "qrels" / "test.tsv"))
    texts = load_queries(SCIFACT / "queries.jsonl")
    test_texts = {texts[q].casefold().strip() for q in test_qids}
    assert len(test_qids) == 300 and len(train.queries) == 807
    assert train.dropped_eval_overlap == ["1291", "871"]  # test claims' texts repeated in train
    assert not set(train.queries) & test_qids
    assert not {t.casefold().strip() for t in train.queries.values()} & test_texts
    assert sum(len(p) for p in train.positives.values()) == 917  # 919 judgments less 2 dropped
