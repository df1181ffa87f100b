"""Position in the context: the passage order option and the lost-in-the-middle probe.

* `reorder_ends(items)`: a best-first list laid out with the strongest passages at both ends
  and the weakest in the middle (1st, 3rd, 5th, ... then ..., 4th, 2nd): `passage_order: reorder`.
* The probe (`generate.position_probe`): for each sampled query with a gold document, one gold
  passage (the best-ranked chunk of a gold document in the run, else the first chunk of its first
  gold document) and `context_size - 1` distractors (the run's best chunks of non-gold
  documents); the same passages in four contexts, answered by the same generator:
  `first`, `middle`, `last` (the gold passage there, the distractors in rank order around it) and
  `reorder` (all of them by retrieval rank, the gold at its own rank or last when the run missed
  it, laid out by `reorder_ends`). A query without a gold document, or with too few distractors,
  is counted and left out. `context_size` defaults to the pipeline's `n_passages`, the context
  length its answers are judged at.
* `ragrig.generate.step.answer_probe` asks each distinct prompt once: a probe context identical
  to the pipeline's own takes its answer, one identical to another position of the same query
  takes that position's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import pandas as pd

T = TypeVar("T")
POSITIONS = ("first", "middle", "last", "reorder")
SEP = "|"  # probe keys: "<qid>|<position>"


def reorder_ends(items: Sequence[T]) -> list[T]:
    """Best-first `items` with the strongest at both ends: [1, 3, 5, ..., 6, 4, 2]."""
    out: list[Any] = [None] * len(items)
    left, right = 0, len(items) - 1
    for i, item in enumerate(items):
        if i % 2 == 0:
            out[left] = item
            left += 1
        else:
            out[right] = item
            right -= 1
    return out


def place(gold: T, distractors: Sequence[T], position: str) -> list[T]:
    """The gold passage first, in the middle ((n - 1) // 2 of n) or last among `distractors`."""
    items = list(distractors)
    at = {"first": 0, "middle": len(items) // 2, "last": len(items)}[position]
    return [*items[:at], gold, *items[at:]]


def probe_contexts(
    run: pd.DataFrame,
    chunks: pd.DataFrame,
    qrels: pd.DataFrame,
    qids: Sequence[str],
    size: int,
) -> tuple[dict[str, list[tuple[str, str]]], pd.DataFrame, dict[str, int]]:
    """(key -> [(chunk_id, text)] context, one row per key: key, qid, position, gold chunk and
    its position in the context, counts of the queries left out) for the probe of `qids`."""
    text = dict(zip(chunks["chunk_id"], chunks["text"], strict=True))
    first_chunk = (
        chunks.sort_values(["doc_id", "start"], kind="mergesort")
        .groupby("doc_id")["chunk_id"]
        .first()
    )
    gold_docs: dict[str, set[str]] = {}
    for q, d, rel in zip(qrels["qid"], qrels["doc_id"], qrels["relevance"], strict=True):
        if rel > 0:
            gold_docs.setdefault(str(q), set()).add(str(d))
    ranked = run.sort_values(["qid", "rank"], kind="mergesort")
    by_qid = {str(q): g for q, g in ranked.groupby("qid", sort=True)}
    contexts: dict[str, list[tuple[str, str]]] = {}
    rows = []
    skipped = {"no_gold": 0, "too_few_distractors": 0}
    for qid in qids:
        gold = gold_docs.get(qid, set())
        present = sorted(d for d in gold if d in first_chunk.index)
        if not present:
            skipped["no_gold"] += 1
            continue
        hits = by_qid.get(qid, ranked.iloc[0:0])
        gold_hits = hits[hits["doc_id"].astype(str).isin(gold)]
        if len(gold_hits):
            gold_chunk, gold_rank = (
                str(gold_hits["chunk_id"].iloc[0]),
                int(gold_hits["rank"].iloc[0]),
            )
        else:
            gold_chunk, gold_rank = str(first_chunk[present[0]]), None
        others = hits[~hits["doc_id"].astype(str).isin(gold)]
        distractors = list(dict.fromkeys(str(c) for c in others["chunk_id"]))[: size - 1]
        if len(distractors) < size - 1:
            skipped["too_few_distractors"] += 1
            continue
        ranks = dict(zip(others["chunk_id"].astype(str), others["rank"], strict=False))
        for position in POSITIONS:
            if position == "reorder":
                strength = sorted(
                    [*distractors, gold_chunk],
                    key=lambda c: (
                        (gold_rank if gold_rank is not None else float("inf"))
                        if c == gold_chunk
                        else ranks[c]
                    ),
                )
                order = reorder_ends(strength)
            else:
                order = place(gold_chunk, distractors, position)
            key = f"{qid}{SEP}{position}"
            contexts[key] = [(c, text[c]) for c in order]
            rows.append(
                {
                    "key": key,
                    "qid": qid,
                    "position": position,
                    "gold_chunk_id": gold_chunk,
                    "gold_at": order.index(gold_chunk) + 1,
                    "gold_retrieved": gold_rank is not None,
                }
            )
    table = pd.DataFrame(
        rows, columns=["key", "qid", "position", "gold_chunk_id", "gold_at", "gold_retrieved"]
    )
    return contexts, table, skipped
