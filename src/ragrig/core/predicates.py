"""Metadata predicates: a document's metadata against a field -> value(s) filter. Shared by
retrieval's filters (ragrig.retrieve.filters) and their measures (ragrig.metrics.filters)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Metadata = Mapping[str, Mapping[str, Any]]  # doc id -> field -> value


def matches(meta: Mapping[str, Any], predicate: Mapping[str, Any]) -> bool:
    """Whether a document's metadata satisfies every field of a predicate (a value, or a list
    of accepted values); a field the document lacks fails."""
    for field, wanted in predicate.items():
        if field not in meta:
            return False
        accepted = wanted if isinstance(wanted, list | tuple | set | frozenset) else (wanted,)
        if meta[field] not in accepted:
            return False
    return True


def passing(metadata: Metadata, predicate: Mapping[str, Any] | None) -> set[str]:
    """The documents a hard predicate keeps (all of them when there is none)."""
    if not predicate:
        return set(metadata)
    return {d for d, meta in metadata.items() if matches(meta, predicate)}
