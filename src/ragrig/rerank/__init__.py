"""rerank: rescore the top retrieved documents; identity keeps the retrieval order."""

from ragrig.rerank.base import RERANKERS, Candidate, Reranker, make_reranker
from ragrig.rerank.step import rerank_run

__all__ = ["Candidate", "RERANKERS", "Reranker", "make_reranker", "rerank_run"]
