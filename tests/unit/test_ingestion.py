"""Ingestion metrics: exact values on tiny hand-made inputs and the two reference examples."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ragrig.chunk.quality import labelled_pairs
from ragrig.chunk.structure import Elements, units
from ragrig.metrics import ingestion as m


def test_cer_wer_reproduce_the_reference_example(reference):
    ex = reference["cer_wer"]
    out = m.cer_wer(ex["refs"], ex["hyps"])
    assert round(out["cer"], 3) == ex["expected"]["cer"] == 0.105
    assert round(out["wer"], 3) == ex["expected"]["wer"] == 0.286
    # m00ns: 2 substitutions; Deirnos: m->r and an inserted n; over 38 characters, 7 words
    assert (out["char_errors"], out["ref_chars"]) == (4, 38)
    assert (out["word_errors"], out["ref_words"]) == (2, 7)


def test_text_fidelity_per_type_and_empty_reference_counted_not_scored():
    out = m.text_fidelity(
        [
            {"type": "html", "reference": "a b c d", "hypothesis": "a b x d"},
            {"type": "html", "reference": "", "hypothesis": "junk"},
            {"type": "pdf", "reference": "abcd", "hypothesis": "abcd"},
        ]
    )
    html = out["by_type"]["html"]
    assert (html["documents"], html["empty_references"]) == (1, 1)
    assert html["wer"] == 0.25 and html["cer"] == 1 / 7
    assert out["by_type"]["pdf"]["cer"] == 0.0
    # over all: 1 char error in 7 + 4 characters, 1 word error in 4 + 1 words
    assert out["all"]["cer"] == 1 / 11 and out["all"]["wer"] == 1 / 5
    empty = m.cer_wer([""], ["x"])
    assert empty["cer"] is None and empty["documents"] == 0 and empty["empty_references"] == 1


def test_normalise_markdown_strips_syntax_the_same_way_for_both_sides():
    md = (
        "# Moons of **Mars**\n\n- Phobos [link](http://x)\n1. Deimos\n\n"
        "| Moon | km |\n|---|---:|\n| Phobos | 22 |\n\n<!-- image -->\n`code` snake_case _em_"
    )
    assert m.normalise_markdown(md) == (
        "Moons of Mars Phobos link Deimos Moon km Phobos 22 code snake_case em"
    )
    assert m.normalise_markdown("ﬁne\u00a0 text") == "fine text"  # NFKC
    assert m.normalise_markdown("ON &lt;table name&gt; &amp; <b>x</b>") == "ON <table name> & x"
    # escapes keep their literal character; a table rule with one dash per cell is a rule
    assert m.normalise_markdown("RRID:AB\\_262044 \\*x\\* a\\\\b\n| - | :-: |") == (
        "RRID:AB_262044 *x* a\\b"
    )


PARTS = ["Intro text here.", "| a | b |\n|---|---|\n| 1 | 2 |", "- one", "- two", "Tail."]
DOC = "\n\n".join(PARTS)
STARTS = [0, 18, 49, 56, 63]  # each part after a blank line
ELEMENTS = pd.DataFrame(
    {
        "doc_id": ["d"] * 5,
        "n": [0, 1, 2, 3, 4],
        "kind": ["text", "table", "list_item", "list_item", "text"],
        "text": PARTS,
        "page": [1, 1, 2, 2, 2],
        "section": ["", "S", "S > L", "S > L", "S > L"],
        "start": STARTS,
        "end": [s + len(p) for s, p in zip(STARTS, PARTS, strict=True)],
        "level": [0, 0, 0, 0, 0],
        "self_ref": ["#/texts/0", "#/tables/0", "#/texts/1", "#/texts/2", "#/texts/3"],
    }
)
DOCS = pd.DataFrame({"doc_id": ["d"], "content": [DOC]})


def _chunks(spans, doc=DOC, doc_id="d"):
    return pd.DataFrame(
        [
            {"chunk_id": f"{doc_id}#{i}", "doc_id": doc_id, "text": doc[s:e], "start": s, "end": e}
            for i, (s, e) in enumerate(spans)
        ]
    )


def test_elements_fixture_spans_are_consistent():
    for row in ELEMENTS.itertuples():
        assert DOC[row.start : row.end] == row.text


def test_attribution_counts_each_failure_by_reason():
    chunks = _chunks([(0, 16), (18, 47), (49, 61)])
    chunks.loc[1, "text"] = "changed"
    extra = pd.DataFrame(
        [
            {"chunk_id": "x#0", "doc_id": "x", "text": "a", "start": 0, "end": 1},
            {"chunk_id": "d#9", "doc_id": "d", "text": "", "start": 61, "end": 99},
        ]
    )
    out = m.attribution(pd.concat([chunks, extra], ignore_index=True), DOCS)
    assert out["value"] == 2 / 5 and (out["verified"], out["chunks"]) == (2, 5)
    assert out["failures"] == {"span_out_of_range": 1, "text_mismatch": 1, "unknown_document": 1}
    # with elements: page and section of the element holding the start must match
    with_ptr = _chunks([(0, 16), (49, 61)])
    with_ptr["page"], with_ptr["section"] = [1, 1], ["", "S > L"]
    out = m.attribution(with_ptr, DOCS, Elements(ELEMENTS).pointer)
    assert out["value"] == 0.5 and out["failures"] == {"page_mismatch": 1}
    empty = m.attribution(
        _chunks([]).reindex(columns=["chunk_id", "doc_id", "text", "start", "end"]), DOCS
    )
    assert empty["value"] is None and empty["chunks"] == 0


def _count(text: str) -> int:
    return len(text.split())


def test_boundary_violation_is_a_partial_unit_that_would_have_fitted():
    idx = Elements(ELEMENTS)
    found = {(u.kind, u.start, u.end) for u in units(idx)}
    assert found == {("table", 18, 47), ("list", 49, 61)}
    # chunk 0 cuts the table (15 words <= 20), chunk 1 holds the list whole, chunk 2 cuts it
    chunks = _chunks([(0, 30), (49, 61), (56, 68)])
    out = m.boundary_violations(chunks, DOCS, units(idx), 20, _count)
    assert out["value"] == 2 / 3 and out["violating_chunks"] == 2
    assert out["by_kind"] == {"table": 1, "list": 1, "numbered_section": 0}
    assert out["units"] == {"table": 1, "list": 1, "numbered_section": 0}
    # a table longer than max_tokens cannot fit in one chunk: cutting it is no violation
    out = m.boundary_violations(chunks, DOCS, units(idx), 5, _count)
    assert out["by_kind"] == {"table": 0, "list": 1, "numbered_section": 0}
    # no limit (the document chunker): whole document, nothing split
    assert m.boundary_violations(_chunks([(0, 68)]), DOCS, units(idx), None, _count)["value"] == 0


def test_numbered_section_unit_is_its_body_up_to_the_next_heading_of_its_level():
    content = "1. Scope\n\nA b.\n\n1.1 Detail\n\nC d.\n\n2. Next\n\nE f."
    spans = [(0, 8), (10, 14), (16, 26), (28, 32), (34, 41), (43, 47)]
    kinds = ["section_header", "text", "section_header", "text", "section_header", "text"]
    levels = [1, 0, 2, 0, 1, 0]
    els = pd.DataFrame(
        {
            "doc_id": "d",
            "n": range(6),
            "kind": kinds,
            "text": [content[s:e] for s, e in spans],
            "page": 0,
            "section": "",
            "start": [s for s, _ in spans],
            "end": [e for _, e in spans],
            "level": levels,
            "self_ref": [f"#/texts/{i}" for i in range(6)],
        }
    )
    got = sorted((u.label, u.start, u.end) for u in units(Elements(els)))
    assert got == [("1. Scope", 10, 32), ("1.1 Detail", 28, 32), ("2. Next", 43, 47)]
    docs = pd.DataFrame({"doc_id": ["d"], "content": [content]})
    # a chunk ending after "A b." splits section 1 (its body 10..32 would have fitted)
    out = m.boundary_violations(
        _chunks([(0, 14), (16, 47)], content), docs, units(Elements(els)), 50, _count
    )
    assert out["violating_chunks"] == 2 and out["by_kind"]["numbered_section"] == 2


def test_coherence_within_minus_across_by_hand():
    e1, e2, e3 = np.eye(3)
    mid = np.array([0.6, 0.8, 0.0])
    docs = [
        [np.stack([e1, e1]), np.stack([e2, mid])],  # within: 1.0 and 0.8; across: e1.e2 = 0
        [np.stack([e3])],  # one chunk: no pair
    ]
    out = m.coherence(docs)
    assert out["within"] == pytest.approx(0.9) and out["within_pairs"] == 2
    assert out["across"] == 0.0 and out["across_pairs"] == 1
    assert out["value"] == pytest.approx(0.9) and out["documents"] == 2
    none = m.coherence([[np.stack([e1])]])
    assert none["value"] is None and none["within"] is None and none["across"] is None


def test_minhash_lsh_reproduces_the_reference_example(reference):
    ex = reference["minhash_near_duplicates"]
    lsh, hashes, empty = m.lsh_index(
        ex["docs"], k=ex["shingle_chars"], num_perm=ex["num_perm"], threshold=ex["threshold"]
    )
    assert sorted(lsh.query(hashes["d1"])) == ex["expected_query_d1"] == ["d1", "d2"]
    assert empty == []
    out = m.near_duplicates({**ex["docs"], "d4": "  "})
    assert out["groups"] == 1 and out["examples"] == [["d1", "d2"]]
    assert (out["items"], out["empty"], out["items_in_groups"]) == (3, 1, 2)
    assert out["value"] == 2 / 3
    assert m.near_duplicates({})["value"] is None


def test_a_minhash_is_datasketchs_over_the_character_shingles():
    # the shared permutations and the bytes of an ASCII text's shingles give the same sketch as
    # a new MinHash fed each shingle's UTF-8 bytes
    import zlib

    from datasketch import MinHash

    for text in ("Phobos  orbits\nMars.", "naïve café, ¥100", "abc", "  "):
        want = MinHash(num_perm=m.NUM_PERM, seed=m.MINHASH_SEED, hashfunc=zlib.crc32)
        want.update_batch([s.encode("utf-8") for s in sorted(m.shingles(text))])
        assert np.array_equal(m.minhash(text).hashvalues, want.hashvalues), text
    assert not np.array_equal(m.minhash("abcdef").hashvalues, m.minhash("abcdeg").hashvalues)


def _jaccard(a: str, b: str) -> float:
    x, y = m.shingles(a), m.shingles(b)
    return len(x & y) / len(x | y)


def test_false_and_missed_merges_on_the_labelled_sample():
    pairs = labelled_pairs()
    assert len(pairs) == 12
    # every pair is far from the 0.8 threshold; two are hard cases for a lexical detector
    for p in pairs:
        j = _jaccard(p["a"], p["b"])
        if p["id"] == "p10":  # distinct: another revenue figure in the same long sentence
            assert 0.92 < j < 0.94
        elif p["id"] == "p06":  # duplicate in meaning, reworded
            assert j < 0.3
        else:
            assert (j >= 0.9) if p["duplicate"] else (j <= 0.1), p["id"]
    out = m.merge_errors(pairs)
    assert (out["duplicates"], out["distinct"]) == (6, 6)
    assert (out["false_merges"], out["missed_merges"]) == (1, 1)
    assert out["false_merge_rate"] == out["missed_merge_rate"] == 1 / 6
    assert m.merge_errors([])["false_merge_rate"] is None


def test_report_summary_lines_and_mlflow_keys_of_the_ingestion_section():
    from ragrig.metrics.aggregate import flatten
    from ragrig.report.summary import ingestion_lines

    ing = {
        "attribution": {"value": 1.0, "verified": 4, "chunks": 4, "failures": {}},
        "boundary_violations": {
            "value": 0.25,
            "violating_chunks": 1,
            "chunks": 4,
            "by_kind": {"table": 1, "list": 0, "numbered_section": 0},
            "max_tokens": None,
        },
        "coherence": {
            "value": None,
            "within": None,
            "within_pairs": 0,
            "across": None,
            "across_pairs": 0,
        },
        "near_duplicates": {
            "documents": {
                "value": 2 / 3,
                "items": 3,
                "items_in_groups": 2,
                "examples": [["a", "b"]],
            },
            "chunks": {"value": None, "items": 0, "items_in_groups": 0},
            "labelled": {"false_merges": 1, "distinct": 6, "missed_merges": 1, "duplicates": 6},
        },
    }
    assert ingestion_lines(ing) == [
        "ingestion: attribution 1.0000 (4/4); boundary violations 0.2500 (1/4) (table 1, list 0, "
        "numbered_section 0); coherence n/a (0 within, 0 across pairs)",
        "near-duplicates: documents 0.6667 (2/3), chunks n/a (0/0); labelled sample: "
        "1/6 false merges, 1/6 missed merges",
    ]
    assert ingestion_lines(None) == []
    keys = flatten({"ingestion": ing})
    assert keys["ingestion/attribution/value"] == 1.0
    assert keys["ingestion/near_duplicates/labelled/false_merges"] == 1.0
    assert "ingestion/coherence/value" not in keys  # absent, never NaN


def test_ingest_fidelity_scores_a_reference_folder_per_type(tmp_path, reference):
    from ragrig.metrics.fidelity import format_table, score_folder

    ex = reference["cer_wer"]
    (tmp_path / "groundtruth").mkdir()
    for kind, name, ref in (("html", "a.html", ex["refs"][0]), ("pdf", "b.pdf", "# Title\n\nOk.")):
        (tmp_path / kind).mkdir()
        (tmp_path / kind / name).write_text("source")
        (tmp_path / "groundtruth" / f"{name}.md").write_text(ref)
    (tmp_path / "pdf" / "bad.pdf").write_text("x")
    (tmp_path / "groundtruth" / "bad.pdf.md").write_text("x")
    (tmp_path / "html" / "no_reference.html").write_text("x")
    outputs = {"a.html": "**" + ex["hyps"][0] + "**", "b.pdf": "## Title\nOk."}

    def convert(path):
        if path.name == "bad.pdf":
            raise ValueError("encrypted")
        return outputs[path.name]

    out = score_folder(tmp_path, convert)
    assert round(out["by_type"]["html"]["cer"], 3) == 0.105
    assert round(out["by_type"]["html"]["wer"], 3) == 0.286
    assert out["by_type"]["pdf"]["cer"] == 0.0 and out["by_type"]["pdf"]["documents"] == 1
    assert out["failed"] == [{"type": "pdf", "file": "bad.pdf", "reason": "ValueError: encrypted"}]
    assert [r["file"] for r in out["documents"]] == ["a.html", "b.pdf"]
    assert "| html | 1 | 0.105 | 0.286 | 38 |" in format_table(out)


def test_ingest_fidelity_with_docling_on_a_small_html(tmp_path):
    from ragrig.metrics.fidelity import score_folder
    from tests.conftest import SHARED

    docs = SHARED / "datasets" / "docling_test_docs"
    if not docs.is_dir():
        pytest.skip("../shared/datasets/docling_test_docs not present")
    (tmp_path / "html").mkdir()
    (tmp_path / "groundtruth").mkdir()
    for rel in ("html/example_01.html", "groundtruth/example_01.html.md"):
        (tmp_path / rel).write_bytes((docs / rel).read_bytes())
    out = score_folder(tmp_path)
    assert out["by_type"]["html"]["documents"] == 1 and out["failed"] == []
    assert out["by_type"]["html"]["cer"] == 0.0 and out["by_type"]["html"]["wer"] == 0.0


def test_files_not_parsed_reach_the_summary_and_the_scorecard_capped():
    """A documents folder's counted failures go from the parse manifest (ragrig.parse.docling)
    to metrics.json, the console summary and the HTML scorecard: counts per status and cause,
    at most three files named per status, then how many more."""
    from pathlib import Path

    from ragrig.metrics.aggregate import flatten
    from ragrig.parse.docling import FileEntry, not_parsed, parse_report
    from ragrig.report.html import run_page_html
    from ragrig.report.inputs import parse_files
    from ragrig.report.summary import files_lines

    from ..html_pages import known_metrics

    def entry(path: str, status: str, cause: str = "", reason: str = "") -> FileEntry:
        return FileEntry(path, Path(path), "pdf", status, reason, cause)

    mismatch = "content does not match its extension .pdf: a ZIP archive"
    entries = [
        entry("a.md", "parsed"),
        *(entry(f"r{i}.pdf", "failed", "content_mismatch", mismatch) for i in range(4)),
        entry("empty.html", "failed", "empty", "empty file (0 bytes)"),
        entry("leak.md", "skipped", "link_outside", "symbolic link to a file outside"),
    ]
    report = parse_report(entries)
    manifest = {"files": report["counts"], "not_parsed": not_parsed(report), "documents": 3}
    files = parse_files(manifest)
    assert parse_files({"documents": 3, "queries": 2}) is None  # a BEIR corpus: no files
    metrics = {
        "counts": {"queries": 2, "files": files["counts"]},
        "files_not_parsed": files["not_parsed"],
    }
    lines = files_lines(metrics)
    assert lines == [
        "files 7: parsed 1, failed 5 (content_mismatch 4, empty 1), skipped 1 (link_outside 1), "
        "timed out 0",
        f"  failed: r0.pdf ({mismatch}); r1.pdf ({mismatch}); r2.pdf ({mismatch}); "
        "and 2 more (data/parse/parse_report.json)",
        "  skipped: leak.md (symbolic link to a file outside)",
    ]
    assert files_lines({"counts": {"queries": 2}}) == []
    keys = flatten(metrics)
    assert keys["counts/files/failed"] == 5.0
    assert keys["files_not_parsed/failed/causes/content_mismatch"] == 4.0
    assert 'id="files"' not in run_page_html(known_metrics())  # no documents folder
    full = known_metrics()
    full["counts"] = {**full["counts"], "files": files["counts"]}
    full["files_not_parsed"] = files["not_parsed"]
    page = run_page_html(full)
    assert (
        '<p class="sub" id="files">files 7: parsed 1, failed 5 (content_mismatch 4, empty 1), '
        "skipped 1 (link_outside 1), timed out 0</p>" in page
    )
    assert '<p class="note">skipped: leak.md (symbolic link to a file outside)</p>' in page
