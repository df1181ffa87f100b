"""Chunkers keep document ids and exact character offsets."""

from __future__ import annotations

import pandas as pd
import pytest

from ragrig.chunk import chunk_documents
from ragrig.chunk.base import load_tokenizer
from ragrig.chunk.document import DocumentChunker
from ragrig.chunk.recursive import RecursiveTokenChunker


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("packaged:all-MiniLM-L6-v2")


def test_document_chunker_one_chunk_per_document():
    docs = pd.DataFrame({"doc_id": ["a", "b"], "content": ["Alpha text.", "Beta."]})
    chunks = chunk_documents(docs, DocumentChunker(), progress=False)
    assert chunks.to_dict("records") == [
        {"chunk_id": "a#0", "doc_id": "a", "text": "Alpha text.", "start": 0, "end": 11},
        {"chunk_id": "b#0", "doc_id": "b", "text": "Beta.", "start": 0, "end": 5},
    ]


def test_recursive_windows_respect_max_tokens_overlap_and_offsets(tokenizer):
    content = " ".join(f"Sentence number {i} talks about topic {i % 7}." for i in range(60))
    chunker = RecursiveTokenChunker(
        tokenizer, max_tokens=40, overlap=8, separators=["\n\n", "\n", ". ", " "]
    )
    spans = chunker.spans(content)
    assert len(spans) > 5
    assert spans[0][0] == 0 and spans[-1][1] == len(content.rstrip())
    for start, end in spans:
        n_tokens = len(tokenizer.encode(content[start:end], add_special_tokens=False).ids)
        assert n_tokens <= 40
    for (s1, e1), (s2, _) in zip(spans, spans[1:], strict=False):
        assert s2 < e1  # consecutive windows overlap
        assert s2 > s1
    # windows end at sentence boundaries when one is available in their second half
    assert sum(content[e - 1] == "." for _, e in spans[:-1]) == len(spans) - 1


def test_recursive_short_document_is_one_chunk(tokenizer):
    chunker = RecursiveTokenChunker(tokenizer, max_tokens=64, overlap=8, separators=[". "])
    assert chunker.spans("Short text here.") == [(0, 16)]
    assert chunker.spans("") == []


def test_recursive_rejects_overlap_not_below_max_tokens(tokenizer):
    with pytest.raises(ValueError):
        RecursiveTokenChunker(tokenizer, max_tokens=8, overlap=8, separators=[" "])


def test_chunk_text_is_the_slice_of_its_document(tokenizer):
    content = "Title. " + "word " * 300
    docs = pd.DataFrame({"doc_id": ["d"], "content": [content]})
    chunker = RecursiveTokenChunker(tokenizer, max_tokens=50, overlap=10, separators=[". ", " "])
    chunks = chunk_documents(docs, chunker, progress=False)
    assert len(chunks) == 8
    for row in chunks.itertuples():
        assert content[row.start : row.end] == row.text
        assert row.doc_id == "d"
    assert chunks["chunk_id"].tolist() == [f"d#{i}" for i in range(8)]
