"""Ranking conventions shared by retrieval and its metrics: unique ids, deterministic order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def check_unique(ranking: Sequence[str], what: str = "ranking") -> None:
    seen: set[str] = set()
    for doc_id in ranking:
        if doc_id in seen:
            raise ValueError(f"{what} has duplicate id {doc_id!r}: k counts unique documents")
        seen.add(doc_id)


def sort_scores(scores: Mapping[str, float]) -> list[tuple[str, float]]:
    """Best first; ties broken by id so equal scores always give the same order."""
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
