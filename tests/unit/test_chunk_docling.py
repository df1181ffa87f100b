"""chunk=hybrid and chunk=semantic, and page/section pointers, over a small HTML document
converted by docling in the test (tests/docling_corpus.py builds the parse-like tables)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ragrig.chunk import chunk_documents, make_chunker
from ragrig.chunk.base import load_tokenizer
from ragrig.chunk.document import DocumentChunker
from ragrig.chunk.hybrid import Element, HybridDoclingChunker, paragraphs, uncovered_runs
from ragrig.chunk.recursive import RecursiveTokenChunker
from ragrig.chunk.semantic import SemanticChunker, pack, sentence_spans
from ragrig.chunk.structure import Elements, units
from ragrig.metrics import ingestion as m
from tests.docling_corpus import convert, write_parse_dir

HTML = Path(__file__).resolve().parents[1] / "fixtures" / "docling" / "moons.html"
MINILM = "packaged:all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def dl_doc():
    return convert(HTML)


@pytest.fixture(scope="module")
def parsed(dl_doc, tmp_path_factory):
    """unit -> (documents, elements, docling dir)."""
    out = {}
    for unit in ("file", "section"):
        folder = tmp_path_factory.mktemp(f"parse_{unit}")
        docs, els = write_parse_dir(dl_doc, folder, "moons-0123456789", unit)
        out[unit] = (docs, els, folder / "docling")
    return out


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(MINILM)


def _hybrid(parsed, unit, max_tokens, overlap=0):
    docs, els, folder = parsed[unit]
    chunker = HybridDoclingChunker(MINILM, max_tokens, overlap)
    return chunk_documents(docs, chunker, False, elements=els, docling_dir=folder), chunker


def _list_and_table(parsed, unit="file"):
    docs, els, _ = parsed[unit]
    found = {u.kind: u for u in units(Elements(els)) if u.kind in ("list", "table")}
    return found["list"], found["table"]


def test_hybrid_uses_the_packaged_tokenizer_never_the_hub():
    from ragrig.weights.models import resolve_model

    chunker = HybridDoclingChunker(MINILM, 64)
    hf = chunker.chunker.tokenizer
    assert hf.get_max_tokens() == 64
    assert Path(hf.get_tokenizer().name_or_path) == Path(resolve_model(MINILM))


def test_hybrid_never_splits_a_table_or_a_list_and_every_pointer_resolves(parsed, tok):
    docs, els, _ = parsed["file"]
    lst, table = _list_and_table(parsed)
    # 16 tokens: docling alone cuts the list into items and the table into rows
    chunks, chunker = _hybrid(parsed, "file", 16)
    spans = list(zip(chunks["start"], chunks["end"], strict=True))
    assert (lst.start, lst.end) in spans and (table.start, table.end) in spans
    assert chunker.stats["joined_pieces"] > 0 and chunker.stats["oversized"] == 2
    content = docs["content"].iloc[0]
    assert all(
        content[s:e] == t for s, e, t in zip(chunks.start, chunks.end, chunks.text, strict=True)
    )
    # a paragraph docling cut is located piece by piece inside the paragraph
    para = els[els["text"].str.startswith("Phobos is the larger")].iloc[0]
    inside = chunks[(chunks.start >= para.start) & (chunks.end <= para.end)]
    assert len(inside) > 1 and inside["text"].iloc[0] == "Phobos is the larger moon."
    # the pointer: page 0 (HTML has none) and the section of the element at the start
    assert set(chunks["page"]) == {0}
    assert chunks.loc[chunks.start == lst.start, "section"].item() == "Moons of Mars > 1. Phobos"
    n_tokens = [len(tok.encode(t, add_special_tokens=False).ids) for t in chunks.text]
    assert sum(n > 16 for n in n_tokens) == chunker.stats["oversized"]
    att = m.attribution(chunks, docs, Elements(els).pointer)
    assert att["value"] == 1.0 and att["checked_page_section"]
    bv = m.boundary_violations(
        chunks, docs, units(Elements(els)), 16, lambda t: len(tok.encode(t).ids)
    )
    assert bv["by_kind"]["table"] == bv["by_kind"]["list"] == 0


def test_hybrid_packs_a_section_into_one_chunk_when_it_fits(parsed):
    chunks, _ = _hybrid(parsed, "file", 128)
    phobos = chunks[chunks["section"] == "Moons of Mars > 1. Phobos"]
    assert len(phobos) == 1
    assert phobos["text"].item().startswith("Phobos is the larger moon.")
    assert phobos["text"].item().endswith("Discovered in 1877 by Asaph Hall")


def test_hybrid_over_section_rows_points_into_each_row(parsed):
    docs, els, _ = parsed["section"]
    chunks, _ = _hybrid(parsed, "section", 64)
    assert len(docs) == 4
    section_of = dict(zip(docs["doc_id"], docs["section"], strict=True))
    assert all(section_of[d] == s for d, s in zip(chunks.doc_id, chunks.section, strict=True))
    assert m.attribution(chunks, docs, Elements(els).pointer)["value"] == 1.0


def test_hybrid_overlap_reaches_back_but_never_into_a_table_or_list(parsed, tok):
    docs, els, _ = parsed["file"]
    lst, table = _list_and_table(parsed)
    base, _ = _hybrid(parsed, "file", 16)
    over, _ = _hybrid(parsed, "file", 16, overlap=4)
    assert len(over) == len(base) and list(over.end) == list(base.end)
    content = docs["content"].iloc[0]
    moved = 0
    for (s0, prev_s), s1 in zip(
        zip(base.start[1:], base.start[:-1], strict=True), over.start[1:], strict=True
    ):
        assert prev_s < s1 <= s0
        between = content[s1:s0]
        assert len(tok.encode(between, add_special_tokens=False).ids) <= 4
        for u in (lst, table):
            assert not (u.start < s1 < u.end)
        moved += s1 < s0
    assert moved >= len(base) // 2


def test_hybrid_without_docling_documents_chunks_paragraphs():
    content = "First paragraph here.\n\nSecond one, a bit longer than the first.\n\n\nThird."
    assert [content[s:e] for s, e in paragraphs(content)] == [
        "First paragraph here.",
        "Second one, a bit longer than the first.",
        "Third.",
    ]
    docs = pd.DataFrame({"doc_id": ["a", "b"], "content": [content, ""]})
    chunker = HybridDoclingChunker(MINILM, 64)
    chunks = chunk_documents(docs, chunker, False)
    assert list(chunks.columns) == ["chunk_id", "doc_id", "text", "start", "end"]
    # the three paragraphs fit in 64 tokens: docling merges them into one chunk
    assert chunks[["doc_id", "start", "end"]].values.tolist() == [["a", 0, len(content)]]
    assert chunker.stats["plain_documents"] == 2


def test_uncovered_runs_are_the_consecutive_elements_no_span_covers():
    d = "aaaaa  bbbbb  cccccc  dddddddd eeeeeeeee"
    els = [
        Element("d", 0, 5, "text", None),
        Element("d", 7, 12, "text", None),  # covered by (6, 13)
        Element("d", 14, 20, "text", None),  # covered by (14, 17) and (18, 20) but for "c"
        Element("d", 22, 30, "text", None),
        Element("d", 31, 40, "list_item", None),
        Element("e", 0, 9, "section_header", None),  # a heading: travels in `section`
        Element("e", 9, 9, "text", None),  # empty: nothing to lose
        Element("f", 0, 4, "text", None),  # a document with no chunk at all
    ]
    contents = {"d": d, "e": "Heading 1", "f": "ffff"}
    spans = {"d": [(6, 13), (14, 17), (18, 20)]}
    assert uncovered_runs(els, spans, contents) == {"d": [(0, 5), (14, 40)], "f": [(0, 4)]}
    # pieces of one paragraph with only whitespace between them cover it
    pieces = {"d": [(0, 5), (7, 13), (14, 20), (22, 30), (31, 40)]}
    assert uncovered_runs(els[:5], pieces, contents) == {}


def test_hybrid_keeps_the_text_of_a_docling_chunk_that_names_no_parsed_element():
    content = "First paragraph here.\n\nSecond one, a bit longer than the first.\n\n\nThird."
    docs = pd.DataFrame({"doc_id": ["a"], "content": [content]})
    chunker = HybridDoclingChunker(MINILM, 12)
    real = chunker.chunker

    class _DropsOne:  # docling's chunker, with the second paragraph's item renamed
        def chunk(self, doc):
            for c in real.chunk(doc):
                for item in c.meta.doc_items:
                    if item.self_ref == "#/texts/1":  # the second paragraph
                        item.self_ref = "#/texts/999"
                yield c

    chunker.chunker = _DropsOne()
    chunks = chunk_documents(docs, chunker, False)
    covered = "".join(chunks["text"])
    assert "Second one, a bit longer than the first." in covered  # not lost
    # docling's second chunk names the second and third paragraphs; only the third maps
    assert chunker.stats["uncovered_element_chunks"] == 1
    assert len(chunks) == 3  # one per paragraph, the second from the uncovered element
    for _, c in chunks.iterrows():
        assert content[c["start"] : c["end"]] == c["text"]


def test_document_and_recursive_chunkers_add_page_and_section(parsed, tok):
    docs, els, _ = parsed["file"]
    whole = chunk_documents(docs, DocumentChunker(), False, elements=els)
    assert whole[["page", "section"]].values.tolist() == [[0, "Moons of Mars"]]
    rec = RecursiveTokenChunker(tok, 32, 0, ["\n\n", "\n", ". ", " "])
    chunks = chunk_documents(docs, rec, False, elements=els)
    idx = Elements(els)
    for row in chunks.itertuples():
        el = idx.at(row.doc_id, row.start)
        assert el["start"] <= row.start < el["end"]
        assert (row.page, row.section) == (el["page"], el["section"])

    def count(t):
        return len(tok.encode(t, add_special_tokens=False).ids)

    # windows of 32 tokens cut the list (17 tokens, it would have fitted) across two chunks;
    # the table (81 tokens) cannot fit, so cutting it is no violation
    bv = m.boundary_violations(chunks, docs, units(idx), 32, count)
    assert bv["by_kind"] == {"table": 0, "list": 2, "numbered_section": 0}
    hybrid, _ = _hybrid(parsed, "file", 32)
    assert m.boundary_violations(hybrid, docs, units(idx), 32, count)["by_kind"]["list"] == 0
    # no elements (BEIR): the chunks table keeps its five columns
    plain = chunk_documents(docs[["doc_id", "content"]], DocumentChunker(), False)
    assert list(plain.columns) == ["chunk_id", "doc_id", "text", "start", "end"]


def test_semantic_cuts_where_adjacent_similarity_drops_with_exact_offsets():
    content = "Cats purr. Cats nap.  Rockets fly. Rockets burn fuel."
    topic = {"Cats": np.array([1.0, 0.0]), "Rockets": np.array([0.0, 1.0])}

    def encode(texts):
        return np.stack([topic[t.split()[0]] for t in texts])

    def segment(text):
        return [s + "." for s in text.split(".") if s.strip()]

    def words(text):
        return len(text.split())

    assert sentence_spans(content, segment) == [(0, 10), (11, 20), (22, 34), (35, 53)]
    chunker = SemanticChunker(
        encode, words, threshold=0.5, min_tokens=1, max_tokens=100, segment=segment
    )
    spans = chunker.spans(content)
    assert [content[s:e] for s, e in spans] == [
        "Cats purr. Cats nap.",
        "Rockets fly. Rockets burn fuel.",
    ]
    # min_tokens: a 4-word chunk may not be closed before 5 words
    assert SemanticChunker(
        encode, words, threshold=0.5, min_tokens=5, max_tokens=100, segment=segment
    ).spans(content) == [(0, 53)]
    # max_tokens: 2 words per chunk force a cut after every sentence
    assert (
        len(
            SemanticChunker(
                encode, words, threshold=0.5, min_tokens=0, max_tokens=2, segment=segment
            ).spans(content)
        )
        == 4
    )


def test_pack_and_percentile_cut_level():
    from ragrig.chunk.semantic import cut_points

    assert cut_points(np.array([0.9, 0.1, 0.8, 0.2]), None, 50).tolist() == [
        False,
        True,
        False,
        True,
    ]
    cuts = np.array([False, True, False, True])
    assert pack([3, 3, 3, 3, 3], cuts, 0, 100) == [(0, 2), (2, 4), (4, 5)]
    assert pack([3, 3, 3, 3, 3], cuts, 0, 5) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    assert pack([], cuts, 0, 5) == []


def test_semantic_from_config_with_pysbd_and_the_packaged_model():
    from ragrig.chunk.config import ChunkSemantic

    cfg = ChunkSemantic(min_tokens=4, max_tokens=64, threshold=0.3)
    chunker = make_chunker(cfg)
    content = (
        "Mars has two moons. Phobos is the larger of the two moons of Mars. "
        "The stock market fell sharply on Monday. Investors sold bank shares."
    )
    spans = chunker.spans(content)
    assert [content[s:e] for s, e in spans] == [
        "Mars has two moons. Phobos is the larger of the two moons of Mars.",
        "The stock market fell sharply on Monday. Investors sold bank shares.",
    ]


def _run_chunk_stage(parse_dir: Path, out: Path, chunk: dict) -> dict:
    import json
    import os
    import subprocess
    import sys

    import yaml

    project = Path(__file__).resolve().parents[2]
    params = out.parent / f"params_{out.name}.yaml"
    params.write_text(yaml.safe_dump({"chunk": chunk}))
    subprocess.run(
        [sys.executable, str(project / "stages" / "chunk.py"), "--params", str(params)]
        + ["--out", str(out), "--inputs", str(parse_dir)],
        check=True,
        env={**os.environ, "RAGRIG_PROGRESS": "0"},
        capture_output=True,
        text=True,
    )
    return json.loads((out / "ingestion.json").read_text())


@pytest.mark.full  # make test-all: the docling stage run
def test_chunk_stage_writes_pointers_and_ingestion_json(parsed, tmp_path):
    docs, els, folder = parsed["file"]
    ing = _run_chunk_stage(
        folder.parent,
        tmp_path / "hybrid",
        {"method": "hybrid", "max_tokens": 32, "coherence_documents": 1},
    )
    chunks = pd.read_parquet(tmp_path / "hybrid" / "chunks.parquet")
    assert {"page", "section"} <= set(chunks.columns)
    assert ing["attribution"]["value"] == 1.0 and ing["attribution"]["chunks"] == len(chunks)
    assert ing["boundary_violations"]["by_kind"]["list"] == 0
    coh = ing["coherence"]
    assert coh["documents"] == 1 and coh["within_pairs"] > 0 and coh["across_pairs"] > 0
    assert coh["value"] == pytest.approx(coh["within"] - coh["across"])
    assert ing["near_duplicates"]["labelled"]["false_merges"] == 1
    assert ing["near_duplicates"]["documents"]["items"] == 1


def test_chunk_stage_without_elements_keeps_the_beir_table(tmp_path):
    parse_dir = tmp_path / "parse"
    parse_dir.mkdir()
    texts = ["Mars has two moons. Phobos is larger.", "Mars has two moons. Phobos is larger!", ""]
    pd.DataFrame(
        {
            "doc_id": ["a", "b", "c"],
            "title": "",
            "text": texts,
            "content": texts,
            "source": "beir",
            "content_hash": "",
        }
    ).to_parquet(parse_dir / "documents.parquet", index=False)
    ing = _run_chunk_stage(
        parse_dir, tmp_path / "doc", {"method": "document", "coherence_documents": 2}
    )
    chunks = pd.read_parquet(tmp_path / "doc" / "chunks.parquet")
    assert list(chunks.columns) == ["chunk_id", "doc_id", "text", "start", "end"]
    assert ing["attribution"] == {
        "value": 1.0,
        "verified": 3,
        "chunks": 3,
        "empty_chunks": 1,
        "checked_page_section": False,
        "failures": {},
    }
    assert ing["boundary_violations"]["value"] == 0.0
    # one chunk per document: no boundary, so no across pair; coherence absent, not NaN
    assert ing["coherence"] == {
        "value": None,
        "within": None,
        "within_pairs": 0,
        "across": None,
        "across_pairs": 0,
        "documents": 2,
        "skipped": "no sampled document has two chunks",
    }
    nd = ing["near_duplicates"]["documents"]
    assert (nd["items"], nd["empty"], nd["groups"], nd["examples"]) == (2, 1, 1, [["a", "b"]])
