"""tune-first-stage chooses on the train split only: poisoning or removing the test qrels changes
nothing; the choice lands in conf/ with its train figures; no train split is one clear error."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from ragrig.cli.app import main
from ragrig.compose.params import compose_yaml
from ragrig.core.config import validate_section
from ragrig.core.errors import ConfigError
from ragrig.tools.tune_first_stage import Tuning, load_split, write_choice

PROJECT = Path(__file__).resolve().parents[2]
FIXTURE = PROJECT / "tests" / "fixtures" / "tiny_beir"
# the fixture's composition: the packaged embedder (SciFact's default is trained on its train
# split, which tune-first-stage refuses to tune with: see the last test)
PARAMS = Path(tempfile.mkdtemp(prefix="ragrig-tune-")) / "params.yaml"
PARAMS.write_text(compose_yaml(PROJECT / "conf", ["dataset=tiny"]), encoding="utf-8")
HEADER = "query-id\tcorpus-id\tscore\n"
# the fixture's judgments, split: queries 1-5 for training, 6-9 for test
TRAIN = "1\td01\t1\n2\td02\t1\n3\td05\t1\n3\td06\t1\n4\td10\t1\n5\td15\t1\n"
TEST = "6\td17\t1\n6\td18\t1\n7\td20\t1\n8\td11\t1\n9\td04\t0\n"
POISONED = "6\td01\t1\n7\td02\t1\n8\td03\t1\n9\td04\t1\n"  # wrong documents, all relevant


def _dataset(tmp_path: Path, test: str | None) -> Path:
    root = tmp_path / "ds"
    shutil.copytree(FIXTURE, root)
    (root / "qrels" / "train.tsv").write_text(HEADER + TRAIN, encoding="utf-8")
    if test is None:
        (root / "qrels" / "test.tsv").unlink()
    else:
        (root / "qrels" / "test.tsv").write_text(HEADER + test, encoding="utf-8")
    return root


def _tune(root: Path, out: Path) -> dict:
    code = main(
        [
            "tune-first-stage",
            "--params",
            str(PARAMS),
            "--dataset-root",
            str(root),
            "--no-write",
            "--quiet",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    data = json.loads(out.read_text())
    return {k: data[k] for k in ("split", "queries", "chosen", "train")}


def test_choice_reads_only_the_train_split(tmp_path):
    clean = _tune(_dataset(tmp_path / "a", TEST), tmp_path / "a.json")
    poisoned = _tune(_dataset(tmp_path / "b", POISONED), tmp_path / "b.json")
    removed = _tune(_dataset(tmp_path / "c", None), tmp_path / "c.json")
    assert clean == poisoned == removed
    assert (clean["split"], clean["queries"]) == ("train", 5)
    # the grid holds the configured and the common BM25 settings, each measured
    points = {(r["k1"], r["b"]) for r in clean["train"]["bm25"]}
    assert {(0.9, 0.4), (1.2, 0.75), (1.5, 0.75)} <= points
    assert clean["chosen"]["k1"] in {0.6, 0.9, 1.2, 1.5, 2.0}


def test_train_queries_are_the_train_split_only(tmp_path):
    _, train = load_split(PARAMS, "train", _dataset(tmp_path, TEST))
    assert train.query_ids == ["1", "2", "3", "4", "5"]
    assert set(train.qrels) == {"1", "2", "3", "4", "5"}


def test_no_train_split_is_one_clear_error(tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"has no train split .*train.tsv missing"):
        load_split(PARAMS, "train", FIXTURE)
    code = main(
        ["tune-first-stage", "--params", str(PARAMS)]
        + ["--dataset-root", str(FIXTURE), "--no-write"]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no train split" in err


def test_write_choice_sets_values_with_train_figures(tmp_path):
    conf = tmp_path / "conf"
    shutil.copytree(PROJECT / "conf", conf)
    result = Tuning(
        split="train",
        n_queries=809,
        bm25=[
            {"k1": 0.9, "b": 0.4, "ndcg@10": 0.60, "recall@100": 0.9, "rr": 0.5},
            {"k1": 1.2, "b": 0.75, "ndcg@10": 0.62, "recall@100": 0.9, "rr": 0.5},
        ],
        rrf=[
            {"rrf_k": 20, "ndcg@10": 0.70, "recall@100": 0.9, "rr": 0.6},
            {"rrf_k": 60, "ndcg@10": 0.69, "recall@100": 0.9, "rr": 0.6},
        ],
        convex=[
            {"alpha": 0.5, "ndcg@10": 0.68, "recall@100": 0.9, "rr": 0.6},
            {"alpha": 0.35, "ndcg@10": 0.71, "recall@100": 0.9, "rr": 0.6},
        ],
        chosen={"k1": 1.2, "b": 0.75, "rrf_k": 20, "alpha": 0.35},
    )
    fp = "ab" * 32
    write_choice(conf, result, "scifact", fp)
    bm25 = (conf / "index/sparse/bm25s.yaml").read_text()
    assert yaml.safe_load(bm25)["k1"] == 1.2 and yaml.safe_load(bm25)["b"] == 0.75
    assert (
        "k1: 1.2  # tune-first-stage on scifact train (809 queries): nDCG@10 0.6200, "
        "0.9/0.4 0.6000" in bm25
    )
    # the fusion settings are recorded as tuned on this corpus, the configured value left null
    # (used elsewhere untuned) and the other corpora's entries kept
    rrf = yaml.safe_load((conf / "retrieve/hybrid_rrf.yaml").read_text())
    assert rrf["rrf_k"] is None and len(rrf["tuned"]) == 2
    assert rrf["tuned"][-1] == {
        "corpus_sha256": fp,
        "value": 20,
        "source": "tune-first-stage on scifact train (809 queries): nDCG@10 0.7000, "
        "rrf_k 60 0.6900",
    }
    convex = yaml.safe_load((conf / "retrieve/hybrid_convex.yaml").read_text())
    assert convex["alpha"] is None and convex["tuned"][-1]["value"] == 0.35
    assert convex["tuned"][-1]["source"].endswith("nDCG@10 0.7100, alpha 0.5 0.6800")
    text = (conf / "retrieve/hybrid_rrf.yaml").read_text()
    write_choice(conf, result, "scifact", fp)  # idempotent: the corpus's entry replaced
    assert (conf / "retrieve/hybrid_rrf.yaml").read_text() == text
    validate_section("retrieve", rrf)  # still a valid section


def test_chunk_vectors_of_another_model_or_corpus_are_refused(tmp_path):
    import numpy as np

    from ragrig.core.errors import DataValidationError
    from ragrig.tools.tune_first_stage import build_corpus

    params = PARAMS
    documents, _ = load_split(params, "train", _dataset(tmp_path, TEST))
    short = tmp_path / "short.npy"
    np.save(short, np.ones((3, 384), dtype=np.float32))
    with pytest.raises(DataValidationError, match="3 vectors for 20 chunks"):
        build_corpus(documents, params, chunk_vectors=short)
    other = tmp_path / "other.npy"
    rng = np.random.default_rng(0)
    np.save(other, rng.standard_normal((20, 384)).astype(np.float32))
    with pytest.raises(DataValidationError, match="to a fresh encoding"):
        build_corpus(documents, params, chunk_vectors=other)
    same = tmp_path / "same.npy"
    first = build_corpus(documents, params)
    np.save(same, first.dense.reconstruct_n(0, 20))
    reused = build_corpus(documents, params, chunk_vectors=same)
    assert reused.n_chunks == 20


def test_paired_deltas_of_a_setting_against_itself_are_zero(tmp_path):
    from ragrig.tools.tune_first_stage import Lanes, build_corpus, paired_deltas

    params = PARAMS
    documents, train = load_split(params, "train", _dataset(tmp_path, TEST))
    lanes = Lanes(build_corpus(documents, params), train, params)
    setting = {"k1": 0.9, "b": 0.4, "rrf_k": 60, "alpha": 0.5}
    out = paired_deltas(lanes, setting, dict(setting), seed=13)
    assert set(out) == {"bm25", "hybrid_rrf", "hybrid_convex"}
    for measures in out.values():
        assert {m: v["delta"] for m, v in measures.items()} == {"ndcg@10": 0, "rr": 0, "p@1": 0}
        assert measures["ndcg@10"]["n"] == 5 and measures["ndcg@10"]["p_value"] == 1.0


def test_evaluate_test_reports_figures_and_paired_deltas_after_choosing(tmp_path, capsys):
    out = tmp_path / "t.json"
    code = main(
        ["tune-first-stage", "--params", str(PARAMS), "--quiet"]
        + ["--dataset-root", str(_dataset(tmp_path, TEST)), "--no-write", "--evaluate-test"]
        + ["--json", str(out)]
    )
    assert code == 0
    data = json.loads(out.read_text())
    assert set(data["test"]) == {"chosen", "before"}
    assert set(data["test_paired_deltas"]) == {"bm25", "hybrid_rrf", "hybrid_convex"}
    assert data["test_paired_deltas"]["bm25"]["ndcg@10"]["n"] == 3  # queries 6-8 (9: no gold)
    assert "paired deltas chosen - before" in capsys.readouterr().out


def test_an_embedder_trained_on_the_train_split_is_refused(tmp_path, capsys):
    params = tmp_path / "params-trained.yaml"  # SciFact's preset: the embedder trained on train
    params.write_text(compose_yaml(PROJECT / "conf", ["+experiment=scifact_trained"]))
    code = main(
        ["tune-first-stage", "--params", str(params)]
        + ["--dataset-root", str(_dataset(tmp_path, TEST)), "--no-write", "--quiet"]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert "data/train_embed/model" in err and "biased" in err and "embed=minilm" in err
