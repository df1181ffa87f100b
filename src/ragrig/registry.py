"""Lazy, name-keyed backend registries: importing ragrig never imports torch, faiss or docling."""

from __future__ import annotations

import importlib
from typing import Any

REGISTRIES: dict[str, dict[str, str]] = {
    "parser": {
        "beir": "ragrig.parse:BeirParser",
    },
    "chunker": {
        "document": "ragrig.chunk.chunkers:DocumentChunker",
        "recursive": "ragrig.chunk.chunkers:RecursiveTokenChunker",
    },
    "embedder": {
        "sentence_transformers": "ragrig.embed.st:SentenceTransformerEmbedder",
    },
    "dense_index": {
        "flat": "ragrig.index.dense:build_flat",
        "hnsw": "ragrig.index.dense:build_hnsw",
        "ivf": "ragrig.index.dense:build_ivf",
    },
    "sparse_index": {
        "bm25s": "ragrig.index.sparse:Bm25sIndex",
        "rank_bm25": "ragrig.index.sparse:RankBm25Index",
    },
    "reranker": {
        "identity": "ragrig.rerank.rerankers:IdentityReranker",
        "cross_encoder": "ragrig.rerank.rerankers:CrossEncoderReranker",
    },
    "generator": {
        "extractive": "ragrig.generate.extractive:ExtractiveGenerator",
        "llama_cpp": "ragrig.generate.llama_cpp:LlamaCppGenerator",
        "openai_http": "ragrig.generate.openai_http:OpenAIHttpGenerator",
    },
    "judge": {
        "overlap": "ragrig.judge.overlap:OverlapJudge",
    },
}


def resolve(kind: str, name: str) -> Any:
    """Import and return the object registered as `name` under `kind`."""
    try:
        target = REGISTRIES[kind][name]
    except KeyError:
        known = sorted(REGISTRIES.get(kind, {}))
        raise KeyError(f"no {kind} named {name!r}; known: {known}") from None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)
