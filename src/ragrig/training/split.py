"""What every stage trained on the dataset's *train* split shares (train_rerank, train_embed).

* `training_queries`: the judged queries of ``qrels/<split>.tsv``, less every query of the
  evaluated split (``dataset.split``) by id or by case-folded text (SciFact repeats a few claim
  texts across splits), dropped and listed; `check_disjoint` proves it on what is written;
* `mine_negatives`: hard negatives, BM25 hits over the whole corpus not judged relevant, a
  seeded sample per query kept in BM25 rank order;
* `corpus_texts`: doc id -> the passage text the pipeline retrieves (parse's title + separator
  + text).

Deterministic: the same files, config and seed give the same queries and negatives.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ragrig.core.config import Section
from ragrig.core.errors import ConfigError, DataValidationError
from ragrig.core.text import counted


class MiningConfig(Section):
    """The first-stage retriever that mines hard negatives: BM25 (bm25s) over the corpus."""

    k1: float = Field(0.9, gt=0)
    b: float = Field(0.4, ge=0, le=1)
    stemmer: Literal["english", "none"] = "english"
    stopwords: Literal["english", "none"] = "english"
    depth: int = Field(30, gt=0, description="negatives are drawn from BM25's top `depth` hits")


@dataclass(frozen=True)
class TrainingQueries:
    queries: dict[str, str]  # qid -> text, training queries kept
    positives: dict[str, list[str]]  # qid -> relevant doc ids (sorted)
    dropped_eval_overlap: list[str]  # training qids also in the evaluated split (id or text)
    eval_qids: frozenset[str]
    eval_texts: frozenset[str]


def norm(text: str) -> str:
    return " ".join(text.casefold().split())


def training_queries(
    root: Path,
    split: str,
    eval_split: str,
    section: str,
    no_split_message: Callable[[Path], str],
) -> TrainingQueries:
    """The judged queries of `split`, less every query of `eval_split` (by id or text).

    `section` names the config section in errors; `no_split_message(path)` is the one line
    raised when ``qrels/<split>.tsv`` does not exist (what to use instead)."""
    from ragrig.dataset.beir import load_qrels, load_queries

    root = Path(root)
    if split == eval_split:
        raise ConfigError(
            f"{section}.split {split!r} is the evaluated split (dataset.split): the model "
            "would be trained on the queries it is scored on"
        )
    train_path = root / "qrels" / f"{split}.tsv"
    if not train_path.is_file():
        raise DataValidationError(no_split_message(train_path))
    qrels = load_qrels(train_path)
    eval_qrels = load_qrels(root / "qrels" / f"{eval_split}.tsv")
    texts = load_queries(root / "queries.jsonl")
    missing = sorted(q for q in qrels if q not in texts)
    if missing:
        ids = counted(missing, "judged query id", form=repr)
        raise DataValidationError(f"{train_path}: {ids} not in queries.jsonl")
    eval_qids = frozenset(eval_qrels)
    eval_texts = frozenset(norm(texts[q]) for q in eval_qids if q in texts)
    kept: dict[str, str] = {}
    positives: dict[str, list[str]] = {}
    dropped: list[str] = []
    for qid in sorted(qrels):
        pos = sorted(d for d, rel in qrels[qid].items() if rel > 0)
        if not pos:
            continue
        if qid in eval_qids or norm(texts[qid]) in eval_texts:
            dropped.append(qid)
            continue
        kept[qid] = texts[qid]
        positives[qid] = pos
    if not kept:
        raise DataValidationError(f"{train_path}: no judged-relevant query left to train on")
    return TrainingQueries(kept, positives, dropped, eval_qids, eval_texts)


def check_disjoint(items: Iterable[Any], train: TrainingQueries) -> None:
    """Raise if any item's query (`.qid`, `.query`) is a query of the evaluated split."""
    leaked = sorted(
        {p.qid for p in items if p.qid in train.eval_qids or norm(p.query) in train.eval_texts}
    )
    if leaked:
        queries = counted(leaked, "evaluated query", "evaluated queries", form=repr)
        raise DataValidationError(f"training pairs hold {queries}")


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


def corpus_texts(root: Path, title_separator: str, empty_text: str) -> dict[str, str]:
    """doc id -> the passage text the pipeline retrieves (parse's title + separator + text)."""
    from ragrig.dataset.beir import BeirDataset, find_corpus, load_corpus
    from ragrig.parse import documents_table

    path = find_corpus(Path(root))
    corpus, _ = load_corpus(path, empty_text)
    docs = documents_table(BeirDataset(corpus, {}, {}, path), "train", title_separator)
    return dict(zip(docs["doc_id"], docs["content"], strict=True))


def run_training_stage(
    stage: str,
    needed_by: str,
    cfg: Any,
    dataset: Any,
    load: Callable[[dict[str, Any]], list[Any]],
    train: Callable[[list[Any], Path], dict[str, Any]],
    records: tuple[str, Callable[[list[Any]], Iterable[dict[str, Any]]]],
    out: Path,
) -> dict[str, Any]:
    """The body of a stage trained on the train split (train_embed, train_rerank).

    Disabled, its output holds only a manifest with ``trained: false`` and the reason, which
    the option reading the model (`needed_by`, e.g. ``embed=trained``) repeats when it refuses
    the folder. Enabled: `load(stats)` gives the training items (filling `stats`), `train(items,
    folder)` writes the model and gives its figures, and the items are written one JSON record
    per line to `records[0]`; all in one atomic output folder with `manifest.json`. A killed
    training's checkpoint beside `out` is removed once the output is in place."""
    import json

    from ragrig.core.io import atomic_dir, write_json
    from ragrig.training.fit import discard_checkpoints

    with atomic_dir(Path(out)) as tmp:
        if not cfg.enabled:
            manifest: dict[str, Any] = {
                "trained": False,
                "reason": f"{stage}.enabled is false ({needed_by} needs it true)",
                "config": cfg.model_dump(),
            }
            write_json(tmp / "manifest.json", manifest)
            return manifest
        stats: dict[str, Any] = {}
        items = load(stats)
        manifest = {"trained": True, **stats, **train(items, tmp)}
        manifest["config"] = cfg.model_dump()
        manifest["dataset"] = {"name": dataset.name, "train_split": cfg.split}
        name, as_records = records
        with open(tmp / name, "w", encoding="utf-8") as fh:
            for rec in as_records(items):
                fh.write(json.dumps(rec, sort_keys=True, ensure_ascii=False) + "\n")
        write_json(tmp / "manifest.json", manifest)
    # the output is in place: the run's checkpoint (`ragrig.training.fit`) is no longer needed
    discard_checkpoints(Path(out))
    return manifest
