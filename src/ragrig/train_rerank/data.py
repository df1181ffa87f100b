"""Training pairs (query, passage, label) for the reranker, from the dataset's *train* split.

For every query judged in ``qrels/<split>.tsv`` (SciFact: 809 training claims):

* each judged-relevant document (relevance > 0) is a positive (label 1);
* ``negatives_per_query`` hard negatives (label 0) are drawn, seeded per query, from the top
  ``mining.depth`` BM25 hits over the whole corpus that are not judged relevant for it.

A training query whose id, or whose case-folded text, is also a query of the evaluated split
(``dataset.split``) is dropped and counted (SciFact repeats a few claim texts across splits):
the training and evaluation query sets are disjoint by construction, and `check_disjoint`
proves it on the pairs actually written (both shared with train_embed: `ragrig.training.split`).

Deterministic: the same files, config and seed give the same pairs in the same order.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragrig.core.errors import DataValidationError
from ragrig.training.split import TrainingQueries, check_disjoint, mine_negatives
from ragrig.training.split import training_queries as _training_queries

__all__ = ["Pair", "TrainingQueries", "check_disjoint", "mine_negatives", "training_queries"]


@dataclass(frozen=True)
class Pair:
    qid: str
    doc_id: str
    kind: str  # "positive" | "bm25_negative"
    query: str
    passage: str
    label: int


def no_train_split_message(dataset_name: str, path: Path) -> str:
    return (
        f"dataset {dataset_name!r} has no train split ({path} not found): the reranker cannot be "
        "trained on it; use a pretrained one (rerank=cross_encoder rerank.model=<folder or hub "
        "id>) or rerank=identity, with train_rerank.enabled=false"
    )


def training_queries(root: Path, dataset_name: str, split: str, eval_split: str) -> TrainingQueries:
    """The judged queries of `split`, less every query of `eval_split` (by id or text)."""
    return _training_queries(
        root, split, eval_split, "train_rerank", lambda p: no_train_split_message(dataset_name, p)
    )


def build_pairs(
    train: TrainingQueries, documents: dict[str, str], negatives: dict[str, list[str]]
) -> list[Pair]:
    pairs: list[Pair] = []
    for qid in sorted(train.queries):
        q = train.queries[qid]
        for d in train.positives[qid]:
            if d not in documents:
                raise DataValidationError(f"training qrels name document {d!r} not in the corpus")
            pairs.append(Pair(qid, d, "positive", q, documents[d], 1))
        for d in negatives.get(qid, []):
            pairs.append(Pair(qid, d, "bm25_negative", q, documents[d], 0))
    return pairs


def cap_pairs(pairs: list[Pair], max_pairs: int | None, seed: int) -> list[Pair]:
    """At most `max_pairs` pairs, a seeded sample, order shuffled."""
    out = list(pairs)
    random.Random(f"{seed}:shuffle").shuffle(out)
    return out if max_pairs is None else out[:max_pairs]


def as_records(pairs: list[Pair]) -> list[dict[str, Any]]:
    return [asdict(p) for p in pairs]
