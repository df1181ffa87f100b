"""Slice names and bucket labels shared by the aggregation and the report config (no imports)."""

from __future__ import annotations

ALL = "all"  # the whole-set slice, always present
MISSING = "missing"  # bucket of a query whose slice column is empty (null / NaN)
# names a slice cannot take: the whole-set slice and the columns of the long per-query table
RESERVED_SLICE_NAMES = frozenset({ALL, "qid", "measure", "value"})
