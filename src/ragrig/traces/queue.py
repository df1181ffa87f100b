"""The review queue of `ragrig traces`: the interactions people should read, and why.

An interaction is queued for each of these reasons it meets (conf/traces.yaml `queue`):

* `low_confidence`: judged, and its faithfulness score lies within `confidence_margin` of the
  judge's decision threshold, or the judge gave no decision (undecided, an error);
* `low_consistency`: judged, and its self-consistency (the log's samples) is below
  `min_consistency`;
* `thumbs_down`: every thumbs-down of the log, judged or not: oversampled against its share of
  the traffic, since each is a person saying something went wrong;
* `blind`: a uniform sample at `random_rate`, by a hash of the id under the queue's own seed,
  whatever the judge or the user said.

Reviewed, a blind item is **monitoring** data (an unbiased sample of production, for measuring
it: never tuned on, never release data); every other item is **release** data, the cases that
grow the golden set (ragrig.dataset.golden). An item both blind and targeted stays monitoring, so
that the blind sample stays uniform.

Memory is bounded: per reason at most `max_per_reason` items, those with the smallest id hashes
(the same items whatever the order of the file). Passages without an id get one from their text
(`p-` and 16 hex digits of its sha256), so that a reviewer's marks name them.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections import Counter
from pathlib import Path
from typing import Any

from ragrig.traces.read import Interaction, sample_key

REASONS = ("low_confidence", "low_consistency", "thumbs_down", "blind")
SPLITS = ("release", "monitoring")


def passage_id(text: str) -> str:
    return "p-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def split_of(reasons: list[str] | set[str]) -> str:
    return "monitoring" if "blind" in reasons else "release"


class ReviewQueue:
    """What `ragrig traces` routes to people (module doc)."""

    def __init__(self, cfg: Any, threshold: float | None):
        self.cfg = cfg
        self.threshold = 0.5 if threshold is None else float(threshold)
        self.items: dict[str, dict[str, Any]] = {}
        self.heaps: dict[str, list[tuple[float, str]]] = {r: [] for r in REASONS}
        self.seen: Counter = Counter()  # per reason, before the cap

    def _key(self, x: Interaction) -> float:
        return sample_key(x.id, self.cfg.seed)

    def _add(self, x: Interaction, reason: str) -> dict[str, Any] | None:
        self.seen[reason] += 1
        key = self._key(x)
        heap = self.heaps[reason]
        if len(heap) >= self.cfg.max_per_reason:
            if -heap[0][0] <= key:  # a larger hash than every kept one: not kept
                return None
            _, dropped = heapq.heapreplace(heap, (-key, x.id))
            self._drop(dropped, reason)
        else:
            heapq.heappush(heap, (-key, x.id))
        item = self.items.get(x.id)
        if item is None:
            item = self.items[x.id] = record(x)
        item["reasons"].add(reason)
        return item

    def _drop(self, interaction_id: str, reason: str) -> None:
        item = self.items[interaction_id]
        item["reasons"].discard(reason)
        if not item["reasons"]:
            del self.items[interaction_id]

    def line(self, x: Interaction) -> None:
        """Every line: the blind sample and the thumbs-down."""
        if self.cfg.random_rate and self._key(x) < self.cfg.random_rate:
            self._add(x, "blind")
        if self.cfg.thumbs_down and x.feedback == 0.0:
            self._add(x, "thumbs_down")

    def judged(self, x: Interaction, j: dict[str, Any], parts: dict[str, float],
               values: dict[str, float | None]) -> None:  # fmt: skip
        """A judged line, after `line`: its reasons from the judge, and the judge's reading on
        its item when it is queued."""
        score = _number(j.get("faithfulness"))
        decision = _number(j.get("judged_faithful"))
        consistency = parts.get("self_consistency")
        margin = self.cfg.confidence_margin
        if margin is not None and (
            decision is None or score is None or abs(score - self.threshold) < margin
        ):
            self._add(x, "low_confidence")
        if (
            self.cfg.min_consistency is not None
            and consistency is not None
            and consistency < self.cfg.min_consistency
        ):
            self._add(x, "low_consistency")
        item = self.items.get(x.id)
        if item is not None:
            item["judge"] = {
                "judged_faithful": decision,
                "faithfulness": score,
                "failure_mode": str(j.get("failure_mode") or ""),
                "self_consistency": consistency,
                "relevance": values.get("relevance"),
                "correctness": values.get("correctness"),
            }

    def rows(self) -> list[dict[str, Any]]:
        """The queue in time order (then id), each item's reasons in REASONS' order."""
        out = []
        for item in sorted(self.items.values(), key=lambda it: (it["ts"], it["id"])):
            row = dict(item)
            row["reasons"] = [r for r in REASONS if r in item["reasons"]]
            row["split"] = split_of(item["reasons"])
            out.append(row)
        return out

    def summary(self) -> dict[str, Any]:
        rows = self.rows()
        return {
            "items": len(rows),
            "by_reason": {r: sum(r in x["reasons"] for x in rows) for r in REASONS},
            "met_reason": {r: self.seen[r] for r in REASONS},
            "by_split": {s: sum(x["split"] == s for x in rows) for s in SPLITS},
            "max_per_reason": self.cfg.max_per_reason,
        }

    def write(self, path: Path) -> Path:
        from datetime import UTC, datetime

        from ragrig.core.io import atomic_write_text

        lines = []
        for row in self.rows():
            row["timestamp"] = datetime.fromtimestamp(row.pop("ts"), UTC).isoformat()
            lines.append(json.dumps(row, ensure_ascii=False) + "\n")
        atomic_write_text(path, "".join(lines))
        return path


def _number(value: Any) -> float | None:
    if value is None or value != value:
        return None
    return float(value)


def record(x: Interaction) -> dict[str, Any]:
    from ragrig.dataset.labels import answer_sha256

    ids = x.context_ids or tuple(passage_id(t) for t in x.contexts)
    return {
        "id": x.id,
        "ts": x.ts,
        "reasons": set(),
        "question": x.question,
        "contexts": [{"id": i, "text": t} for i, t in zip(ids, x.contexts, strict=True)],
        "answer": x.answer,
        "answer_sha256": answer_sha256(x.answer),
        "feedback": x.feedback,
        "feedback_reason": x.feedback_reason,
        "slices": dict(x.slices),
        "judge": None,
    }
