"""The documents golden set (data/golden/docs, dataset=docs) is consistent data: every judged
file exists in one of the dataset's document folders, every query has a positive judgment,
and SOURCES.md records every committed document with its checksum."""

from __future__ import annotations

import csv
import hashlib
import json
import re
from pathlib import Path

import pytest

from .conftest import PROJECT, SHARED

GOLDEN = PROJECT / "data" / "golden" / "docs"
DOCUMENTS = GOLDEN / "documents"
DOCLING_DOCS = SHARED / "datasets" / "docling_test_docs"
FORMATS = {
    ".html": "html",
    ".nxml": "jats",
    ".docx": "docx",
    ".pdf": "pdf",
    ".md": "md",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
}
KINDS = {"fact", "numeric", "list", "table", "definition", "code"}


def _queries() -> dict[str, dict]:
    lines = (GOLDEN / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    recs = [json.loads(x) for x in lines if x.strip()]
    ids = [r["_id"] for r in recs]
    assert len(ids) == len(set(ids)), "duplicate query ids"
    return {r["_id"]: r for r in recs}


def _qrels() -> list[dict[str, str]]:
    with (GOLDEN / "qrels.tsv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0] == ["query-id", "path", "section", "relevance"]
    assert all(len(r) == 4 for r in rows[1:]), [r for r in rows[1:] if len(r) != 4]
    return [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]


def _committed_documents() -> list[str]:
    return sorted(p.relative_to(DOCUMENTS).as_posix() for p in DOCUMENTS.rglob("*") if p.is_file())


def test_every_query_has_a_positive_judgment_and_every_judgment_a_query():
    queries, qrels = _queries(), _qrels()
    assert len(queries) >= 40
    positive = {r["query-id"] for r in qrels if int(r["relevance"]) > 0}
    assert sorted(set(queries) - positive) == []
    assert sorted({r["query-id"] for r in qrels} - set(queries)) == []


def test_query_metadata_matches_its_judgment():
    queries = _queries()
    for row in _qrels():
        rec = queries[row["query-id"]]
        meta = rec["metadata"]
        assert rec["text"].strip().endswith("?"), rec
        assert meta["format"] == FORMATS[Path(row["path"]).suffix], row
        assert meta["kind"] in KINDS, rec
        # a gold section, or the whole file ("") for a file whose conversion has no headings
        assert meta["gold"] == ("section" if row["section"] else "file"), row
        assert meta["answer"].strip(), rec
        assert row["section"] == row["section"].strip() and " >  " not in row["section"], row


def test_every_judged_path_exists_in_one_documents_folder():
    if not DOCLING_DOCS.is_dir():
        pytest.skip(f"{DOCLING_DOCS} not present")
    for row in _qrels():
        path = row["path"]
        assert not Path(path).is_absolute() and ".." not in Path(path).parts, row
        found = [d for d in (DOCLING_DOCS, DOCUMENTS) if (d / path).is_file()]
        assert len(found) == 1, f"{row['query-id']}: {path} found in {found}"
    # the judged files span the shared documents and the committed ones
    paths = {r["path"] for r in _qrels()}
    assert {p for p in paths if (DOCUMENTS / p).is_file()} == set(_committed_documents())


def test_sources_lists_every_committed_document_with_its_checksum():
    sources = (GOLDEN / "SOURCES.md").read_text(encoding="utf-8")
    committed = _committed_documents()
    assert committed, "no committed documents"
    listed = set(re.findall(r"^\| `([^`]+)` \|", sources, flags=re.MULTILINE))
    assert listed == set(committed)
    sums = dict(
        (path, digest)
        for digest, path in re.findall(r"^([0-9a-f]{64})  (\S+)$", sources, flags=re.MULTILINE)
    )
    for rel in committed:
        data = (DOCUMENTS / rel).read_bytes()
        assert len(data) < 300_000, rel
        assert sums.get(rel) == hashlib.sha256(data).hexdigest(), rel
    for line in re.findall(r"^\| `[^`]+` \|.*$", sources, flags=re.MULTILINE):
        licence = line.rstrip(" |").rsplit("|", 1)[-1].strip()
        assert licence.split()[0] in {
            "MIT",
            "BSD-2-Clause",
            "BSD-3-Clause",
            "Apache-2.0",
            "CC0-1.0",
            "public",
        }, line


def test_choosing_dataset_docs_chooses_what_documents_need_and_the_command_line_wins():
    from ragrig.compose.params import compose
    from ragrig.core.config import validate_all

    conf = PROJECT / "conf"
    cfg = validate_all(compose(conf, ["dataset=docs"]))
    ds = cfg["dataset"]
    assert (ds.name, ds.root, ds.golden) == (
        "docs",
        "../shared/datasets/docling_test_docs",
        "data/golden/docs",
    )
    assert ds.documents == [ds.root, "data/golden/docs/documents"]
    assert cfg["parse"].method == "docling"
    assert cfg["parse"].exclude == ["groundtruth/*", "PROVENANCE.md"]
    assert cfg["chunk"].method == "recursive"
    assert (cfg["generate"].method, cfg["generate"].prompt) == ("llama_cpp", "answer")
    assert cfg["report"].scorecard.reference_column == "meta_answer"

    # the documents folders follow a root given on the command line; a choice made there wins
    cfg = validate_all(
        compose(conf, ["dataset=docs", "dataset.root=/data/docs", "generate=extractive"])
    )
    assert cfg["dataset"].documents == ["/data/docs", "data/golden/docs/documents"]
    assert cfg["generate"].method == "extractive"

    # other datasets keep the defaults
    cfg = validate_all(compose(conf, ["dataset=tiny"]))
    assert cfg["parse"].method == "beir" and cfg["chunk"].method == "document"
    assert cfg["generate"].prompt == "claim_verdict"
    assert cfg["report"].scorecard.reference_column is None


def test_every_judgment_names_a_section_of_the_docling_conversion(monkeypatch):
    """parse=docling over the two documents folders: every file converts, and every qrels row
    (file and section path, as docling reads the headings) maps to documents rows; a gold
    section covers its subsections, an empty one the whole file."""
    if not DOCLING_DOCS.is_dir():
        pytest.skip(f"{DOCLING_DOCS} not present")
    from ragrig.compose.params import compose
    from ragrig.core.config import validate_all
    from ragrig.parse import make_parser

    monkeypatch.chdir(PROJECT)  # the golden folder and the committed documents are relative
    cfg = validate_all(
        compose(PROJECT / "conf", ["dataset=docs", f"dataset.root='{DOCLING_DOCS}'"])
    )
    parsed = make_parser(cfg["parse"]).parse(cfg["dataset"])
    assert parsed.report["counts"]["parsed"] == 14 + len(_committed_documents())
    assert parsed.stats["judgments_on_unparsed_files"] == 0

    docs = parsed.documents.set_index("doc_id")
    gold = parsed.qrels[parsed.qrels["relevance"] > 0].groupby("qid")["doc_id"].apply(set)
    assert sorted(gold.index) == sorted(_queries())
    for row in _qrels():
        rows = docs.loc[sorted(gold[row["query-id"]])]
        assert set(rows["path"]) == {row["path"]}, row
        want = row["section"]
        assert all(s == want or s.startswith(want + " > ") for s in rows["section"]), row
        # every row of the file under that section is gold, none other
        file_rows = docs[docs["path"] == row["path"]]
        under = {
            d
            for d, s in zip(file_rows.index, file_rows["section"], strict=True)
            if not want or s == want or s.startswith(want + " > ")
        }
        assert set(rows.index) == under, row
