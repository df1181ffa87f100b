"""The no-rerank baseline (`rerank=identity`): the retrieval order and scores as they are."""

from __future__ import annotations

from typing import Any

from ragrig.rerank.base import Candidate


class IdentityReranker:
    """Keeps the retrieval order and scores (the no-rerank baseline)."""

    @classmethod
    def from_config(cls, cfg: Any) -> IdentityReranker:
        return cls()

    def rerank(self, query: str, candidates: list[Candidate]) -> list[Candidate]:
        return list(candidates)
