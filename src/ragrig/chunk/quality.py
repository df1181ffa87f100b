"""The chunk stage's ingestion metrics (data/chunk/ingestion.json), from ragrig.metrics.ingestion:
attribution fidelity, boundary violations, chunk coherence, near-duplicates."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from importlib import resources
from typing import Any

import numpy as np
import pandas as pd

from ragrig.chunk.structure import Elements, units
from ragrig.metrics import ingestion as m

PAIRS_FILE = "near_duplicate_pairs.jsonl"  # ragrig/chunk/data/: the labelled sample


def labelled_pairs() -> list[dict[str, Any]]:
    """The labelled near-duplicate pairs shipped with ragrig (ragrig/chunk/data/)."""
    text = resources.files("ragrig.chunk").joinpath("data", PAIRS_FILE).read_text("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def coherence_sample(doc_ids: list[str], n: int) -> list[str]:
    """`n` documents chosen by the sha256 of their id (stable, independent of order)."""
    key = sorted(doc_ids, key=lambda d: hashlib.sha256(str(d).encode()).hexdigest())
    return sorted(key[:n])


def sentence_vectors(
    chunks: pd.DataFrame,
    doc_ids: list[str],
    segment: Callable[[str], list[str]],
    encode: Callable[[list[str]], np.ndarray],
) -> list[list[np.ndarray]]:
    """Per sampled document its chunks in order, each the embeddings of its sentences."""
    from ragrig.chunk.semantic import sentence_spans

    chosen = chunks[chunks["doc_id"].isin(set(doc_ids))]
    chosen = chosen.sort_values(["doc_id", "start", "end"], kind="mergesort")
    layout: list[int] = []  # per chunk: its number of sentences
    docs: list[str] = []
    texts: list[str] = []
    for row in chosen.itertuples(index=False):
        sents = [row.text[s:e] for s, e in sentence_spans(row.text, segment)]
        texts.extend(sents)
        layout.append(len(sents))
        docs.append(row.doc_id)
    vecs = np.asarray(encode(texts), dtype=np.float32) if texts else np.zeros((0, 1))
    out: dict[str, list[np.ndarray]] = {}
    at = 0
    for doc_id, k in zip(docs, layout, strict=True):
        out.setdefault(doc_id, []).append(vecs[at : at + k])
        at += k
    return [out[d] for d in sorted(out)]


def ingestion_metrics(
    chunks: pd.DataFrame,
    documents: pd.DataFrame,
    elements: pd.DataFrame | None,
    cfg: Any,
    *,
    encode: Callable[[list[str]], np.ndarray] | None = None,
    segment: Callable[[str], list[str]] | None = None,
) -> dict[str, Any]:
    """Everything data/chunk/ingestion.json holds; `encode`/`segment` default to the packaged
    MiniLM sentence model and pysbd (loaded only when coherence is measured)."""
    from ragrig.chunk.base import load_tokenizer

    index = Elements(elements)
    tok = load_tokenizer(getattr(cfg, "tokenizer", "packaged:all-MiniLM-L6-v2"))

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)

    out: dict[str, Any] = {
        "attribution": m.attribution(chunks, documents, index.pointer if index else None),
        "boundary_violations": m.boundary_violations(
            chunks, documents, units(index), getattr(cfg, "max_tokens", None), count
        ),
    }
    n = int(getattr(cfg, "coherence_documents", 0))
    sample = coherence_sample(sorted(set(chunks["doc_id"])), n) if n > 0 else []
    per_doc = chunks["doc_id"].value_counts()
    absent = {"value": None, "within": None, "within_pairs": 0, "across": None}
    if not sample:
        out["coherence"] = {**absent, "across_pairs": 0, "documents": 0, "skipped": "no sample"}
    elif int(per_doc.reindex(sample).max()) < 2:  # no boundary to compare with: not embedded
        out["coherence"] = {
            **absent,
            "across_pairs": 0,
            "documents": len(sample),
            "skipped": "no sampled document has two chunks",
        }
    else:
        from ragrig.chunk.semantic import load_sentence_model, pysbd_segmenter

        if encode is None:
            model = load_sentence_model("packaged:all-MiniLM-L6-v2")

            def encode(texts: list[str]) -> np.ndarray:
                return model.encode(
                    texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True
                )

        vecs = sentence_vectors(chunks, sample, segment or pysbd_segmenter(), encode)
        out["coherence"] = m.coherence(vecs)
    cache: dict[str, Any] = {}  # a chunk that is a whole document is hashed once
    out["near_duplicates"] = {
        "documents": m.near_duplicates(
            dict(zip(documents["doc_id"], documents["content"], strict=True)), cache=cache
        ),
        "chunks": m.near_duplicates(
            dict(zip(chunks["chunk_id"], chunks["text"], strict=True)), cache=cache
        ),
        "labelled": m.merge_errors(labelled_pairs()),
        "shingle_chars": m.SHINGLE_CHARS,
        "num_perm": m.NUM_PERM,
        "threshold": m.THRESHOLD,
    }
    return out
