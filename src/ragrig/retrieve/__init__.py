"""retrieve: dense, BM25 and hybrid retrieval over chunks, aggregated to documents."""

from ragrig.retrieve.base import Hits, fuse, to_documents
from ragrig.retrieve.step import ann_recall, check_ann, lanes_of, retrieve_all

__all__ = ["Hits", "ann_recall", "check_ann", "fuse", "lanes_of", "retrieve_all", "to_documents"]
