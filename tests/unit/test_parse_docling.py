"""parse=docling on small documents of every format, bad inputs beside them, and a golden set.

One conversion of the fixture folder plus bad files (module fixture) serves most tests; a
second conversion of a copy with one changed file checks that ids are stable.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from ragrig.core.errors import DataValidationError
from ragrig.core.schemas import validate
from ragrig.dataset.config import DatasetConfig
from ragrig.parse.docling import (
    DoclingParser,
    FileEntry,
    GoldTarget,
    build_rows,
    check_failures,
    file_id_of,
    load_gold_qrels,
    map_gold,
)
from ragrig.parse.docling_worker import ENV_TEST_CRASH, ENV_TEST_HANG

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DOCS = FIXTURES / "docs"
GOLDEN = FIXTURES / "docs_golden"
GOOD = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*") if p.is_file())
MAX_BYTES = 60_000  # above every fixture (the DOCX is ~37 kB), below big.md
TIMEOUT_S = 8.0


def _encrypted_pdf(src: bytes) -> bytes:
    """The PDF with an incremental update adding a standard-security /Encrypt dictionary whose
    password check fails for the empty password: readers ask for a password."""
    prev = int(re.findall(rb"startxref\s+(\d+)", src)[-1])
    n = int(re.findall(rb"/Size (\d+)", src)[-1])
    root = re.findall(rb"/Root (\d+ \d+ R)", src)[-1].decode()
    body = src + b"\n"
    off = len(body)
    body += (
        f"{n} 0 obj\n<< /Filter /Standard /V 1 /R 2 /O <{'11' * 32}> /U <{'22' * 32}> /P -4 >>\n"
        "endobj\n"
    ).encode()
    xref = len(body)
    body += (
        f"xref\n{n} 1\n{off:010d} 00000 n \ntrailer\n<< /Size {n + 1} /Root {root} /Prev {prev} "
        f"/Encrypt {n} 0 R /ID [<{'ab' * 16}> <{'ab' * 16}>] >>\nstartxref\n{xref}\n%%EOF\n"
    ).encode()
    return body


BAD = {  # file -> (status, cause, a piece of its reason)
    "corrupt.pdf": ("failed", "conversion", "could not load"),
    "corrupt.docx": ("failed", "conversion", "could not load"),
    "encrypted.pdf": ("failed", "encrypted", "encrypted PDF"),
    "empty.html": ("failed", "empty", "empty file (0 bytes)"),
    "notes.txt": ("skipped", "unsupported", "unsupported extension '.txt'"),
    "big.md": ("skipped", "oversized", "oversized"),
    "hang_me.html": ("timed_out", "timeout", "parse.timeout_s"),
    "crash_me.md": ("failed", "worker_died", "converter process died (exit code 3)"),
}


def _bad_files(folder: Path) -> None:
    (folder / "corrupt.pdf").write_bytes(b"%PDF-1.4\n1 0 obj garbage\n")
    (folder / "corrupt.docx").write_bytes(b"PK\x03\x04 not really a zip" * 10)
    (folder / "encrypted.pdf").write_bytes(_encrypted_pdf((DOCS / "lighthouse.pdf").read_bytes()))
    (folder / "empty.html").write_bytes(b"")
    (folder / "notes.txt").write_text("plain text is not a supported format\n")
    (folder / "big.md").write_text("# Big\n\n" + "word " * 15_000)
    (folder / "hang_me.html").write_text("<html><body><p>never converted</p></body></html>")
    (folder / "crash_me.md").write_text("# Crash\n\nThe worker exits while converting this.\n")


def _dataset(folder: Path, golden: Path | None = GOLDEN) -> DatasetConfig:
    return DatasetConfig(
        name="docs-test", root=str(folder), documents=[str(folder)], golden=golden and str(golden)
    )


def _stop_forkserver() -> None:
    from multiprocessing import forkserver

    forkserver._forkserver._stop()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The fixture documents plus one file of each bad kind, converted once."""
    folder = tmp_path_factory.mktemp("docs")
    shutil.copytree(DOCS, folder, dirs_exist_ok=True)
    _bad_files(folder)
    parser = DoclingParser(
        workers=2, timeout_s=TIMEOUT_S, max_bytes=MAX_BYTES, max_failure_share=0.9
    )
    os.environ[ENV_TEST_HANG], os.environ[ENV_TEST_CRASH] = "hang_me", "crash_me"
    # the workers' forkserver keeps the environment it started with: one started by an earlier
    # test in this process would not see the hooks, so it is stopped before and after
    _stop_forkserver()
    try:
        entries = parser.convert([folder])
    finally:
        del os.environ[ENV_TEST_HANG], os.environ[ENV_TEST_CRASH]
        _stop_forkserver()
    parsed = parser.assemble(entries, _dataset(folder), [folder])
    return {"folder": folder, "parser": parser, "entries": entries, "parsed": parsed}


def _status(run) -> dict[str, FileEntry]:
    return {e.path: e for e in run["entries"]}


# --- statuses ------------------------------------------------------------------------------------


def test_every_good_file_parses_beside_the_bad_ones(run):
    st = _status(run)
    assert sorted(st) == sorted([*GOOD, *BAD])
    assert {p: st[p].status for p in GOOD} == dict.fromkeys(GOOD, "parsed")
    for path, (status, cause, reason) in BAD.items():
        assert (st[path].status, st[path].cause) == (status, cause), (path, st[path].reason)
        assert reason in st[path].reason, (path, st[path].reason)
    report = run["parsed"].report
    assert report["counts"] == {"parsed": len(GOOD), "failed": 5, "skipped": 2, "timed_out": 1}
    # the manifest's summary: causes counted, the first files named with their reasons
    not_parsed = run["parsed"].stats["not_parsed"]
    assert {s: (v["count"], v["causes"]) for s, v in not_parsed.items()} == {
        "failed": (5, {"conversion": 2, "empty": 1, "encrypted": 1, "worker_died": 1}),
        "skipped": (2, {"oversized": 1, "unsupported": 1}),
        "timed_out": (1, {"timeout": 1}),
    }
    assert [f["path"] for f in not_parsed["failed"]["examples"]] == [
        "corrupt.docx",
        "corrupt.pdf",
        "crash_me.md",
        "empty.html",
        "encrypted.pdf",
    ]
    assert not_parsed["skipped"]["examples"][0] == {
        "path": "big.md",
        "reason": st["big.md"].reason,
    }
    assert report["by_format"]["pdf"]["parsed"] == 1 and report["by_format"]["pdf"]["failed"] == 2
    assert report["by_format"]["pdf"]["pages"] == 2
    assert report["by_format"]["txt"] == {
        "files": 1, "pages": 0, "chars": 0, "seconds": 0.0,
        "parsed": 0, "failed": 0, "skipped": 1, "timed_out": 0,
    }  # fmt: skip
    # nothing from a file that did not parse reaches the tables
    assert set(run["parsed"].documents["path"]) == set(GOOD)


def test_workers_import_the_ragrig_being_run(monkeypatch):
    """Python 3.11's forkserver ignores sys.path: the src/ of this ragrig leads PYTHONPATH."""
    import ragrig
    from ragrig.parse.docling import _context

    src = str(Path(ragrig.__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    _context()
    assert os.environ["PYTHONPATH"] == os.pathsep.join([src, "/elsewhere"])


def test_a_timed_out_conversion_is_killed(run):
    """The hanging worker wrote its pid before sleeping: that process no longer exists."""
    pid = int((run["folder"] / "hang_me.html.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert _status(run)["hang_me.html"].seconds == pytest.approx(TIMEOUT_S)


def test_failure_share_gate_names_the_files(run):
    entries = run["entries"]  # 5 failed + 1 timed out of 14 files = 0.43
    check_failures(entries, 0.43)
    with pytest.raises(DataValidationError) as err:
        check_failures(entries, 0.42)
    msg = str(err.value)
    assert "6 of 14 file(s)" in msg and "max_failure_share=0.42" in msg
    bad = (
        "corrupt.pdf",
        "corrupt.docx",
        "encrypted.pdf",
        "empty.html",
        "hang_me.html",
        "crash_me.md",
    )
    for path in bad:
        assert path in msg
    assert "notes.txt" not in msg  # skipped files are not failures
    with pytest.raises(DataValidationError, match="max_failure_share"):
        run["parser"].__class__(max_failure_share=0.3).assemble(
            entries, _dataset(run["folder"]), [run["folder"]]
        )


@pytest.mark.full  # make test-all: a PDF conversion
def test_a_pdf_without_text_is_skipped_as_needing_ocr(tmp_path):
    import matplotlib

    matplotlib.use("pdf")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 3))
    fig.add_subplot().plot([0, 1], [1, 0])  # lines only: a page with no text layer
    fig.axes[0].set_axis_off()
    fig.savefig(tmp_path / "scan.pdf")
    (e,) = DoclingParser(timeout_s=60).convert([tmp_path])
    assert (e.status, e.pages) == ("skipped", 1)
    assert "needs OCR" in e.reason


# --- structure, spans, ids ---------------------------------------------------------------------


def test_tables_are_valid_and_spans_index_content(run):
    parsed = run["parsed"]
    docs, elems = parsed.documents, parsed.elements
    validate(docs, "documents")
    validate(elems, "elements")
    content = dict(zip(docs["doc_id"], docs["content"], strict=True))
    for row in elems.itertuples():
        assert content[row.doc_id][row.start : row.end] == row.text
    # each row's content is exactly its elements joined by a blank line
    for doc_id, group in elems.groupby("doc_id"):
        assert content[doc_id] == "\n\n".join(group.sort_values("n")["text"])


def test_headings_become_sections_and_a_table_is_one_element(run):
    docs, elems = run["parsed"].documents, run["parsed"].elements
    garden = docs[docs["path"] == "garden.html"]
    assert list(garden["section"]) == ["", "Soil", "Soil > Compost", "Watering", "Harvest calendar"]
    assert list(garden["title"])[2] == "Garden guide > Soil > Compost"
    fid = garden["file_id"].iloc[0]
    assert list(garden["doc_id"]) == [f"{fid}/s{n:03d}" for n in range(5)]
    tables = elems[elems["doc_id"].str.startswith(fid) & (elems["kind"] == "table")]
    assert len(tables) == 1
    assert tables["text"].iloc[0].splitlines()[0].split("|")[1].strip() == "Crop"
    assert "| Pumpkin | October |" in tables["text"].iloc[0]
    items = elems[elems["doc_id"].str.startswith(fid) & (elems["kind"] == "list_item")]
    assert list(items["text"]) == [
        "- Tomatoes need deep watering twice a week.",
        "- Lettuce needs shallow daily watering.",
    ]
    assert set(items["section"]) == {"Watering"}
    # Markdown in a subfolder: numbered list, nested heading, its path kept
    bike = docs[docs["path"] == "manuals/bicycle.md"]
    assert "Brakes > Cable tension" in set(bike["section"])
    assert bike["file_id"].iloc[0].startswith("manuals-bicycle-md-")
    # DOCX: heading levels, a table, bullets; PPTX: one section per slide title
    docx = docs[docs["path"] == "relocation.docx"]
    assert list(docx["section"]) == [
        "Office relocation plan",
        "Office relocation plan > Schedule",
        "Office relocation plan > Rooms",
    ]
    assert set(docs[docs["path"] == "review.pptx"]["section"]) == {"", "Next steps"}
    assert set(docs["format"]) == {"html", "md", "docx", "pptx", "xlsx", "pdf"}


def test_pdf_keeps_page_numbers(run):
    docs, elems = run["parsed"].documents, run["parsed"].elements
    (doc_id,) = docs.loc[docs["path"] == "lighthouse.pdf", "doc_id"]
    pdf = elems[elems["doc_id"] == doc_id]
    page = dict(zip(pdf["text"], pdf["page"], strict=True))
    assert page["Lighthouse keeping"] == 1
    assert page["The lens was polished with soft cloth and spirit."] == 1
    assert page["Fog signals"] == 2
    assert page["Ships counted the interval to recognise the station."] == 2
    assert docs.loc[docs["doc_id"] == doc_id, "page_start"].item() == 1
    assert set(elems.loc[~elems["doc_id"].isin([doc_id]), "page"]) <= {0, 1, 2}  # slides, sheet


def test_docling_json_per_file(run):
    parsed = run["parsed"]
    assert sorted(parsed.docling) == sorted(set(parsed.documents["file_id"]))
    fid = parsed.documents.loc[parsed.documents["path"] == "garden.html", "file_id"].iloc[0]
    doc = json.loads(parsed.docling[fid])
    refs = set(parsed.elements.loc[parsed.elements["doc_id"].str.startswith(fid), "self_ref"])
    assert refs <= {t["self_ref"] for t in doc["texts"]} | {t["self_ref"] for t in doc["tables"]}


def test_ids_are_stable_and_follow_content(run, tmp_path):
    first = run["parsed"].documents
    shutil.copytree(DOCS, tmp_path, dirs_exist_ok=True)
    md = tmp_path / "manuals" / "bicycle.md"
    md.write_text(md.read_text().replace("two hundred", "three hundred"))
    parser = DoclingParser(workers=2, timeout_s=60)
    again_parsed = parser.parse(_dataset(tmp_path, golden=None))
    second = again_parsed.documents
    # an unchanged file gives the same DoclingDocument JSON, whatever folder it was read from
    fid = first.loc[first["path"] == "relocation.docx", "file_id"].iloc[0]
    assert again_parsed.docling[fid] == run["parsed"].docling[fid]
    ids = {p: set(g["doc_id"]) for p, g in first.groupby("path")}
    again = {p: set(g["doc_id"]) for p, g in second.groupby("path")}
    changed = "manuals/bicycle.md"
    assert {p: again[p] for p in again if p != changed} == {p: ids[p] for p in ids if p != changed}
    assert again[changed].isdisjoint(ids[changed])
    # the id is the path's slug and a hash of path and text: derived, not random
    e = next(e for e in run["entries"] if e.path == "garden.html")
    text = "\n\n".join(el["text"] for el in e.result["elements"])
    assert e.file_id == file_id_of("garden.html", text)
    assert file_id_of("garden.html", text) != file_id_of("other/garden.html", text)


def test_unit_file_gives_one_row_per_file(run):
    e = next(e for e in run["entries"] if e.path == "garden.html")
    docs, elems = build_rows(e, "docling:x", "file")
    assert [d["doc_id"] for d in docs] == [e.file_id]
    assert docs[0]["section"] == "" and docs[0]["title"] == "Garden guide"
    for el in elems:
        assert docs[0]["content"][el["start"] : el["end"]] == el["text"]
    assert elems[4]["section"] == "Soil > Compost"  # elements keep their section


# --- golden queries and qrels --------------------------------------------------------------------


def test_golden_qrels_map_sections_to_doc_ids(run):
    parsed = run["parsed"]
    docs, qrels, queries = parsed.documents, parsed.qrels, parsed.queries
    validate(qrels, "qrels")
    validate(queries, "queries")
    by = {(p, s): d for p, s, d in zip(docs["path"], docs["section"], docs["doc_id"], strict=True)}
    gold = {q: dict(zip(g["doc_id"], g["relevance"], strict=True)) for q, g in qrels.groupby("qid")}
    assert gold["q1"] == {by[("garden.html", "Soil > Compost")]: 2}
    # a gold section includes its subsections
    assert gold["q6"] == {by[("garden.html", "Soil")]: 1, by[("garden.html", "Soil > Compost")]: 1}
    assert set(gold["q3"]) == {
        by[("manuals/bicycle.md", "Brakes")],
        by[("manuals/bicycle.md", "Brakes > Cable tension")],
    }
    assert gold["q5"] == {by[("lighthouse.pdf", "")]: 1}  # "" = the whole file
    assert list(queries["qid"]) == ["q1", "q2", "q3", "q4", "q5", "q6"]
    assert queries.set_index("qid").loc["q3", "n_gold"] == 2
    assert list(queries["meta_format"])[:2] == ["html", "md"]
    assert parsed.stats["queries_unjudged"] == 1  # q7


def _target() -> GoldTarget:
    return GoldTarget(
        sections={"a.md": [("a/s000", ""), ("a/s001", "Intro"), ("a/s002", "Intro > Goals")]},
        not_parsed={"broken.pdf": "failed"},
    )


def test_qrels_name_the_line_of_an_unknown_file_or_section(tmp_path):
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tpath\tsection\trelevance\nq1\ta.md\tIntro\t1\nq2\tb.md\t\t1\n")
    with pytest.raises(DataValidationError, match=r"qrels.tsv:3: unknown file 'b.md'"):
        load_gold_qrels(qrels, _target(), "section")
    qrels.write_text("query-id\tpath\tsection\trelevance\nq1\ta.md\tIntro > Method\t1\n")
    with pytest.raises(
        DataValidationError, match=r"qrels.tsv:2: file 'a.md' has no section 'Intro > Method'"
    ):
        load_gold_qrels(qrels, _target(), "section")
    qrels.write_text("query-id\tpath\tsection\trelevance\nq1\ta.md\tIntro\n")
    with pytest.raises(DataValidationError, match=r"qrels.tsv:2: expected 4 tab-separated"):
        load_gold_qrels(qrels, _target(), "section")


def test_qrels_on_a_file_not_parsed_keep_gold_that_cannot_be_found():
    assert map_gold("broken.pdf", "Intro", _target(), "x:1", "section") == ["unparsed:broken.pdf"]
    assert map_gold("a.md", "Intro", _target(), "x:1", "section") == ["a/s001", "a/s002"]
    # unit=file: the section is ignored; the file's one id
    target = GoldTarget(sections={"a.md": [("a", "")]}, not_parsed={})
    assert map_gold("a.md", "Intro > Nowhere", target, "x:1", "file") == ["a"]


def test_qrels_naming_an_unknown_query(run, tmp_path):
    shutil.copy(GOLDEN / "queries.jsonl", tmp_path / "queries.jsonl")
    lines = (GOLDEN / "qrels.tsv").read_text() + "q99\tgarden.html\tSoil\t1\n"
    (tmp_path / "qrels.tsv").write_text(lines)
    ds = _dataset(run["folder"], golden=tmp_path)
    with pytest.raises(
        DataValidationError, match=r"qrels\.tsv: 1 query id \('q99'\) not in .*queries\.jsonl$"
    ):
        DoclingParser(max_failure_share=0.9).assemble(run["entries"], ds, [run["folder"]])


def test_documents_table_columns(run):
    docs = run["parsed"].documents
    assert list(docs.columns[6:]) == ["file_id", "path", "format", "section", "page_start"]
    assert not docs["path"].str.startswith("/").any()
    assert (docs["source"] == "docling:docs-test").all()
    assert pd.api.types.is_integer_dtype(docs["page_start"])


# --- the stage wrapper ------------------------------------------------------------------------


def test_stage_writes_elements_docling_json_and_the_report(tmp_path, monkeypatch, capsys):
    import runpy
    import sys

    import yaml

    from ragrig.core.io import read_json, read_table

    project = FIXTURES.parents[1]
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["dataset"] = {"name": "docs-fixture", "root": str(DOCS), "golden": str(GOLDEN)}
    params["parse"] = {"method": "docling", "workers": 2, "timeout_s": 60}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    out = tmp_path / "parse"
    monkeypatch.syspath_prepend(str(project / "stages"))  # the wrapper's `import _bootstrap`
    wrapper = runpy.run_path(str(project / "stages" / "parse.py"), run_name="parse_stage")
    monkeypatch.setattr(
        sys, "argv", ["parse.py", "--params", str(tmp_path / "params.yaml"), "--out", str(out)]
    )
    wrapper["main"]()
    docs = read_table(out / "documents.parquet", "documents")
    elems = read_table(out / "elements.parquet", "elements")
    assert set(elems["doc_id"]) == set(docs["doc_id"])
    files = sorted(set(docs["file_id"]))
    assert sorted(p.stem for p in (out / "docling").glob("*.json")) == sorted([*files, "index"])
    assert json.loads((out / "docling" / "index.json").read_text()) == {"files": files}
    report = read_json(out / "parse_report.json")
    assert [f["path"] for f in report["files"]] == GOOD
    by_path = {p: set(g) for p, g in docs.groupby("path")["file_id"]}
    assert all({f["file_id"]} == by_path[f["path"]] and f["chars"] > 0 for f in report["files"])
    assert report["counts"] == {"parsed": len(GOOD), "failed": 0, "skipped": 0, "timed_out": 0}
    manifest = read_json(out / "manifest.json")
    assert manifest["files"] == report["counts"] and manifest["documents"] == len(docs)
    assert manifest["split"] == "test" and "empty_text" not in manifest
    assert manifest["queries"] == 6 and manifest["judgments"] == len(
        read_table(out / "qrels.parquet", "qrels")
    )
    printed = capsys.readouterr().out
    assert f"parse: files: {len(GOOD)} parsed, 0 failed, 0 skipped, 0 timed out" in printed


def test_console_names_files_not_parsed_up_to_a_limit():
    from ragrig.parse.docling import SHOWN, parse_report, stats_lines

    entries = [
        FileEntry(f"f{i:02d}.txt", Path("x"), "", "skipped", "unsupported", "unsupported")
        for i in range(25)
    ]
    entries.append(FileEntry("ok.md", Path("y"), "md", "parsed"))
    lines = stats_lines({"unit": "section"}, parse_report(entries))
    assert lines[0] == (
        "parse: files: 1 parsed, 0 failed, 25 skipped (unsupported 25), 0 timed out (unit=section)"
    )
    assert lines[1] == "parse:   skipped: f00.txt: unsupported"
    assert lines[SHOWN + 1] == "parse:   and 5 more (parse_report.json)"
    assert lines[-1] == "parse: no golden queries (dataset.golden is not set)"


def test_data_ensure_accepts_a_documents_dataset(tmp_path):
    """`ragrig data ensure` (run by `make repro`) checks a documents dataset's folders instead of
    reading them as a BEIR layout."""
    import subprocess
    import sys

    import yaml

    project = FIXTURES.parents[1]
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["dataset"] = {"name": "docs", "root": str(DOCS), "golden": str(GOLDEN)}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    cmd = [sys.executable, "-m", "ragrig", "data", "ensure", "--params", "params.yaml"]
    env = {**os.environ, "PYTHONPATH": str(project / "src")}  # this checkout's ragrig
    ok = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == (
        f"dataset docs present at {DOCS}: {len(GOOD)} files in 1 documents folder(s), "
        f"golden set {GOLDEN}"
    )
    params["dataset"]["golden"] = str(tmp_path / "nowhere")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    bad = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert bad.returncode != 0
    assert f"dataset docs: not found: {tmp_path / 'nowhere' / 'queries.jsonl'}" in bad.stderr
