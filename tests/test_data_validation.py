"""The BEIR loader's bad-input contract, the claims file, the parse stage wrapper and atomic_dir."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ragrig.core.errors import DataValidationError
from ragrig.core.io import atomic_dir
from ragrig.dataset.beir import load_beir
from ragrig.dataset.claims import NOT_ENOUGH_INFO, UNKNOWN, claim_label, load_claims

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
    # `-S dataset.root=/data/my set` unquoted in a shell arrives as root "/data/my"
    with pytest.raises(DataValidationError) as exc:
        load_beir(tmp_path / "my", "test")
    assert str(exc.value) == (
        f"dataset root {tmp_path / 'my'} is not a folder (run `ragrig data ensure`? a path with "
        "spaces or special characters needs Hydra quoting: -S \"dataset.root='/a b/c'\")"
    )


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
    assert msg.endswith(": 1 duplicate document id ('d03' on 2 lines (3, 21))")


def test_empty_document_text_error_policy(ds: Path) -> None:
    _replace_record(ds / "corpus.jsonl", "d07", {"_id": "d07", "title": "", "text": "   "})
    with pytest.raises(DataValidationError) as exc:
        load_beir(ds, "test", empty_text="error")
    assert "1 document ('d07') with empty title and text" in str(exc.value)
    assert "parse.empty_text=skip or keep" in str(exc.value)


def test_empty_judged_document_skip_keeps_its_judgment(ds: Path) -> None:
    # d05 is gold for query 3 (with d06): skipped, yet still counted in the query's gold
    _replace_record(ds / "corpus.jsonl", "d05", {"_id": "d05", "title": " ", "text": ""})
    data = load_beir(ds, "test")  # default policy: skip
    assert "d05" not in data.corpus
    assert len(data.corpus) == 19
    assert data.empty_documents == ("d05",)
    assert data.qrels["3"] == {"d05": 1, "d06": 1}


def test_empty_document_keep_policy(ds: Path) -> None:
    _replace_record(ds / "corpus.jsonl", "d05", {"_id": "d05", "title": "", "text": ""})
    data = load_beir(ds, "test", empty_text="keep")
    assert data.corpus["d05"] == {"title": "", "text": ""}
    assert len(data.corpus) == 20
    assert data.empty_documents == ("d05",)


def test_all_documents_empty_skip_is_an_empty_corpus(ds: Path) -> None:
    lines = [
        json.dumps({"_id": json.loads(line)["_id"], "title": "", "text": ""})
        for line in _lines(ds / "corpus.jsonl")
    ]
    _write_lines(ds / "corpus.jsonl", lines)
    with pytest.raises(DataValidationError, match=r"the corpus is empty \(20 blank document"):
        load_beir(ds, "test")


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
    assert msg.endswith(": 1 duplicate query id ('4' on 2 lines (4, 11))")


def test_empty_query_text(ds: Path) -> None:
    _replace_record(ds / "queries.jsonl", "2", {"_id": "2", "text": "", "metadata": {}})
    with pytest.raises(DataValidationError) as exc:
        load_beir(ds, "test")
    assert str(exc.value).endswith("queries.jsonl: 1 query ('2') with empty text")


# --- qrels ------------------------------------------------------------------------------------


def test_qrels_unknown_document(ds: Path) -> None:
    _append(ds / "qrels" / "test.tsv", "1\td99\t1")
    with pytest.raises(DataValidationError) as exc:
        load_beir(ds, "test")
    assert "1 unknown document id ('d99')" in str(exc.value)


def test_qrels_unknown_query(ds: Path) -> None:
    _append(ds / "qrels" / "test.tsv", "77\td01\t1")
    with pytest.raises(DataValidationError) as exc:
        load_beir(ds, "test")
    assert "1 unknown query id ('77')" in str(exc.value)


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
    assert "1 duplicate judgment (query '1' on 'd01')" in str(exc.value)


def test_missing_split(ds: Path) -> None:
    with pytest.raises(DataValidationError, match=r"qrels file not found: .*dev\.tsv"):
        load_beir(ds, "dev")


def test_unjudged_queries_judged_in_another_split(ds: Path) -> None:
    from ragrig.parse import parse_stats, stats_lines

    (ds / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\n90\td01\t1\n", "utf-8")
    (ds / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\n1\td01\t1\n", "utf-8")
    data = load_beir(ds, "test")
    assert data.unjudged == ("90",)
    assert data.unjudged_in_other_splits == {"dev": 0, "train": 1}
    stats = parse_stats(data, None, "test")
    assert (stats["queries_scored"], stats["queries_unjudged"], stats["queries_no_positive"]) == (
        8,
        1,
        1,
    )
    assert stats_lines(stats)[0] == (
        "parse: queries: 8 scored, 1 unjudged (in queries.jsonl, no judgment in "
        "qrels/test.tsv; 1 judged in train), 1 judged with no positive judgment"
    )


def test_missing_queries_file(ds: Path) -> None:
    (ds / "queries.jsonl").unlink()
    with pytest.raises(DataValidationError, match=r"file not found: .*queries\.jsonl"):
        load_beir(ds, "test")


# --- encodings --------------------------------------------------------------------------------

BOM = b"\xef\xbb\xbf"


def test_byte_order_mark_is_tolerated_everywhere(ds: Path) -> None:
    plain = load_beir(ds, "test")
    claims_path = ds / "original" / "claims_dev.jsonl"
    plain_claims = load_claims([claims_path])
    for path in (ds / "corpus.jsonl", ds / "queries.jsonl", ds / "qrels" / "test.tsv", claims_path):
        path.write_bytes(BOM + path.read_bytes())
    with_bom = load_beir(ds, "test")
    assert with_bom.corpus == plain.corpus
    assert with_bom.queries == plain.queries
    assert with_bom.qrels == plain.qrels
    assert load_claims([claims_path]) == plain_claims


def test_byte_order_mark_in_gzip_corpus(ds: Path) -> None:
    plain = load_beir(ds, "test")
    with gzip.open(ds / "corpus.jsonl.gz", "wb") as dst:
        dst.write(BOM + (ds / "corpus.jsonl").read_bytes())
    (ds / "corpus.jsonl").unlink()
    assert load_beir(ds, "test").corpus == plain.corpus


def test_non_utf8_byte_names_file_line_and_offset(ds: Path) -> None:
    corpus = ds / "corpus.jsonl"
    raw = corpus.read_bytes().split(b"\n")
    prefix = len(b"\n".join(raw[:3])) + 1  # byte offset where line 4 starts
    at = raw[3].index(b"text") + 8
    raw[3] = raw[3][:at] + b"\xff" + raw[3][at:]
    corpus.write_bytes(b"\n".join(raw))
    with pytest.raises(DataValidationError) as exc:
        load_beir(ds, "test")
    assert str(exc.value) == (
        f"{corpus}:4: not valid UTF-8 (byte 0xff at byte offset {prefix + at})"
    )


def test_non_utf8_byte_in_qrels(ds: Path) -> None:
    qrels = ds / "qrels" / "test.tsv"
    qrels.write_bytes(qrels.read_bytes() + b"1\td\xe902\t1\n")
    with pytest.raises(DataValidationError, match=r"test\.tsv:13: not valid UTF-8 \(byte 0xe9"):
        load_beir(ds, "test")


def test_truncated_gzip_corpus(ds: Path) -> None:
    blob = gzip.compress((ds / "corpus.jsonl").read_bytes())
    (ds / "corpus.jsonl.gz").write_bytes(blob[: len(blob) // 2])
    (ds / "corpus.jsonl").unlink()
    with pytest.raises(DataValidationError) as exc:
        load_beir(ds, "test")
    assert f"{ds / 'corpus.jsonl.gz'}:" in str(exc.value)
    assert "truncated or corrupt gzip" in str(exc.value)


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


def test_claims_bad_evidence(tmp_path: Path) -> None:
    path = tmp_path / "claims.jsonl"
    path.write_text(json.dumps({"id": 1, "claim": "A.", "evidence": ["d1"]}) + "\n", "utf-8")
    with pytest.raises(DataValidationError, match=r"claims\.jsonl:1: 'evidence' must map"):
        load_claims([path])


def test_query_missing_from_claim_files_is_unknown(ds: Path) -> None:
    from ragrig.parse import queries_table

    claims_path = ds / "original" / "claims_dev.jsonl"
    kept = [ln for ln in _lines(claims_path) if json.loads(ln)["id"] not in (6, 8)]
    _write_lines(claims_path, kept)
    table = queries_table(load_beir(ds, "test"), load_claims([claims_path]))
    labels = dict(zip(table["qid"], table["claim_label"], strict=True))
    assert labels["6"] == UNKNOWN and labels["8"] == UNKNOWN
    assert labels["9"] == NOT_ENOUGH_INFO  # named in the file with no rationale: a real label
    assert table["claim_label"].value_counts().to_dict() == {
        "SUPPORT": 4,
        "CONTRADICT": 2,
        UNKNOWN: 2,
        NOT_ENOUGH_INFO: 1,
    }


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
    assert "1 duplicate document id ('d03' on 2 lines" in err[0]
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
        "docling",  # empty for a BEIR corpus but for its index: the chunk stage depends on it
        "documents.parquet",
        "elements.parquet",
        "manifest.json",
        "qrels.parquet",
        "queries.parquet",
    ]
    assert json.loads((out / "docling" / "index.json").read_text()) == {"files": []}
    assert len(pd.read_parquet(out / "elements.parquet")) == 0
    assert (
        "parse: queries: 8 scored, 1 unjudged (in queries.jsonl, no judgment in "
        "qrels/test.tsv), 1 judged with no positive judgment"
    ) in proc.stdout
    assert "empty title and text" not in proc.stdout
    assert "not in the claim files" not in proc.stdout
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    digests = manifest.pop("sha256")  # each file's, checked by the stages that read them
    assert sorted(digests) == [
        "docling/index.json",
        "documents.parquet",
        "elements.parquet",
        "qrels.parquet",
        "queries.parquet",
    ]
    assert digests["docling/index.json"] == hashlib.sha256(b'{\n  "files": []\n}\n').hexdigest()
    assert manifest == {
        "claim_labels": {"CONTRADICT": 2, "NOT_ENOUGH_INFO": 3, "SUPPORT": 4},
        "claims_unknown": 0,
        "dataset": "tiny",
        "documents": 20,
        "empty_text": {
            "policy": "skip",
            "documents": 0,
            "skipped": 0,
            "doc_ids": [],
            "judged_documents": 0,
            "judged_doc_ids": [],
            "judgments": 0,
            "positive_judgments": 0,
            "queries_affected": 0,
        },
        "judgments": 11,
        "queries": 9,
        "queries_no_positive": 1,
        "queries_scored": 8,
        "queries_unjudged": 1,
        "queries_unjudged_in_other_splits": {},
        "query_metadata_columns": [],
        "query_metadata_nested_fields": 0,
        "document_metadata_columns": [],
        "query_filters": 0,
        "split": "test",
        "surrogates_replaced": {"corpus": 0, "queries": 0, "claims": 0},
    }
    assert len(pd.read_parquet(out / "documents.parquet")) == 20
    assert len(pd.read_parquet(out / "queries.parquet")) == 9
    assert len(pd.read_parquet(out / "qrels.parquet")) == 11
    assert sorted(p.name for p in out.parent.iterdir()) == ["parse"]  # no temp folder left


def _fixture_with_empty_judged_document(tmp_path: Path) -> Path:
    """The tiny fixture as a real corpus was found: d05 (gold for query 3) and d13 (unjudged)
    have blank title and text, and query 3's claim is missing from the claim file."""
    root = tmp_path / "blanks"
    shutil.copytree(FIXTURE, root)
    _replace_record(root / "corpus.jsonl", "d05", {"_id": "d05", "title": "", "text": ""})
    _replace_record(root / "corpus.jsonl", "d13", {"_id": "d13", "title": " ", "text": "\n"})
    claims = root / "original" / "claims_dev.jsonl"
    _write_lines(claims, [ln for ln in _lines(claims) if json.loads(ln)["id"] != 3])
    return root


def test_parse_stage_empty_judged_document_end_to_end(tmp_path: Path) -> None:
    root = _fixture_with_empty_judged_document(tmp_path)
    params = _write_params(
        tmp_path,
        {
            "name": "blanks",
            "root": str(root),
            "split": "test",
            "download": None,
            "claims": {"files": ["original/claims_dev.jsonl"]},
        },
    )
    proc = _run_parse(tmp_path, params)
    assert proc.returncode == 0, proc.stderr
    assert "parse: 18 documents, 9 queries, 11 judgments" in proc.stdout
    assert (
        "parse: 2 document(s) with empty title and text skipped (parse.empty_text=skip): "
        "1 of them judged (d05), 1 positive judgment(s) on 1 query(ies) kept in qrels "
        "(counted as gold that cannot be retrieved)"
    ) in proc.stdout
    assert "parse: 1 query(ies) not in the claim files: claim_label 'unknown'" in proc.stdout
    out = tmp_path / "data" / "parse"
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["empty_text"] == {
        "policy": "skip",
        "documents": 2,
        "skipped": 2,
        "doc_ids": ["d05", "d13"],
        "judged_documents": 1,
        "judged_doc_ids": ["d05"],
        "judgments": 1,
        "positive_judgments": 1,
        "queries_affected": 1,
    }
    assert manifest["claims_unknown"] == 1
    assert manifest["claim_labels"] == {
        "CONTRADICT": 2,
        "NOT_ENOUGH_INFO": 3,
        "SUPPORT": 3,
        "unknown": 1,
    }
    docs = pd.read_parquet(out / "documents.parquet")
    assert "d05" not in set(docs["doc_id"]) and len(docs) == 18
    qrels = pd.read_parquet(out / "qrels.parquet")
    assert sorted(qrels[qrels["qid"] == "3"]["doc_id"]) == ["d05", "d06"]  # gold keeps d05
    queries = pd.read_parquet(out / "queries.parquet").set_index("qid")
    assert queries.loc["3", "n_gold"] == 2
    assert queries.loc["3", "claim_label"] == "unknown"

    # the recall consequence: retrieving everything retrievable finds 1 of query 3's 2 gold
    from ragrig.metrics.ir import per_query, qrels_from_table

    run = {"3": sorted(docs["doc_id"])}
    table = per_query(run, {"3": qrels_from_table(qrels)["3"]}, ["recall@100"])
    assert table["value"].tolist() == [0.5]


def test_parse_stage_empty_text_error_policy(tmp_path: Path) -> None:
    root = _fixture_with_empty_judged_document(tmp_path)
    params = _write_params(
        tmp_path,
        {"name": "blanks", "root": str(root), "split": "test", "download": None, "claims": None},
    )
    data = yaml.safe_load(params.read_text(encoding="utf-8"))
    data["parse"]["empty_text"] = "error"
    params.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    proc = _run_parse(tmp_path, params)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"ragrig parse: error: {root / 'corpus.jsonl'}: 2 documents ('d05', 'd13') with empty "
        "title and text (set parse.empty_text=skip or keep to accept them)"
    )
    assert not (tmp_path / "data" / "parse").exists()


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


def test_scalar_query_metadata_become_meta_columns(ds: Path) -> None:
    from ragrig.parse import queries_table

    lines = [json.loads(x) for x in _lines(ds / "queries.jsonl")]
    for i, rec in enumerate(lines):
        rec["metadata"] = {
            "year": 2000 + i,  # numeric on every query
            "domain": ["bio", "space"][i % 2],  # text
            "evidence": {"d1": [{"sentences": [0]}]},  # nested (SciFact-like): left out
        }
        if i == 0:
            rec["metadata"].pop("year")  # a query without the field: NaN, not 0
    _write_lines(ds / "queries.jsonl", [json.dumps(r) for r in lines])
    data = load_beir(ds, "test")
    assert data.nested_metadata_fields == ("evidence",)
    table = queries_table(data, None)
    assert [c for c in table.columns if c.startswith("meta_")] == ["meta_domain", "meta_year"]
    by_qid = table.set_index("qid")
    first = str(lines[0]["_id"])
    assert pd.isna(by_qid.loc[first, "meta_year"])
    assert table["meta_year"].dtype == "float64"
    judged = [r for r in lines[1:] if str(r["_id"]) in by_qid.index]
    assert [by_qid.loc[str(r["_id"]), "meta_year"] for r in judged] == [
        float(r["metadata"]["year"]) for r in judged
    ]
    assert set(table["meta_domain"]) <= {"bio", "space"}


def test_query_metadata_must_be_an_object(ds: Path) -> None:
    rec = json.loads(_lines(ds / "queries.jsonl")[0])
    rec["metadata"] = ["not", "an", "object"]
    n = _replace_record(ds / "queries.jsonl", str(rec["_id"]), rec)
    with pytest.raises(
        DataValidationError, match=rf"queries.jsonl:{n}: 'metadata' must be an object"
    ):
        load_beir(ds, "test")
