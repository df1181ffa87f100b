"""Logged interactions of a RAG service, streamed from JSONL (`.gz` too) one line at a time.

A line is one interaction, a JSON object:

    {"id": "a1b2", "timestamp": "2026-11-30T12:00:03Z", "question": "...",
     "contexts": [{"id": "doc-7", "text": "..."}, ...], "answer": "...",
     "latency_ms": 812, "feedback": 1}

`id`, `timestamp` (ISO 8601 with a zone, or epoch seconds), `question`, `contexts` (texts, or
objects with `text` and an optional `id`) and `answer` are required; `latency_ms` and `feedback`
(1/0, true/false, "up"/"down"; null: none) optional. A line that is not JSON or lacks or breaks a
field is counted by its reason (`Problems`), the first lines of each named, never silently gone.

The sample is deterministic: an interaction is judged when the seeded hash of its id falls below
`sample_rate`, so the same interactions are judged on every run and in every window.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

REQUIRED = ("id", "timestamp", "question", "contexts", "answer")
# 1 == True and 0 == False as keys: 1/0, true/false and 1.0/0.0 all read
_FEEDBACK = {1: 1.0, 0: 0.0, "up": 1.0, "down": 0.0}


@dataclass(frozen=True)
class Interaction:
    id: str
    ts: float  # epoch seconds
    question: str
    contexts: list[str]
    answer: str
    latency_ms: float | None = None
    feedback: float | None = None


@dataclass
class Problems:
    """Lines left out, by reason, with the first line numbers of each."""

    counts: Counter = field(default_factory=Counter)
    first: dict[str, list[int]] = field(default_factory=dict)

    def add(self, reason: str, line: int) -> None:
        self.counts[reason] += 1
        lines = self.first.setdefault(reason, [])
        if len(lines) < 3:
            lines.append(line)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def lines(self, path: Path) -> list[str]:
        return [
            f"{n} lines {reason} (first: {', '.join(f'{path}:{x}' for x in self.first[reason])})"
            for reason, n in sorted(self.counts.items())
        ]


def sample_key(interaction_id: str, seed: int) -> float:
    """The seeded hash of an id as a number in [0, 1)."""
    digest = hashlib.blake2b(f"{seed}:{interaction_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _timestamp(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return when.timestamp() if when.tzinfo is not None else None
    return None


def parse(obj: Any) -> Interaction | str:
    """An Interaction, or the reason the object is not one."""
    if not isinstance(obj, dict):
        return "not a JSON object"
    for key in REQUIRED:
        if key not in obj or obj[key] is None:
            return f"without {key}"
    ident = obj["id"]
    if isinstance(ident, bool) or not isinstance(ident, str | int) or str(ident) == "":
        return "with a bad id"
    ts = _timestamp(obj["timestamp"])
    if ts is None:
        return "with a bad timestamp (ISO 8601 with a zone, or epoch seconds)"
    for key in ("question", "answer"):
        if not isinstance(obj[key], str):
            return f"with a {key} that is not a string"
    contexts = []
    if not isinstance(obj["contexts"], list):
        return "with contexts that are not a list"
    for c in obj["contexts"]:
        text = c.get("text") if isinstance(c, dict) else c
        if not isinstance(text, str):
            return "with a context without text"
        contexts.append(text)
    latency = obj.get("latency_ms")
    if latency is not None and (
        isinstance(latency, bool) or not isinstance(latency, int | float) or not latency >= 0
    ):
        return "with a bad latency_ms"
    feedback = obj.get("feedback")
    if feedback is not None:
        if isinstance(feedback, list | dict) or feedback not in _FEEDBACK:
            return "with a bad feedback (1/0, true/false, up/down)"
        feedback = _FEEDBACK[feedback]
    return Interaction(
        str(ident),
        ts,
        obj["question"],
        contexts,
        obj["answer"],
        None if latency is None else float(latency),
        feedback,
    )


def interactions(path: Path, problems: Problems) -> Iterator[tuple[int, Interaction]]:
    """(line number, interaction) of each good line; the others counted in `problems`."""
    from ragrig.core.io import iter_lines

    for n, line in iter_lines(Path(path)):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            problems.add("not JSON", n)
            continue
        got = parse(obj)
        if isinstance(got, str):
            problems.add(got, n)
        else:
            yield n, got
