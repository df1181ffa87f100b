"""Logged interactions of a RAG service, streamed from JSONL (`.gz` too) one line at a time.

A line is one interaction, a JSON object:

    {"id": "a1b2", "timestamp": "2026-11-30T12:00:03Z", "question": "...",
     "contexts": [{"id": "doc-7", "text": "..."}, ...], "answer": "...",
     "latency_ms": 812, "feedback": 1}

`id`, `timestamp` (ISO 8601 with a zone, or epoch seconds), `question`, `contexts` (texts, or
objects with `text` and an optional `id`) and `answer` are required; `latency_ms` and `feedback`
(1/0, true/false, "up"/"down"; null: none) optional. What the guardrails read, optional too
(ragrig.traces.guardrails): `slices` ({"locale": "de", ...}: the slices an alert names),
`stage_latency_ms` ({"retrieve": 41, "generate": 702}), `cost_usd`, `filter_excluded` (the
document ids the service's metadata filter removed) with `gold` (the ids a reviewer marked
relevant), and `regenerates` (the id of the interaction this one regenerates). What the online
axes read, optional: `samples` (the service's extra answers to the same prompt at a temperature
above 0, strings or null for a failed one: self-consistency) and each context's `id` (with
`gold`, the context part of relevance). Feedback signals (ragrig.traces.signals), optional:
`feedback_reason` (the category of a thumb, e.g. "wrong", "incomplete"), `copied` (the user
copied the answer), `dwell_ms` (time spent on the answer) and `follows` (the id of the
interaction this question follows up; a follow-up that doubts the answer, "are you sure?", is
the doubt signal). A line that is
not JSON or lacks or breaks a field is counted by its reason (`Problems`), the first lines of
each named, never silently gone.

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
    slices: tuple[tuple[str, str], ...] = ()
    stage_latency_ms: tuple[tuple[str, float], ...] = ()
    cost_usd: float | None = None
    filter_excluded: frozenset[str] | None = None  # None: no filter logged
    gold: frozenset[str] | None = None  # None: not reviewed
    regenerates: str | None = None
    samples: tuple[str | None, ...] = ()
    context_ids: tuple[str, ...] | None = None  # None: a context without an id
    feedback_reason: str | None = None
    copied: bool | None = None
    dwell_ms: float | None = None
    follows: str | None = None


@dataclass
class Problems:
    """Lines left out, by reason, with the first line numbers of each; and lines kept with a
    note (`noted`: out of timestamp order, a regeneration of an id not seen), counted alike."""

    counts: Counter = field(default_factory=Counter)
    first: dict[str, list[int]] = field(default_factory=dict)
    noted: Counter = field(default_factory=Counter)

    def add(self, reason: str, line: int) -> None:
        self.counts[reason] += 1
        self._first(reason, line)

    def note(self, reason: str, line: int) -> None:
        self.noted[reason] += 1
        self._first(reason, line)

    def _first(self, reason: str, line: int) -> None:
        lines = self.first.setdefault(reason, [])
        if len(lines) < 3:
            lines.append(line)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def lines(self, path: Path, counts: Counter | None = None) -> list[str]:
        counts = self.counts if counts is None else counts
        return [
            f"{n} lines {reason} (first: {', '.join(f'{path}:{x}' for x in self.first[reason])})"
            for reason, n in sorted(counts.items())
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
    contexts, ids = [], []
    if not isinstance(obj["contexts"], list):
        return "with contexts that are not a list"
    for c in obj["contexts"]:
        text = c.get("text") if isinstance(c, dict) else c
        if not isinstance(text, str):
            return "with a context without text"
        contexts.append(text)
        cid = c.get("id") if isinstance(c, dict) else None
        ids.append(None if isinstance(cid, bool) or not isinstance(cid, str | int) else cid)
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
    extra = _guardrail_fields(obj)
    if isinstance(extra, str):
        return extra
    signals = _signal_fields(obj)
    if isinstance(signals, str):
        return signals
    extra.update(signals)
    if ids and all(i is not None for i in ids):
        extra["context_ids"] = tuple(str(i) for i in ids)
    return Interaction(
        str(ident),
        ts,
        obj["question"],
        contexts,
        obj["answer"],
        None if latency is None else float(latency),
        feedback,
        **extra,
    )


def _number(value: Any) -> float | None:
    """A finite number >= 0, else None (a bool, a string, a negative or NaN are not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _ids(value: Any) -> frozenset[str] | None:
    if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
        return None
    return frozenset(str(v) for v in value)


def _guardrail_fields(obj: dict) -> dict[str, Any] | str:
    """The optional fields the guardrails read, or the reason one is broken."""
    out: dict[str, Any] = {}
    slices = obj.get("slices")
    if slices is not None:
        if not isinstance(slices, dict) or not all(
            isinstance(v, str | int) and not isinstance(v, bool) for v in slices.values()
        ):
            return "with bad slices (an object of names to strings)"
        out["slices"] = tuple(sorted((str(k), str(v)) for k, v in slices.items()))
    stages = obj.get("stage_latency_ms")
    if stages is not None:
        if not isinstance(stages, dict) or any(_number(v) is None for v in stages.values()):
            return "with a bad stage_latency_ms (an object of stage names to ms >= 0)"
        out["stage_latency_ms"] = tuple(sorted((str(k), float(v)) for k, v in stages.items()))
    if obj.get("cost_usd") is not None:
        cost = _number(obj["cost_usd"])
        if cost is None:
            return "with a bad cost_usd (a number >= 0)"
        out["cost_usd"] = cost
    for key in ("filter_excluded", "gold"):
        if obj.get(key) is not None:
            ids = _ids(obj[key])
            if ids is None:
                return f"with a bad {key} (a list of document ids)"
            out[key] = ids
    if obj.get("regenerates") is not None:
        parent = _parent(obj["regenerates"])
        if parent is None:
            return "with a bad regenerates (the id of an earlier interaction)"
        out["regenerates"] = parent
    return out


def _parent(value: Any) -> str | None:
    """An interaction id (a non-empty string or an integer), else None."""
    if isinstance(value, bool) or not isinstance(value, str | int) or str(value) == "":
        return None
    return str(value)


def _signal_fields(obj: dict) -> dict[str, Any] | str:
    """The optional samples and feedback signals, or the reason one is broken."""
    out: dict[str, Any] = {}
    samples = obj.get("samples")
    if samples is not None:
        if not isinstance(samples, list) or not all(
            s is None or isinstance(s, str) for s in samples
        ):
            return "with bad samples (a list of sampled answers: strings, or null for a failed one)"
        out["samples"] = tuple(samples)
    reason = obj.get("feedback_reason")
    if reason is not None:
        if not isinstance(reason, str) or not reason.strip():
            return "with a bad feedback_reason (a category name)"
        out["feedback_reason"] = reason.strip().lower()
    copied = obj.get("copied")
    if copied is not None:
        if copied not in (True, False) or isinstance(copied, float):
            return "with a bad copied (true/false, 1/0)"
        out["copied"] = bool(copied)
    if obj.get("dwell_ms") is not None:
        dwell = _number(obj["dwell_ms"])
        if dwell is None:
            return "with a bad dwell_ms (a number >= 0)"
        out["dwell_ms"] = dwell
    if obj.get("follows") is not None:
        parent = _parent(obj["follows"])
        if parent is None:
            return "with a bad follows (the id of an earlier interaction)"
        out["follows"] = parent
    return out


DUPLICATE = "with an id seen on an earlier line (the first kept)"
OUT_OF_ORDER = "out of timestamp order (kept: each is windowed by its own timestamp)"
UNKNOWN_PARENT = "regenerating an id no earlier line has (kept: counted as a regeneration)"
UNKNOWN_FOLLOWED = "following up an id no earlier line has (kept: counted as a follow-up)"


def id_key(interaction_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(interaction_id.encode(), digest_size=8).digest(), "big")


def interactions(path: Path, problems: Problems) -> Iterator[tuple[int, Interaction]]:
    """(line number, interaction) of each good line; the others counted in `problems`. An id
    seen before leaves its line out; a line earlier in time than one before it, or regenerating
    an id not seen, is kept and noted. Ids are remembered as 8-byte hashes."""
    from ragrig.core.io import iter_lines

    seen: set[int] = set()
    latest = -math.inf
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
            continue
        key = id_key(got.id)
        if key in seen:
            problems.add(DUPLICATE, n)
            continue
        seen.add(key)
        if got.ts < latest:
            problems.note(OUT_OF_ORDER, n)
        latest = max(latest, got.ts)
        if got.regenerates is not None and id_key(got.regenerates) not in seen:
            problems.note(UNKNOWN_PARENT, n)
        if got.follows is not None and id_key(got.follows) not in seen:
            problems.note(UNKNOWN_FOLLOWED, n)
        yield n, got
