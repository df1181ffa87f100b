"""An intent classifier a team trains from a labelled sample: the nearest intent prototype by
embedding, measured on held-out labels before it labels anything.

* Prototype: the mean of an intent's training texts' unit vectors (the embed section's query
  embedder), normalised; a text's intent is the prototype of highest cosine (ties: the first
  intent in sorted order).
* Held-out measurement: the labelled sample is split by a seeded hash of each text (`holdout`
  share held out, the same split every run); prototypes are built on the rest, and precision,
  recall and F1 per intent, and their macro means, are measured on the held-out texts. A held-out
  label the training part never saw cannot be predicted: such texts are counted (`unseen`) and
  left out of the figures, never scored as errors of another intent.
* Then the prototypes are rebuilt on the whole sample to label the queries.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragrig.core.errors import DataValidationError


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)


def prototypes(vectors: np.ndarray, labels: Sequence[str]) -> tuple[list[str], np.ndarray]:
    names = sorted(set(labels))
    unit = _unit(np.asarray(vectors, dtype=np.float64))
    protos = np.stack([unit[[i for i, x in enumerate(labels) if x == n]].mean(axis=0)
                       for n in names])  # fmt: skip
    return names, _unit(protos)


def nearest(vectors: np.ndarray, names: list[str], protos: np.ndarray) -> list[str]:
    sims = _unit(np.asarray(vectors, dtype=np.float64)) @ protos.T
    return [names[int(i)] for i in np.argmax(sims, axis=1)]


def held_out(text: str, seed: int, share: float) -> bool:
    digest = hashlib.blake2b(f"{seed}:{text}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < share


def scores(truth: Sequence[str], predicted: Sequence[str]) -> dict[str, Any]:
    """Precision, recall and F1 per intent of the truth's labels, and their macro means; an
    intent never predicted has precision 0 when it has support (never a NaN)."""
    per = {}
    for name in sorted(set(truth)):
        tp = sum(t == name and p == name for t, p in zip(truth, predicted, strict=True))
        fp = sum(t != name and p == name for t, p in zip(truth, predicted, strict=True))
        fn = sum(t == name and p != name for t, p in zip(truth, predicted, strict=True))
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        per[name] = {"precision": prec, "recall": rec, "f1": f1, "support": tp + fn}
    macro = {m: float(np.mean([v[m] for v in per.values()])) if per else 0.0
             for m in ("precision", "recall", "f1")}  # fmt: skip
    return {"per_intent": per, "macro": macro, "n": len(truth)}


def train_and_measure(
    texts: Sequence[str], labels: Sequence[str], encode: Any, holdout: float = 0.3, seed: int = 13
) -> dict[str, Any]:
    """The held-out figures and the prototypes built on the whole sample (module doc);
    `encode(texts)` returns their vectors."""
    if not 0 < holdout < 1:
        raise DataValidationError(f"held-out share {holdout:g}: it lies strictly between 0 and 1")
    if len(texts) != len(labels) or not texts:
        raise DataValidationError("an intent sample needs texts and as many labels")
    if len(set(labels)) < 2:
        raise DataValidationError(f"an intent sample needs two intents at least, got {set(labels)}")
    vectors = np.asarray(encode(list(texts)), dtype=np.float64)
    test = [held_out(t, seed, holdout) for t in texts]
    train_idx = [i for i, h in enumerate(test) if not h]
    test_idx = [i for i, h in enumerate(test) if h]
    if not train_idx or not test_idx:
        raise DataValidationError(
            f"the intent sample of {len(texts)} texts leaves nothing to "
            f"{'train on' if not train_idx else 'hold out'} at a held-out share of {holdout:g}"
        )
    names, protos = prototypes(vectors[train_idx], [labels[i] for i in train_idx])
    seen = set(names)
    unseen = Counter(labels[i] for i in test_idx if labels[i] not in seen)
    kept = [i for i in test_idx if labels[i] in seen]
    predicted = nearest(vectors[kept], names, protos) if kept else []
    figures = scores([labels[i] for i in kept], predicted)
    all_names, all_protos = prototypes(vectors, list(labels))
    return {
        "held_out": figures,
        "unseen": dict(unseen),
        "train": len(train_idx),
        "intents": all_names,
        "prototypes": all_protos,
    }


def read_sample(path: Any) -> tuple[list[str], list[str]]:
    """(texts, intents) of a labelled sample: JSONL of {"text", "intent"}, or CSV with those
    columns; a line without either, or an empty one, stops with one line naming it."""
    import csv
    import json
    from pathlib import Path

    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataValidationError(f"{path}: cannot read the intent sample: {exc}") from None
    if path.suffix == ".csv":
        rows = list(enumerate(csv.DictReader(raw.splitlines()), 2))
    else:
        rows = []
        for n, line in enumerate(raw.splitlines(), 1):
            if line.strip():
                try:
                    rows.append((n, json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise DataValidationError(f"{path}:{n}: not JSON: {exc.msg}") from None
    texts, intents = [], []
    for n, rec in rows:
        t, i = (rec.get("text") or "").strip(), (rec.get("intent") or "").strip()
        if not t or not i:
            raise DataValidationError(f"{path}:{n}: a labelled text needs 'text' and 'intent'")
        texts.append(t)
        intents.append(i)
    return texts, intents
