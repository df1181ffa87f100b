"""Splits that do not leak: development, judge calibration, release measurement and monitoring
kept apart, grouped before splitting, versioned.

A BEIR-layout set's judged queries (``qrels/<source>.tsv``) are split into named parts
(``qrels/<name>.tsv``, each a BEIR split the pipeline reads with ``dataset.split=<name>``):

* **Groups first.** Queries that share a gold document (grade > 0), a session (a queries
  metadata field, e.g. a conversation id) or their case-folded text are one group (union-find:
  a chain of shared documents is one group), and a group lies wholly in one part. Splitting
  query by query would put two questions about one document, or two turns of one conversation,
  on both sides of a decision.
* **Development is sticky.** A query that guided tuning (a threshold fitted, a prompt chosen, a
  failure read) is marked in the set's ledger, ``development.jsonl``
  (`mark_development`; `ragrig tune-first-stage` marks the queries it chose on by itself,
  `record_tuning`); from then on its group goes to the ``development`` part in every
  version, and a run that evaluates any other part holding a marked query is refused at parse
  (`check_not_development`).
* **Assignment** is deterministic: groups in an order fixed by the seed (sha256 of the seed and
  the group's first query id), each given to the part furthest below its target share of the
  queries (ties to the part named first). The shares reached are reported beside the targets:
  one large group can keep a part from its target.
* **Versions.** Every split writes its part files, then appends a record to ``splits.jsonl``:
  version, source split and its sha256, seed, grouping, targets, per part its queries, groups,
  share and file sha256, the ledger's size and digest, and the leak checks on what was written
  (no group, gold document, session or text in two parts). The parse stage records the version
  of the part it reads (and whether its file still has that digest) in its manifest.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragrig.core.errors import DataValidationError
from ragrig.core.io import atomic_write_text, file_sha256
from ragrig.core.text import counted

LEDGER = "development.jsonl"
VERSIONS = "splits.jsonl"
DEVELOPMENT = "development"
DEFAULT_PARTS = {"development": 0.2, "calibration": 0.2, "release": 0.4, "monitoring": 0.2}


def norm(text: str) -> str:
    return " ".join(text.casefold().split())


class _Union:
    def __init__(self, items: Sequence[str]):
        self.parent = {x: x for x in items}

    def find(self, x: str) -> str:
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def join(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)  # the smaller id names the group


def groups(
    qids: Sequence[str],
    qrels: Mapping[str, Mapping[str, int]],
    texts: Mapping[str, str],
    sessions: Mapping[str, str] | None = None,
    by_documents: bool = True,
) -> dict[str, str]:
    """qid -> its group (the smallest qid of it), joining queries that share a gold document
    (when `by_documents`), a session, or a case-folded text."""
    u = _Union(sorted(qids))
    keys: dict[tuple[str, str], str] = {}
    for q in sorted(qids):
        mine = [("text", norm(texts.get(q, "")))] if texts.get(q) else []
        if by_documents:
            mine += [("doc", d) for d, r in sorted(qrels.get(q, {}).items()) if r > 0]
        if sessions is not None and sessions.get(q) not in (None, ""):
            mine.append(("session", str(sessions[q])))
        for key in mine:
            if key in keys:
                u.join(q, keys[key])
            else:
                keys[key] = q
    return {q: u.find(q) for q in sorted(qids)}


def _order(group: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}:{group}".encode()).hexdigest()


def assign(
    group_of: Mapping[str, str],
    parts: Mapping[str, float],
    seed: int,
    development: set[str] | frozenset[str] = frozenset(),
) -> dict[str, str]:
    """qid -> part (module doc). `parts`: name -> target share, summing to 1; a group holding a
    query of `development` goes to the development part, which must then be one of `parts`."""
    check_parts(parts)
    members: dict[str, list[str]] = defaultdict(list)
    for q, g in group_of.items():
        members[g].append(q)
    marked = {g for g, qs in members.items() if any(q in development for q in qs)}
    if marked and DEVELOPMENT not in parts:
        raise DataValidationError(
            f"{len(development)} queries are marked development ({LEDGER}) but the parts "
            f"({', '.join(parts)}) have no {DEVELOPMENT!r} part to hold them"
        )
    total = len(group_of)
    count = dict.fromkeys(parts, 0)
    out: dict[str, str] = {}
    for g in sorted(marked):
        for q in members[g]:
            out[q] = DEVELOPMENT
        count[DEVELOPMENT] += len(members[g])
    names = list(parts)
    for g in sorted((g for g in members if g not in marked), key=lambda g: _order(g, seed)):
        # the part furthest below its target, ties to the one named first
        best = max(names, key=lambda p: (parts[p] * total - count[p], -names.index(p)))
        for q in members[g]:
            out[q] = best
        count[best] += len(members[g])
    return out


def check_parts(parts: Mapping[str, float]) -> None:
    if len(parts) < 2:
        raise DataValidationError(f"a split needs at least two parts, got {dict(parts)}")
    bad = [f"{k}={v}" for k, v in parts.items() if not (isinstance(v, int | float) and 0 < v < 1)]
    if bad:
        raise DataValidationError(
            f"each part's share lies strictly between 0 and 1: {', '.join(bad)}"
        )
    if abs(sum(parts.values()) - 1) > 1e-9:
        raise DataValidationError(
            f"the parts' shares sum to {sum(parts.values()):g}, not 1 ({dict(parts)})"
        )
    for name in parts:
        if not name or any(c in name for c in "/\\\t\n ") or name.startswith("."):
            raise DataValidationError(f"part name {name!r}: a file name is needed (no /, space)")


def leaks(
    assignment: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    texts: Mapping[str, str],
    sessions: Mapping[str, str] | None,
    by_documents: bool,
) -> dict[str, int]:
    """Keys found in two parts: gold documents (when grouped by them), sessions, texts."""
    seen: dict[tuple[str, str], set[str]] = defaultdict(set)
    for q, part in assignment.items():
        if texts.get(q):
            seen[("texts", norm(texts[q]))].add(part)
        if by_documents:
            for d, r in qrels.get(q, {}).items():
                if r > 0:
                    seen[("documents", d)].add(part)
        if sessions is not None and sessions.get(q) not in (None, ""):
            seen[("sessions", str(sessions[q]))].add(part)
    out = {"documents": 0, "sessions": 0, "texts": 0}
    for (kind, _), where in seen.items():
        out[kind] += len(where) > 1
    return out


@dataclass(frozen=True)
class Ledger:
    qids: frozenset[str]
    sha256: str | None  # None: no ledger
    reasons: dict[str, str] = field(default_factory=dict)


def read_ledger(root: Path) -> Ledger:
    """The development ledger: one JSON object per line, `qid` and `reason`."""
    path = root / LEDGER
    if not path.exists():
        return Ledger(frozenset(), None)
    from ragrig.dataset.beir import iter_jsonl

    reasons: dict[str, str] = {}
    for lineno, rec in iter_jsonl(path, warn=False):
        q = rec.get("qid")
        if not isinstance(q, str) or not q:
            raise DataValidationError(f"{path}:{lineno}: each line needs a 'qid' string")
        reasons.setdefault(q, str(rec.get("reason", "")))
    return Ledger(frozenset(reasons), file_sha256(path), reasons)


def mark_development(root: Path, qids: Sequence[str], reason: str) -> dict[str, Any]:
    """Add `qids` to the ledger (those already there: counted, not repeated). Returns what was
    added and which parts of the latest version hold the newly marked queries."""
    if not reason.strip():
        raise DataValidationError("say why these queries are development data (--reason)")
    known = set(queries_of(root))
    unknown = sorted(set(qids) - known)
    if unknown:
        raise DataValidationError(
            f"{root / 'queries.jsonl'} has no {counted(unknown, 'query', 'queries')}: nothing marked"
        )
    ledger = read_ledger(root)
    new = [q for q in dict.fromkeys(qids) if q not in ledger.qids]
    path = root / LEDGER
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    lines = "".join(json.dumps({"qid": q, "reason": reason}) + "\n" for q in new)
    if new:
        atomic_write_text(path, old + ("" if not old or old.endswith("\n") else "\n") + lines)
    held: dict[str, list[str]] = defaultdict(list)
    latest = latest_version(root)
    for part in (latest or {}).get("parts", {}):
        if part == DEVELOPMENT:
            continue
        qrels_path = root / "qrels" / f"{part}.tsv"
        if qrels_path.exists():
            judged = _judged(qrels_path)
            held[part] = sorted(q for q in new if q in judged)
    return {
        "added": new,
        "already": len(qids) - len(new),
        "held": {k: v for k, v in held.items() if v},
    }


def record_tuning(root: Path, qids: Sequence[str], reason: str) -> dict[str, Any] | None:
    """A tuning command's queries marked development in a set `ragrig split` made (None for any
    other set: its folder is not ragrig's to write, e.g. a shared download)."""
    if not (root / VERSIONS).is_file():
        return None
    return mark_development(root, list(qids), reason)


def queries_of(root: Path) -> dict[str, str]:
    from ragrig.dataset.beir import load_queries

    return load_queries(root / "queries.jsonl")


def _judged(path: Path) -> set[str]:
    from ragrig.dataset.beir import load_qrels

    return set(load_qrels(path))


def versions(root: Path) -> list[dict[str, Any]]:
    path = root / VERSIONS
    if not path.exists():
        return []
    from ragrig.dataset.beir import iter_jsonl

    return [rec for _, rec in iter_jsonl(path, warn=False)]


def latest_version(root: Path) -> dict[str, Any] | None:
    got = versions(root)
    return got[-1] if got else None


def split(
    root: Path,
    source: str,
    parts: Mapping[str, float],
    seed: int = 13,
    session: str | None = None,
    by_documents: bool = True,
) -> dict[str, Any]:
    """Split `qrels/<source>.tsv` of the set at `root` into `parts` (module doc); writes the
    part files and appends the version record, which it returns."""
    from ragrig.dataset.beir import load_qrels, load_query_metadata

    check_parts(parts)
    if source in parts:
        raise DataValidationError(
            f"the source split {source!r} cannot also be a part (its file would be overwritten)"
        )
    src = root / "qrels" / f"{source}.tsv"
    if not src.is_file():
        raise DataValidationError(f"no source split: {src} not found")
    qrels = load_qrels(src)
    texts = queries_of(root)
    missing = sorted(set(qrels) - set(texts))
    if missing:
        raise DataValidationError(
            f"{src} judges {counted(missing, 'query', 'queries')} not in queries.jsonl"
        )
    sessions = None
    if session is not None:
        meta, _ = load_query_metadata(root / "queries.jsonl")
        sessions = {q: str(meta[q][session]) for q in qrels if session in meta.get(q, {})}
        if not sessions:
            raise DataValidationError(
                f"no judged query of {src} has the metadata field {session!r} (the session)"
            )
    ledger = read_ledger(root)
    qids = sorted(qrels)
    group_of = groups(qids, qrels, texts, sessions, by_documents)
    assignment = assign(group_of, parts, seed, ledger.qids & set(qids))
    leak = leaks(assignment, qrels, texts, sessions, by_documents)
    spanning = sum(len({assignment[q] for q in qs}) > 1 for qs in _members(group_of).values())
    if spanning or any(leak.values()):  # by construction never; checked on what is written
        raise DataValidationError(f"the split leaks ({spanning} groups in two parts, {leak})")
    empty = [p for p in parts if p not in set(assignment.values())]
    if empty:
        raise DataValidationError(
            f"{counted(empty, 'part')} got no query: {len(qids)} queries in "
            f"{len(set(group_of.values()))} groups (the largest "
            f"{max(len(m) for m in _members(group_of).values())}) cannot fill "
            f"{len(parts)} parts; give fewer parts or a set with more groups"
        )
    record_parts = {}
    for name in parts:
        mine = [q for q in qids if assignment[q] == name]
        lines = "".join(f"{q}\t{d}\t{r}\n" for q in mine for d, r in sorted(qrels[q].items()))
        path = root / "qrels" / f"{name}.tsv"
        atomic_write_text(path, "query-id\tcorpus-id\tscore\n" + lines)
        record_parts[name] = {
            "target": parts[name],
            "queries": len(mine),
            "groups": len({group_of[q] for q in mine}),
            "share": round(len(mine) / len(qids), 6) if qids else 0.0,
            "qrels_sha256": file_sha256(path),
        }
    sizes = sorted(len(m) for m in _members(group_of).values())
    previous = versions(root)
    record = {
        "version": (previous[-1]["version"] + 1) if previous else 1,
        "source": source,
        "source_sha256": file_sha256(src),
        "seed": seed,
        "group_by": {"documents": by_documents, "session": session, "text": True},
        "queries": len(qids),
        "groups": len(sizes),
        "largest_group": sizes[-1] if sizes else 0,
        "development_marked": len(ledger.qids & set(qids)),
        "ledger_sha256": ledger.sha256,
        "parts": record_parts,
        "leaks": {"groups_in_two_parts": spanning, **leak},
    }
    path = root / VERSIONS
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    atomic_write_text(path, old + json.dumps(record, sort_keys=True) + "\n")
    return record


def _members(group_of: Mapping[str, str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for q, g in group_of.items():
        out[g].append(q)
    return out


def split_record(root: Path, split: str) -> dict[str, Any] | None:
    """For the parse manifest: the latest version naming `split` as a part, and whether the
    part's file still has the digest recorded then (None: the set was never split by ragrig)."""
    for rec in reversed(versions(root)):
        part = rec.get("parts", {}).get(split)
        if part is None:
            continue
        path = root / "qrels" / f"{split}.tsv"
        current = file_sha256(path) if path.is_file() else None
        return {
            "version": rec["version"],
            "part": split,
            "qrels_sha256": part["qrels_sha256"],
            "unchanged": current == part["qrels_sha256"],
            "source": rec["source"],
            "seed": rec["seed"],
        }
    return None


def check_not_development(root: Path, split: str, judged: Sequence[str]) -> None:
    """Refuse a run of any part but development that holds a query marked development."""
    if split == DEVELOPMENT:
        return
    ledger = read_ledger(root)
    if not ledger.qids:
        return
    hit = sorted(set(judged) & ledger.qids)
    if hit:
        raise DataValidationError(
            f"qrels/{split}.tsv holds {counted(hit, 'query', 'queries')} marked development in "
            f"{root / LEDGER} (they guided tuning): run ragrig split {root} to move them, or "
            f"evaluate dataset.split={DEVELOPMENT}"
        )
