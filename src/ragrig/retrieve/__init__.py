"""retrieve: dense, BM25 and hybrid retrieval over chunks, aggregated to documents."""

from ragrig.retrieve.base import Hits, fuse, to_documents
from ragrig.retrieve.step import (
    Filtered,
    ann_recall,
    check_ann,
    filter_variant_runs,
    lanes_of,
    prepare_filters,
    retrieve_all,
)

__all__ = [
    "Filtered",
    "Hits",
    "ann_recall",
    "check_ann",
    "filter_variant_runs",
    "fuse",
    "lanes_of",
    "prepare_filters",
    "retrieve_all",
    "to_documents",
]
