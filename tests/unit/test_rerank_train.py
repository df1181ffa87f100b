"""The reranker trained by the pipeline: training pairs from the train split only (disjoint from
the evaluated queries), BM25-mined negatives, deterministic training on a tiny fixture, the
`trained` rerank method, and its bad inputs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ragrig.core.config import load_params, validate_section
from ragrig.core.errors import ConfigError, DataValidationError
from ragrig.rerank import make_reranker, rerank_run
from ragrig.train_rerank import data as D

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
        "max_length": 64,
        "negatives_per_query": 2,
        "mining": {"depth": 5},
        "max_pairs": None,
        "seed": 13,
    }
    return validate_section("train_rerank", {**base, **kw})


@pytest.fixture(scope="module")
def train_root() -> Path:
    return TRAIN_FIXTURE


def sections(root: Path):
    dataset = validate_section("dataset", {"name": "tiny_train", "root": str(root)})
    parse = validate_section("parse", {"method": "beir"})
    return dataset, parse


def test_training_and_evaluated_queries_are_disjoint(train_root):
    from ragrig.dataset.beir import load_beir
    from ragrig.train_rerank.train import load_training_pairs

    dataset, parse = sections(train_root)
    stats: dict = {}
    pairs, train = load_training_pairs(tiny_cfg(), dataset, parse, stats)
    evaluated = load_beir(train_root, "test")
    trained_on = {p.qid for p in pairs}
    assert trained_on == {"t1", "t2", "t3", "t4", "t5"}
    assert stats["dropped_eval_overlap"] == ["3", "t6"]  # by id, by case-folded text
    assert not trained_on & set(evaluated.queries)
    texts = {" ".join(t.casefold().split()) for t in evaluated.queries.values()}
    assert not {" ".join(p.query.casefold().split()) for p in pairs} & texts
    # a pair list holding an evaluated query is refused
    leak = D.Pair("1", "d01", "positive", "whatever", "text", 1)
    with pytest.raises(DataValidationError, match=r"hold 1 evaluated query \('1'\)$"):
        D.check_disjoint([*pairs, leak], train)


def test_pairs_have_positives_and_bm25_negatives(train_root):
    from ragrig.train_rerank.train import load_training_pairs

    dataset, parse = sections(train_root)
    pairs, _ = load_training_pairs(tiny_cfg(), dataset, parse)
    by_q = {q: [p for p in pairs if p.qid == q] for q in {p.qid for p in pairs}}
    t1 = by_q["t1"]
    assert [p.doc_id for p in t1 if p.label == 1] == ["d01"]
    negs = [p.doc_id for p in t1 if p.label == 0]
    # BM25 hits of "Phobos orbits Mars closer than Deimos." other than d01: the Mars documents
    assert len(negs) <= 2 and "d01" not in negs and "d02" in negs
    assert all(p.kind == "bm25_negative" for p in pairs if p.label == 0)
    assert t1[0].passage.startswith("Mars moons. Mars has two moons")  # parse's title separator


def test_evaluating_the_train_split_is_refused(train_root):
    with pytest.raises(ConfigError, match="is the evaluated split"):
        D.training_queries(train_root, "tiny", "train", "train")


def test_no_train_split_asks_for_a_pretrained_reranker_or_identity(tmp_path):
    from ragrig.train_rerank.train import run_stage

    dataset, parse = sections(TINY)
    with pytest.raises(DataValidationError) as err:
        run_stage(tiny_cfg(), dataset, parse, tmp_path / "out")
    msg = str(err.value)
    assert "has no train split" in msg and "rerank=cross_encoder" in msg
    assert "rerank=identity" in msg and "\n" not in msg
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def trained(train_root, tmp_path_factory) -> tuple[Path, dict]:
    from ragrig.train_rerank.train import run_stage

    dataset, parse = sections(train_root)
    out = tmp_path_factory.mktemp("trained") / "train_rerank"
    return out, run_stage(tiny_cfg(), dataset, parse, out, threads=2)


def test_training_is_deterministic(trained, train_root, tmp_path):
    from ragrig.train_rerank.train import run_stage, weights_sha256

    out, manifest = trained
    assert manifest["trained"] is True
    assert manifest["labels"]["positive"] == 5 and manifest["queries_in_pairs"] == 5
    assert manifest["weights_sha256"] == weights_sha256(out / "model")
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "model", "pairs.jsonl"]
    dataset, parse = sections(train_root)
    again = run_stage(tiny_cfg(), dataset, parse, tmp_path / "again", threads=2)
    assert again["weights_sha256"] == manifest["weights_sha256"]
    other = run_stage(tiny_cfg(seed=14), dataset, parse, tmp_path / "other", threads=2)
    assert other["weights_sha256"] != manifest["weights_sha256"]


def test_trained_method_reranks_with_the_trained_model(trained):
    out, manifest = trained
    reranker = make_reranker(validate_section("rerank", {"method": "trained", "model": str(out)}))
    assert reranker.model.max_length == 64  # the training length when max_length is unset
    run = pd.DataFrame(
        {
            "qid": ["q"] * 3,
            "doc_id": ["a", "b", "c"],
            "chunk_id": ["a#0", "b#0", "c#0"],
            "score": [3.0, 2.0, 1.0],
            "rank": [1, 2, 3],
        }
    )
    text = {"a#0": "dogs bark", "b#0": "statins lower cholesterol", "c#0": "glaciers melt"}
    new, latency = rerank_run(run, {"q": "statins"}, text, reranker, depth=3, progress=False)
    assert sorted(new["doc_id"]) == ["a", "b", "c"] and list(new["rank"]) == [1, 2, 3]
    assert list(new["score"]) == sorted(new["score"], reverse=True)
    assert len(latency) == 1 and latency["latency_ms"].iloc[0] > 0


def test_shorter_candidate_list_than_depth_is_not_padded(trained):
    out, _ = trained
    reranker = make_reranker(
        validate_section("rerank", {"method": "trained", "model": str(out), "depth": 50})
    )
    seen: list[int] = []
    inner = reranker.rerank

    def spy(query, cands):
        seen.append(len(cands))
        return inner(query, cands)

    reranker.rerank = spy
    run = pd.DataFrame(
        {
            "qid": ["q", "q", "r"],
            "doc_id": ["a", "b", "a"],
            "chunk_id": ["a#0", "b#0", "a#0"],
            "score": [2.0, 1.0, 1.0],
            "rank": [1, 2, 1],
        }
    )
    text = {"a#0": "dogs bark", "b#0": "cats purr"}
    new, latency = rerank_run(run, {"q": "cats", "r": "dogs"}, text, reranker, 50, progress=False)
    assert seen == [2, 1]
    assert new.groupby("qid").size().to_dict() == {"q": 2, "r": 1}
    assert list(latency["qid"]) == ["q", "r"]


def test_switched_off_output_is_refused_with_its_reason(train_root, tmp_path):
    from ragrig.train_rerank.train import run_stage

    dataset, parse = sections(train_root)
    manifest = run_stage(tiny_cfg(enabled=False), dataset, parse, tmp_path / "off")
    assert manifest["trained"] is False
    assert sorted(p.name for p in (tmp_path / "off").iterdir()) == ["manifest.json"]
    cfg = validate_section("rerank", {"method": "trained", "model": str(tmp_path / "off")})
    with pytest.raises(ConfigError, match="holds no trained model .*enabled is false"):
        make_reranker(cfg)


def test_unknown_model_name_lists_the_available_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    cfg = validate_section(
        "rerank", {"method": "cross_encoder", "model": "no-such-org/no-such-reranker"}
    )
    with pytest.raises(ConfigError) as err:
        make_reranker(cfg)
    msg = str(err.value)
    assert "unknown cross-encoder 'no-such-org/no-such-reranker'" in msg
    assert "available: rerank=trained" in msg and "rerank=identity" in msg
    cfg = validate_section("rerank", {"method": "cross_encoder", "model": "packaged:nope"})
    with pytest.raises(
        ConfigError, match=r"no packaged model 'nope'; known: \[.*'all-MiniLM-L6-v2'"
    ):
        make_reranker(cfg)
    with pytest.raises(KeyError, match=r"no reranker named 'bogus'; known: \['cross_encoder', "):
        make_reranker(type("Cfg", (), {"method": "bogus"})())
    cfg = validate_section("rerank", {"method": "trained", "model": str(tmp_path / "nope")})
    with pytest.raises(ConfigError, match="is not a train_rerank output"):
        make_reranker(cfg)


def test_params_carry_the_train_rerank_section():
    params = load_params(PROJECT / "params.yaml")
    cfg = validate_section("train_rerank", params["train_rerank"])
    assert cfg.enabled is False and cfg.split == "train"
    assert params["rerank"]["method"] == "identity"


def test_rerank_depth_is_not_a_training_parameter():
    """dvc.yaml: train_rerank's params hold no rerank key (a depth change never retrains);
    the rerank stage reads the trained folder."""
    import yaml

    stages = yaml.safe_load((PROJECT / "dvc.yaml").read_text())["stages"]
    params = stages["train_rerank"]["params"]
    assert not [p for p in params if p == "rerank" or str(p).startswith("rerank.")]
    assert params == ["train_rerank", "dataset", "parse", "runtime.threads"]
    assert "data/train_rerank" in stages["rerank"]["deps"]


def test_params_check_asks_for_the_training_stage():
    from ragrig.compose.params import compose, validate_composition

    with pytest.raises(ConfigError, match="rerank=trained reads the model the train_rerank"):
        validate_composition(compose(PROJECT / "conf", ["rerank=trained"]))
    validate_composition(compose(PROJECT / "conf", ["rerank=trained", "train_rerank.enabled=true"]))


SCIFACT = PROJECT.parent / "shared" / "datasets" / "scifact"


@pytest.mark.skipif(not (SCIFACT / "qrels" / "train.tsv").exists(), reason="SciFact not present")
def test_scifact_training_queries_are_disjoint_from_its_test_queries():
    from ragrig.dataset.beir import load_qrels, load_queries

    train = D.training_queries(SCIFACT, "scifact", "train", "test")
    test_qids = set(load_qrels(SCIFACT / "qrels" / "test.tsv"))
    texts = load_queries(SCIFACT / "queries.jsonl")
    test_texts = {texts[q].casefold().strip() for q in test_qids}
    assert len(test_qids) == 300 and len(train.queries) == 807
    assert train.dropped_eval_overlap == ["1291", "871"]  # test claims' texts repeated in train
    assert not set(train.queries) & test_qids
    assert not {t.casefold().strip() for t in train.queries.values()} & test_texts
