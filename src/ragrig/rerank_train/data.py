"""Training pairs (query, passage, label) for the reranker, from the dataset's *train* split.

For every query judged in ``qrels/<split>.tsv`` (SciFact: 809 training claims):

* each judged-relevant document (relevance > 0) is a positive (label 1);
* ``negatives_per_query`` hard negatives (label 0) are drawn, seeded per query, from the top
  ``mining.depth`` BM25 hits over the whole corpus that are not judged relevant for it.

A training query whose id, or whose case-folded text, is also a query of the evaluated split
(``dataset.split``) is dropped and counted (SciFact repeats a few claim texts across splits):
the training and evaluation query sets are disjoint by construction, and `check_disjoint`
proves it on the pairs actually written.

Deterministic: the same files, config and seed give the same pairs in the same order.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragrig.errors import ConfigError, DataValidationError


@dataclass(frozen=True)
class Pair:
    qid: str
    doc_id: str
    kind: str  # "positive" | "bm25_negative"
    query: str
    passage: str
    label: int


@dataclass(frozen=True)
class TrainingQueries:
    queries: dict[str, str]  # qid -> text, training queries kept
    positives: dict[str, list[str]]  # qid -> relevant doc ids (sorted)
    dropped_eval_overlap: list[str]  # training qids also in the evaluated split (id or text)
    eval_qids: frozenset[str]
    eval_texts: frozenset[str]


def no_train_split_message(dataset_name: str, path: Path) -> str:
    return (
        f"dataset {dataset_name!r} has no train split ({path} not found): the reranker cannot be "
        "trained on it; use a pretrained one (rerank=cross_encoder rerank.model=<folder or hub "
        "id>) or rerank=identity, with train_rerank.enabled=false"
    )


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def training_queries(root: Path, dataset_name: str, split: str, eval_split: str) -> TrainingQueries:
    """The judged queries of `split`, less every query of `eval_split` (by id or text)."""
    from ragrig.data.beir import load_qrels, load_queries

    root = Path(root)
    if split == eval_split:
        raise ConfigError(
            f"train_rerank.split {split!r} is the evaluated split (dataset.split): the reranker "
            "would be trained on the queries it is scored on"
        )
    train_path = root / "qrels" / f"{split}.tsv"
    if not train_path.is_file():
        raise DataValidationError(no_train_split_message(dataset_name, train_path))
    qrels = load_qrels(train_path)
    eval_qrels = load_qrels(root / "qrels" / f"{eval_split}.tsv")
    texts = load_queries(root / "queries.jsonl")
    missing = sorted(q for q in qrels if q not in texts)
    if missing:
        raise DataValidationError(
            f"{train_path}: {len(missing)} judged query id(s) not in queries.jsonl: {missing[:10]}"
        )
    eval_qids = frozenset(eval_qrels)
    eval_texts = frozenset(_norm(texts[q]) for q in eval_qids if q in texts)
    kept: dict[str, str] = {}
    positives: dict[str, list[str]] = {}
    dropped: list[str] = []
    for qid in sorted(qrels):
        pos = sorted(d for d, rel in qrels[qid].items() if rel > 0)
        if not pos:
            continue
        if qid in eval_qids or _norm(texts[qid]) in eval_texts:
            dropped.append(qid)
            continue
        kept[qid] = texts[qid]
        positives[qid] = pos
    if not kept:
        raise DataValidationError(f"{train_path}: no judged-relevant query left to train on")
    return TrainingQueries(kept, positives, dropped, eval_qids, eval_texts)


def mine_negatives(
    queries: dict[str, str],
    positives: dict[str, list[str]],
    doc_ids: list[str],
    doc_texts: list[str],
    mining: Any,
    per_query: int,
    seed: int,
) -> dict[str, list[str]]:
    """qid -> `per_query` BM25 hits (top `mining.depth`, not judged relevant), seeded sample
    kept in BM25 rank order; fewer when BM25 finds fewer."""
    from ragrig.index.sparse import Bm25sIndex

    index = Bm25sIndex.build(doc_texts, mining)
    qids = sorted(queries)
    _, rows = index.search([queries[q] for q in qids], mining.depth)
    out: dict[str, list[str]] = {}
    for qid, hits in zip(qids, rows, strict=True):
        pos = set(positives[qid])
        pool = [doc_ids[r] for r in hits if r >= 0 and doc_ids[r] not in pos]
        rng = random.Random(f"{seed}:{qid}")
        picked = sorted(rng.sample(range(len(pool)), min(per_query, len(pool))))
        out[qid] = [pool[i] for i in picked]
    return out


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


def check_disjoint(pairs: list[Pair], train: TrainingQueries) -> None:
    """Raise if any pair's query is a query of the evaluated split (by id or text)."""
    leaked = sorted(
        {p.qid for p in pairs if p.qid in train.eval_qids or _norm(p.query) in train.eval_texts}
    )
    if leaked:
        raise DataValidationError(f"training pairs hold evaluated queries: {leaked[:10]}")


def as_records(pairs: list[Pair]) -> list[dict[str, Any]]:
    return [asdict(p) for p in pairs]
