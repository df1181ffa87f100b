"""parse=docling on hostile input: file names that are not UTF-8, lone surrogates in converted
text or golden queries (replaced by U+FFFD, counted, warned about), qrels grades that Python's
int() would read ("1_0", "２")."""

from __future__ import annotations

import json
import os
import re
import runpy
import sys
from pathlib import Path

import pytest
import yaml

from ragrig.core.errors import DataValidationError
from ragrig.parse.docling import (
    FileEntry,
    GoldTarget,
    _replace_surrogates,
    build_rows,
    list_files,
    load_gold_qrels,
    take_result,
)

PROJECT = Path(__file__).resolve().parents[2]


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("ragrig: warning: ")]


def test_a_converted_result_with_lone_surrogates_is_repaired_and_counted(capsys) -> None:
    el = {"kind": "text", "page": 0, "level": 1, "self_ref": "#/texts/0", "heading": False}
    e = FileEntry("a.md", Path("/docs/a.md"), "md", "parsed")
    e.result = {
        "title": "T\ud83d",
        "elements": [
            {**el, "kind": "title", "text": "T\ud83d", "section": ""},
            {**el, "text": "body \udc00 and \udfff", "section": "S\ud800"},
        ],
        "json": '{"name": "T\ud83d"}',
    }
    _replace_surrogates(e)
    assert e.text_replaced == 3  # the title, an element, is counted once
    assert e.result["title"] == "T\ufffd" and e.result["json"] == '{"name": "T\ufffd"}'
    assert [x["text"] for x in e.result["elements"]] == ["T\ufffd", "body \ufffd and \ufffd"]
    assert e.result["elements"][1]["section"] == "S\ufffd"
    assert _warnings(capsys.readouterr().err) == [
        "ragrig: warning: /docs/a.md: 3 lone surrogate(s) replaced by U+FFFD"
    ]
    docs, _ = build_rows(e, "docling:x", "section")  # hashes and ids: no UnicodeEncodeError
    assert "\ufffd" in docs[-1]["content"]


def test_a_file_name_that_is_not_utf8_is_replaced_and_counted(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "ok.md").write_text("# Fine\n")
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.md"), "w") as fh:
        fh.write("# Caf\n")
    entries = list_files([folder], [], 1_000_000)
    assert [(e.path, e.name_replaced) for e in entries] == [("caf\ufffd.md", 1), ("ok.md", 0)]
    assert entries[0].abspath.is_file()  # the worker still opens the file by its real name
    assert _warnings(capsys.readouterr().err) == [
        f"ragrig: warning: {folder}/caf\ufffd.md: file name is not UTF-8: 1 byte(s) replaced "
        "by U+FFFD"
    ]
    with open(os.path.join(os.fsencode(folder), b"caf\xe8.md"), "w") as fh:
        fh.write("# Other\n")
    with pytest.raises(DataValidationError) as exc:
        list_files([folder], [], 1_000_000)
    assert str(exc.value) == (
        "two file names read as 'caf\ufffd.md' once their bytes that are not UTF-8 are replaced "
        "by U+FFFD: rename one"
    )


def test_a_converter_message_quoting_a_name_not_utf8_is_repaired() -> None:
    e = FileEntry("caf\ufffd.pdf", Path(os.fsdecode(b"/docs/caf\xe9.pdf")), "pdf")
    take_result(
        e,
        {
            "status": "failed",
            "cause": "conversion",
            "reason": "PermissionError: [Errno 13] Permission denied: '/docs/caf\udce9.pdf'",
        },
    )
    assert (e.status, e.cause) == ("failed", "conversion")
    assert e.reason == "PermissionError: [Errno 13] Permission denied: '/docs/caf\ufffd.pdf'"


@pytest.mark.parametrize("grade", ["1_0", "\uff12", "\u0661"])
def test_golden_qrels_grades_are_ascii_digits(tmp_path: Path, grade: str) -> None:
    target = GoldTarget(sections={"a.md": [("a/s000", "")]}, not_parsed={})
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text(f"query-id\tpath\tsection\trelevance\nq1\ta.md\t\t-1\nq2\ta.md\t\t{grade}\n")
    with pytest.raises(DataValidationError) as exc:
        load_gold_qrels(qrels, target, "section")
    assert str(exc.value) == (
        f"{qrels}:3: relevance {grade!r} is not an integer (ASCII digits with an optional sign)"
    )
    qrels.write_text("query-id\tpath\tsection\trelevance\nq1\ta.md\t\t-1\nq2\ta.md\t\t+2\n")
    assert load_gold_qrels(qrels, target, "section") == {"q1": {"a/s000": -1}, "q2": {"a/s000": 2}}


def test_stage_parses_a_folder_with_hostile_names_and_text(tmp_path, monkeypatch, capsys):
    """A real conversion through the stage: a Markdown file whose name is not UTF-8 (docling's
    JSON holds the name), an HTML file with a surrogate character reference (the HTML parser
    already gives U+FFFD: nothing to count), golden queries with a lone surrogate."""
    docs, golden = tmp_path / "docs", tmp_path / "golden"
    docs.mkdir()
    golden.mkdir()
    with open(os.path.join(os.fsencode(docs), b"caf\xe9.md"), "w") as fh:
        fh.write("# Menu\n\nCoffee and cake.\n")
    (docs / "page.html").write_text(
        "<html><body><h1>Page &#xD83D;</h1><p>Text &#55357; here.</p></body></html>"
    )
    # failed and skipped before any conversion: counted beside the parsed files
    with open(os.path.join(os.fsencode(docs), b"r\xe9port.pdf"), "wb") as fh:
        fh.write(b"PK\x03\x04" + bytes(40))  # a ZIP archive's header
    (tmp_path / "secret.md").write_text("# Secret\n")
    (docs / "leak.md").symlink_to(tmp_path / "secret.md")
    (golden / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "What is on the menu \ud83d?"}) + "\n"
    )
    (golden / "qrels.tsv").write_text("query-id\tpath\tsection\trelevance\nq1\tcaf\ufffd.md\t\t1\n")
    params = yaml.safe_load((PROJECT / "params.yaml").read_text())
    params["dataset"] = {"name": "hostile", "root": str(docs), "golden": str(golden)}
    params["parse"] = {
        "method": "docling",
        "workers": 1,
        "timeout_s": 120,
        "max_failure_share": 0.5,
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    out = tmp_path / "parse"
    monkeypatch.syspath_prepend(str(PROJECT / "stages"))
    wrapper = runpy.run_path(str(PROJECT / "stages" / "parse.py"), run_name="parse_stage")
    monkeypatch.setattr(
        sys, "argv", ["parse.py", "--params", str(tmp_path / "params.yaml"), "--out", str(out)]
    )
    wrapper["main"]()
    from ragrig.core.io import read_json, read_table

    manifest = read_json(out / "manifest.json")
    assert manifest["surrogates_replaced"] == {"documents": 0, "file_names": 2, "queries": 1}
    assert manifest["files"] == {"parsed": 2, "failed": 1, "skipped": 1, "timed_out": 0}
    assert manifest["judgments"] == 1
    assert manifest["not_parsed"]["failed"] == {
        "count": 1,
        "causes": {"content_mismatch": 1},
        "examples": [
            {
                "path": "r\ufffdport.pdf",
                "reason": "content does not match its extension .pdf: a ZIP archive",
            }
        ],
    }
    assert manifest["not_parsed"]["skipped"]["causes"] == {"link_outside": 1}
    assert "Secret" not in " ".join(read_table(out / "documents.parquet", "documents")["content"])
    documents = read_table(out / "documents.parquet", "documents")
    assert sorted(set(documents["path"])) == ["caf\ufffd.md", "page.html"]
    # the id of a file whose name is not UTF-8 is printable ASCII (TREC files, HTML, MLflow)
    ids = documents.loc[documents["path"] == "caf\ufffd.md", "doc_id"].tolist()
    assert len(ids) == 1 and re.fullmatch(r"caf-md-[0-9a-f]{10}/s000", ids[0]), ids
    page = " ".join(documents.loc[documents["path"] == "page.html", "content"])
    assert page.count("\ufffd") == 2  # from the HTML parser, not counted
    assert read_table(out / "queries.parquet", "queries")["text"].tolist() == [
        "What is on the menu \ufffd?"
    ]
    for f in (out / "docling").glob("*.json"):
        json.loads(f.read_text(encoding="utf-8"))
    printed = capsys.readouterr()
    assert (
        "parse: 3 lone surrogate(s) replaced by U+FFFD (file_names 2, queries 1)"
        in printed.out.splitlines()
    )
    assert (
        "parse: files: 2 parsed, 1 failed (content_mismatch 1), 1 skipped (link_outside 1), "
        "0 timed out (unit=section)" in printed.out.splitlines()
    )
    assert _warnings(printed.err) == [
        f"ragrig: warning: {docs}/caf\ufffd.md: file name is not UTF-8: 1 byte(s) replaced by "
        "U+FFFD",
        f"ragrig: warning: {docs}/r\ufffdport.pdf: file name is not UTF-8: 1 byte(s) replaced "
        "by U+FFFD",
        f"ragrig: warning: {golden}/queries.jsonl:1: 1 lone surrogate(s) replaced by U+FFFD",
    ]
