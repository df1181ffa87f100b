"""Training examples for the bi-encoder, from the dataset's *train* split.

One example per judged-relevant (query, document) of ``qrels/<split>.tsv`` (SciFact: 919
judgments of 809 claims, less the evaluated split's queries): the query, the positive passage
and ``hard_negatives_per_query`` hard negatives, BM25 hits (top ``mining.depth``) not judged
relevant for the query (`ragrig.training.split.mine_negatives`). Where BM25 finds fewer, the rest
are seeded random corpus documents not judged relevant, counted as ``random_negative``. The
other examples of a batch are in-batch negatives (MultipleNegativesRankingLoss).

Queries of the evaluated split (by id or case-folded text) are dropped and listed, and
`check_disjoint` proves it on the examples written. Deterministic given the seed.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragrig.core.errors import DataValidationError
from ragrig.training.split import TrainingQueries
from ragrig.training.split import training_queries as _training_queries


@dataclass(frozen=True)
class Example:
    qid: str
    doc_id: str  # the positive
    query: str
    positive: str
    negative_ids: tuple[str, ...]
    negative_kinds: tuple[str, ...]  # "bm25_negative" | "random_negative"
    negatives: tuple[str, ...]


def no_train_split_message(dataset_name: str, path: Path) -> str:
    return (
        f"dataset {dataset_name!r} has no train split ({path} not found): the embedder cannot be "
        "adapted on it; use a pretrained one (embed=minilm, or embed.model=<folder or hub id>) "
        "with train_embed.enabled=false"
    )


def training_queries(root: Path, dataset_name: str, split: str, eval_split: str) -> TrainingQueries:
    """The judged queries of `split`, less every query of `eval_split` (by id or text)."""
    return _training_queries(
        root, split, eval_split, "train_embed", lambda p: no_train_split_message(dataset_name, p)
    )


def build_examples(
    train: TrainingQueries,
    documents: dict[str, str],
    negatives: dict[str, list[str]],
    per_query: int,
    seed: int,
) -> list[Example]:
    """Examples in (qid, positive) order; each holds exactly `per_query` negatives."""
    doc_ids = sorted(documents)
    out: list[Example] = []
    for qid in sorted(train.queries):
        pos = set(train.positives[qid])
        negs = [(d, "bm25_negative") for d in negatives.get(qid, [])][:per_query]
        if len(negs) < per_query:
            taken = pos | {d for d, _ in negs}
            pool = [d for d in doc_ids if d not in taken]
            rng = random.Random(f"{seed}:random:{qid}")
            extra = rng.sample(pool, min(per_query - len(negs), len(pool)))
            negs += [(d, "random_negative") for d in extra]
        if len(negs) < per_query:
            raise DataValidationError(
                f"query {qid!r}: the corpus holds only {len(negs)} documents not judged relevant, "
                f"{per_query} hard negatives asked (train_embed.hard_negatives_per_query)"
            )
        for d in train.positives[qid]:
            if d not in documents:
                raise DataValidationError(f"training qrels name document {d!r} not in the corpus")
            out.append(
                Example(
                    qid,
                    d,
                    train.queries[qid],
                    documents[d],
                    tuple(n for n, _ in negs),
                    tuple(k for _, k in negs),
                    tuple(documents[n] for n, _ in negs),
                )
            )
    return out


def cap_examples(examples: list[Example], max_pairs: int | None, seed: int) -> list[Example]:
    """At most `max_pairs` examples, a seeded sample, order shuffled."""
    out = list(examples)
    random.Random(f"{seed}:shuffle").shuffle(out)
    return out if max_pairs is None else out[:max_pairs]


def as_columns(examples: list[Example]) -> dict[str, list[str]]:
    """anchor, positive, negative_1..k: the column order MultipleNegativesRankingLoss reads."""
    cols: dict[str, list[str]] = {
        "anchor": [e.query for e in examples],
        "positive": [e.positive for e in examples],
    }
    k = len(examples[0].negatives) if examples else 0
    for i in range(k):
        cols[f"negative_{i + 1}"] = [e.negatives[i] for e in examples]
    return cols


def as_records(examples: list[Example]) -> list[dict[str, Any]]:
    """Examples without their texts (ids and kinds; the corpus holds the texts)."""
    keep = ("qid", "doc_id", "query", "negative_ids", "negative_kinds")
    return [{k: v for k, v in asdict(e).items() if k in keep} for e in examples]
