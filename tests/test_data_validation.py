"""The BEIR loader's bad-input contract, the claims file, the parse stage wrapper and atomic_dir."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ragrig.data.beir import load_beir
from ragrig.data.claims import NOT_ENOUGH_INFO, claim_label, load_claims
from ragrig.errors import DataValidationError
from ragrig.io import atomic_dir

PROJECT = Path(__file__).resolve().parents[1]
FIXTURE = PROJECT / "tests" / "fixtures" / "tiny_beir"
PYTHON = sys.executable


@pytest.fixture
def ds(tmp_path: Path) -> Path:
    """A private, writable copy of the tiny fixture."""
    root = tmp_path / "tiny"
    shutil.copytree(FIXTURE, root)
    return root


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _append(path: Path, line: str) -> None:
    _write_lines(path, [*_lines(path), line])


def _replace_record(path: Path, record_id: str, record: dict) -> int:
    """Replace the JSONL record with `_id` == record_id; return its 1-based line number."""
    lines = _lines(path)
    for i, line in enumerate(lines):
        if json.loads(line)["_id"] == record_id:
            lines[i] = json.dumps(record)
            _write_lines(path, lines)
            return i + 1
    raise AssertionError(f"{record_id} not in {path}")


# --- the good fixture --------------------------------------------------------------------------


def test_fixture_loads(ds: Path) -> None:
    data = load_beir(ds, "test")
    assert len(data.corpus) == 20
    assert sorted(data.queries, key=int) == [str(i) for i in range(1, 10)]
    assert "90" not in data.queries  # in queries.jsonl but not judged in the test split
    assert data.qrels["9"] == {"d04": 0}  # only a relevance-0 judgment
    assert data.qrels["3"] == {"d05": 1, "d06": 1}
    assert sum(len(v) for v in data.qrels.values()) == 11
    assert data.corpus["d01"]["title"] == "Mars moons"
    assert data.corpus_path == ds / "corpus.jsonl"


def test_gzip_corpus_loads_identically(ds: Path) -> None:
    plain = load_beir(ds, "test")
    with open(ds / "corpus.jsonl", "rb") as src, gzip.open(ds / "corpus.jsonl.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    (ds / "corpus.jsonl").unlink()
    zipped = load_beir(ds, "test")
    assert zipped.corpus_path == ds / "corpus.jsonl.gz"
    assert zipped.corpus == plain.corpus
    assert zipped.queries == plain.queries
    assert zipped.qrels == plain.qrels


def test_missing_root_is_reported(tmp_path: Path) -> None:
    with pytest.raises(DataValidationError, match="is not a folder"):
        load_beir(tmp_path / "nowhere", "test")


# --- corpus -----------------------------------------------------------------------------------


def test_malformed_json_names_file_and_line(ds: Path) -> None:
    corpus = ds / "corpus.jsonl"
    lines = _lines(corpus)
    lines[4] = '{"_id": "d05", "title": "cut off", "text": '
    _write_lines(corpus, lines)
    with pytest.raises(DataValidationError) as exc:
        load_beir(ds, "test")
    assert f"{corpus}:5:" in str(exc.value)
    assert "malformed JSON" in str(exc.value)


def test_non_object_line_is_rejected(ds: Path) -> None:
    corpus = ds / "corpus.jsonl"
    lines = _lines(corpus)
    lines[1] = '["d02", "a list, not an object"]'
    _write_lines(corpus, lines)
    with pytest.raises(DataValidationError, match=r"corpus\.jsonl:2: expected a JSON object"):
        load_beir(ds, "test")


def test_duplicate_document_id(ds: Path) -> None:
    _append(ds / "corpus.jsonl", json.dumps({"_id": "d03", "title": "again", "text": "Twice."}))
    with pytest.raises(DataValidationError) as exc:
        load_beir(ds, "test")
    msg = str(exc.value)
    assert "1 duplicate document id(s)" in msg
    assert "'d03' (lines [3, 21])" in msg


def test_empty_document_text(ds: Path) -> None:
    _replace_record(ds / "corpus.jsonl", "d07", {"_id": "d07", "title": "", "text": "   "})
    with pytest.raises(DataValidationError) as exc:
        load_beir(ds, "test")
    assert "1 document(s) with empty text" in str(exc.value)
    assert "'d07'" in str(exc.value)


def test_document_with_title_only_is_accepted(ds: Path) -> None:
    _replace_record(ds / "corpus.jsonl", "d07", {"_id": "d07", "title": "Only a title", "text": ""})
    assert load_beir(ds, "test").corpus["d07"] == {"title": "Only a title", "text": ""}


def test_empty_corpus(ds: Path) -> None:
    (ds / "corpus.jsonl").write_text("\n\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match="the corpus is empty"):
        load_beir(ds, "test")


def test_no_corpus_file(ds: Path) -> None:
    (ds / "corpus.jsonl").unlink()
    with pytest.raises(DataValidationError, match=r"no corpus\.jsonl or corpus\.jsonl\.gz"):
        load_beir(ds, "test")


def test_record_without_id(ds: Path) -> None:
    _append(ds / "corpus.jsonl", json.dumps({"title": "no id", "text": "Nobody knows me."}))
    with pytest.raises(DataValidationError, match=r"corpus\.jsonl:21: record has no '_id'"):
        load_beir(ds, "test")


# --- queries ----------------------------------------------------------------------------------


def test_duplicate_query_id(ds: Path) -> None:
    _append(ds / "queries.jsonl", json.dumps({"_id": "4", "text": "A second query 4."}))
    with pytest.raises(DataValidationError) as exc:
        load_beir(ds, "test")
    msg = str(exc.value)
    assert "1 duplicate query id(s)" in msg
    assert "'4' (lines [4, 11])" in msg


def test_empty_query_text(ds: Path) -> None:
    _replace_record(ds / "queries.jsonl", "2", {"_id": "2", "text": "", "metadata": {}})
    with pytest.raises(DataValidationError) as exc:
        load_beir(ds, "test")
    assert "1 query(ies) with empty text" in str(exc.value)
    assert "'2'" in str(exc.value)


# --- qrels ------------------------------------------------------------------------------------


def test_qrels_unknown_document(ds: Path) -> None:
    _append(ds / "qrels" / "test.tsv", "1\td99\t1")
    with pytest.raises(DataValidationError) as exc:
        load_beir(ds, "test")
    assert "1 unknown document id(s): ['d99']" in str(exc.value)


def test_qrels_unknown_query(ds: Path) -> None:
    _append(ds / "qrels" / "test.tsv", "77\td01\t1")
    with pytest.raises(DataValidationError) as exc:
        load_beir(ds, "test")
    assert "1 unknown query id(s): ['77']" in str(exc.value)


def test_qrels_non_integer_score(ds: Path) -> None:
    qrels = ds / "qrels" / "test.tsv"
    lines = _lines(qrels)
    lines[1] = "1\td01\t0.5"
    _write_lines(qrels, lines)
    with pytest.raises(DataValidationError) as exc:
        load_beir(ds, "test")
    assert f"{qrels}:2: score '0.5' is not an integer" in str(exc.value)


def test_qrels_wrong_field_count(ds: Path) -> None:
    _append(ds / "qrels" / "test.tsv", "1\td01")
    with pytest.raises(
        DataValidationError, match=r"test\.tsv:13: expected 3 tab-separated fields, got 2"
    ):
        load_beir(ds, "test")


def test_qrels_duplicate_judgment(ds: Path) -> None:
    _append(ds / "qrels" / "test.tsv", "1\td01\t0")
    with pytest.raises(DataValidationError) as exc:
        load_beir(ds, "test")
    assert "duplicate (query, document) judgments: [('1', 'd01')]" in str(exc.value)


def test_missing_split(ds: Path) -> None:
    with pytest.raises(DataValidationError, match=r"qrels file not found: .*dev\.tsv"):
        load_beir(ds, "dev")


# --- claims -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("evidence", "label"),
    [
        ({"d1": [{"sentences": [0], "label": "SUPPORT"}]}, "SUPPORT"),
        ({"d1": [{"sentences": [0], "label": "CONTRADICT"}]}, "CONTRADICT"),
        (
            {
                "d1": [{"sentences": [0], "label": "SUPPORT"}],
                "d2": [{"sentences": [1], "label": "SUPPORT"}],
            },
            "SUPPORT",
        ),
        ({}, NOT_ENOUGH_INFO),
        ({"d1": []}, NOT_ENOUGH_INFO),
        (
            {
                "d1": [{"sentences": [0], "label": "SUPPORT"}],
                "d2": [{"sentences": [2], "label": "CONTRADICT"}],
            },
            "MIXED",
        ),
    ],
)
def test_claim_label(evidence: dict, label: str) -> None:
    assert claim_label(evidence) == label


def test_load_claims_fixture() -> None:
    claims = load_claims([FIXTURE / "original" / "claims_dev.jsonl"])
    assert sorted(claims, key=int) == [str(i) for i in range(1, 10)]
    labels = {cid: c["label"] for cid, c in claims.items()}
    assert labels == {
        "1": "SUPPORT",
        "2": "CONTRADICT",
        "3": "SUPPORT",
        "4": "SUPPORT",
        "5": "SUPPORT",
        "6": NOT_ENOUGH_INFO,
        "7": "CONTRADICT",
        "8": NOT_ENOUGH_INFO,
        "9": NOT_ENOUGH_INFO,
    }
    assert claims["1"]["claim"] == "Mars has two moons named Phobos and Deimos."


def test_duplicate_claim_id_across_files(tmp_path: Path) -> None:
    second = tmp_path / "claims_train.jsonl"
    second.write_text(
        json.dumps({"id": 10, "claim": "New claim.", "evidence": {}})
        + "\n"
        + json.dumps({"id": 3, "claim": "Claim 3 again.", "evidence": {}})
        + "\n",
        encoding="utf-8",
    )
    with pytest.raises(DataValidationError) as exc:
        load_claims([FIXTURE / "original" / "claims_dev.jsonl", second])
    assert f"{second}:2: duplicate claim id '3'" in str(exc.value)


def test_duplicate_claim_id_in_one_file(tmp_path: Path) -> None:
    path = tmp_path / "claims.jsonl"
    path.write_text(
        json.dumps({"id": 1, "claim": "A.", "evidence": {}})
        + "\n"
        + json.dumps({"id": 1, "claim": "B.", "evidence": {}})
        + "\n",
        encoding="utf-8",
    )
    with pytest.raises(DataValidationError, match=r"claims\.jsonl:2: duplicate claim id '1'"):
        load_claims([path])


def test_missing_claims_file(tmp_path: Path) -> None:
    with pytest.raises(DataValidationError, match="claims file not found"):
        load_claims([tmp_path / "claims_dev.jsonl"])


# --- the parse stage wrapper, end to end --------------------------------------------------------


def _write_params(tmp_path: Path, dataset: dict) -> Path:
    params = yaml.safe_load((PROJECT / "params.yaml").read_text(encoding="utf-8"))
    params["dataset"] = dataset
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return path


def _run_parse(tmp_path: Path, params: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAGRIG_STAGE_LOG": str(tmp_path / "stage_log.jsonl")}
    return subprocess.run(
        [
            PYTHON,
            str(PROJECT / "stages" / "parse.py"),
            "--params",
            str(params),
            "--out",
            str(tmp_path / "data" / "parse"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_parse_stage_fails_cleanly_on_corrupt_data(tmp_path: Path, ds: Path) -> None:
    _append(ds / "corpus.jsonl", json.dumps({"_id": "d03", "title": "again", "text": "Twice."}))
    params = _write_params(
        tmp_path,
        {"name": "bad", "root": str(ds), "split": "test", "download": None, "claims": None},
    )
    proc = _run_parse(tmp_path, params)
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1, proc.stderr
    assert err[0].startswith("ragrig parse: error: ")
    assert "duplicate document id(s): 'd03'" in err[0]
    assert "Traceback" not in proc.stderr
    out = tmp_path / "data" / "parse"
    assert not out.exists()
    assert not (out.parent.exists() and any(out.parent.iterdir()))  # no hidden temp folder
    log = [json.loads(line) for line in _lines(tmp_path / "stage_log.jsonl")]
    assert [(r["stage"], r["status"]) for r in log] == [("parse", "failed")]


def test_parse_stage_writes_tables(tmp_path: Path) -> None:
    params = _write_params(
        tmp_path,
        {
            "name": "tiny",
            "root": str(FIXTURE),
            "split": "test",
            "download": None,
            "claims": {"files": ["original/claims_dev.jsonl"]},
        },
    )
    proc = _run_parse(tmp_path, params)
    assert proc.returncode == 0, proc.stderr
    assert "parse: 20 documents, 9 queries, 11 judgments" in proc.stdout
    out = tmp_path / "data" / "parse"
    assert sorted(p.name for p in out.iterdir()) == [
        "documents.parquet",
        "manifest.json",
        "qrels.parquet",
        "queries.parquet",
    ]
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest == {
        "claim_labels": {"CONTRADICT": 2, "NOT_ENOUGH_INFO": 3, "SUPPORT": 4},
        "dataset": "tiny",
        "documents": 20,
        "judgments": 11,
        "queries": 9,
        "split": "test",
    }
    assert len(pd.read_parquet(out / "documents.parquet")) == 20
    assert len(pd.read_parquet(out / "queries.parquet")) == 9
    assert len(pd.read_parquet(out / "qrels.parquet")) == 11
    assert sorted(p.name for p in out.parent.iterdir()) == ["parse"]  # no temp folder left


# --- atomic_dir ---------------------------------------------------------------------------------


def test_atomic_dir_failure_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "out" / "stage"
    with pytest.raises(RuntimeError, match="boom"), atomic_dir(target) as tmp:
        (tmp / "half.parquet").write_text("partial", encoding="utf-8")
        raise RuntimeError("boom")
    assert not target.exists()
    assert list(target.parent.iterdir()) == []


def test_atomic_dir_failure_keeps_previous_output(tmp_path: Path) -> None:
    target = tmp_path / "stage"
    target.mkdir()
    (target / "old.txt").write_text("old", encoding="utf-8")
    with pytest.raises(KeyboardInterrupt), atomic_dir(target) as tmp:
        (tmp / "new.txt").write_text("new", encoding="utf-8")
        raise KeyboardInterrupt
    assert sorted(p.name for p in target.iterdir()) == ["old.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stage"]


def test_atomic_dir_success_replaces_whole_target(tmp_path: Path) -> None:
    target = tmp_path / "stage"
    (target / "sub").mkdir(parents=True)
    (target / "old.txt").write_text("old", encoding="utf-8")
    (target / "sub" / "deep.txt").write_text("deep", encoding="utf-8")
    with atomic_dir(target) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".stage.tmp-")
        assert not (tmp / "old.txt").exists()  # starts empty, not a copy of the old output
        (tmp / "new.txt").write_text("new", encoding="utf-8")
        assert (target / "old.txt").exists()  # old output still in place until the body ends
    assert sorted(p.name for p in target.iterdir()) == ["new.txt"]
    assert (target / "new.txt").read_text(encoding="utf-8") == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stage"]


def test_atomic_dir_clears_stale_temp_folders(tmp_path: Path) -> None:
    stale = tmp_path / ".stage.tmp-killed"
    stale.mkdir()
    (stale / "half.parquet").write_text("partial", encoding="utf-8")
    with atomic_dir(tmp_path / "stage") as tmp:
        (tmp / "x.txt").write_text("x", encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stage"]
