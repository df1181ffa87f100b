"""What every rerank backend shares: its types, protocol and backend registry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Candidate:
    doc_id: str
    chunk_id: str
    text: str
    score: float


class Reranker(Protocol):
    def rerank(self, query: str, candidates: list[Candidate]) -> list[Candidate]:
        """Return the candidates best first with new scores; the same set, nothing dropped."""
        ...


RERANKERS = {
    "identity": "ragrig.rerank.identity:IdentityReranker",
    "cross_encoder": "ragrig.rerank.cross_encoder:CrossEncoderReranker",
    "trained": "ragrig.rerank.cross_encoder:TrainedReranker",
}


def make_reranker(cfg: Any) -> Reranker:
    from ragrig.core.registry import resolve

    return resolve(RERANKERS, cfg.method, "reranker").from_config(cfg)
