"""The structure a parsed document keeps (parse=docling's elements table) as chunkers and the
ingestion metrics see it: which element holds an offset, and the units a chunk must not split.

elements.parquet has one row per element: doc_id, n (order), kind (docling's label), text,
page (1-based, 0 when none), section (headings joined by " > "), [start, end) in its documents
row's `content`, level and self_ref (`#/texts/12`). A corpus without it (BEIR) has no elements:
every chunk's page is 0 and its section "".
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ragrig.core.errors import SchemaError
from ragrig.core.io import read_parquet

ELEMENT_COLUMNS = ("doc_id", "n", "kind", "text", "page", "section", "start", "end", "level")
TABLE_KINDS = frozenset({"table"})
LIST_KINDS = frozenset({"list_item"})
HEADING_KINDS = frozenset({"title", "section_header"})
# a numbered heading: "3 Methods", "2.1. Data", "A.2 Proofs", "IV. Results", "(3) Scope"
NUMBERED_HEADING = re.compile(r"^\s*\(?(?:\d+(?:\.\d+)*|[A-Z](?:\.\d+)+|[IVXLC]+)[.)]?\s+\S")


def read_elements(path: Path) -> pd.DataFrame | None:
    """elements.parquet, or None when the parse stage wrote none (or an empty one)."""
    if not path.exists():
        return None
    df = read_parquet(path)
    missing = [c for c in ELEMENT_COLUMNS if c not in df.columns]
    if missing:
        raise SchemaError(f"{path}: elements table lacks column(s) {', '.join(missing)}")
    return df if len(df) else None


@dataclass(frozen=True)
class Unit:
    """A span a chunk must contain whole or not at all: a table, a list (a run of consecutive
    list items), or the body of a numbered section (the elements after its heading up to the
    next heading of the same or a higher level; the heading itself travels in `section`)."""

    doc_id: str
    kind: str  # table | list | numbered_section
    start: int
    end: int
    label: str


class Elements:
    """Per-document element lookup, sorted by start."""

    def __init__(self, elements: pd.DataFrame | None):
        self.by_doc: dict[str, pd.DataFrame] = {}
        self._starts: dict[str, list[int]] = {}
        if elements is None:
            return
        for doc_id, df in elements.groupby("doc_id", sort=False):
            df = df.sort_values(["start", "n"], kind="mergesort").reset_index(drop=True)
            self.by_doc[str(doc_id)] = df
            self._starts[str(doc_id)] = df["start"].astype(int).tolist()

    def __bool__(self) -> bool:
        return bool(self.by_doc)

    def at(self, doc_id: str, offset: int) -> dict | None:
        """The element containing `offset`; in a gap between elements the next one (the last
        one past the end); None when the document has no elements."""
        df = self.by_doc.get(doc_id)
        if df is None or not len(df):
            return None
        starts = self._starts[doc_id]
        i = bisect.bisect_right(starts, offset) - 1
        if i >= 0 and offset < int(df["end"].iloc[i]):
            return df.iloc[i].to_dict()
        j = i + 1 if i + 1 < len(df) else len(df) - 1
        return df.iloc[max(j, 0)].to_dict()

    def pointer(self, doc_id: str, offset: int) -> tuple[int, str]:
        """(page, section) of the element containing `offset`; (0, "") without elements."""
        el = self.at(doc_id, offset)
        if el is None:
            return 0, ""
        return int(el["page"]), str(el["section"])


def add_pointers(chunks: pd.DataFrame, elements: Elements) -> pd.DataFrame:
    """`page` and `section` of the element holding each chunk's start."""
    out = chunks.copy()
    pointers = [
        elements.pointer(d, int(s)) for d, s in zip(out["doc_id"], out["start"], strict=True)
    ]
    out["page"] = pd.Series([p for p, _ in pointers], index=out.index, dtype="int64")
    out["section"] = pd.Series([s for _, s in pointers], index=out.index, dtype="object")
    return out


def list_runs(df: pd.DataFrame) -> list[list[int]]:
    """Row positions (in n order) of each list: consecutive list items form one list."""
    runs: list[list[int]] = []
    prev = False
    for pos, kind in enumerate(df["kind"]):
        is_item = kind in LIST_KINDS
        if is_item and prev:
            runs[-1].append(pos)
        elif is_item:
            runs.append([pos])
        prev = is_item
    return runs


def units(elements: Elements) -> list[Unit]:
    """Every table, list and numbered section of every document."""
    out: list[Unit] = []
    for doc_id, df in elements.by_doc.items():
        df = df.sort_values("n", kind="mergesort").reset_index(drop=True)
        starts, ends = df["start"].astype(int).tolist(), df["end"].astype(int).tolist()
        kinds, texts = df["kind"].tolist(), df["text"].astype(str).tolist()
        levels = df["level"].fillna(0).astype(int).tolist()
        for i, kind in enumerate(kinds):
            if kind in TABLE_KINDS:
                out.append(Unit(doc_id, "table", starts[i], ends[i], f"{doc_id}:{i}"))
        for run in list_runs(df):
            s, e = min(starts[i] for i in run), max(ends[i] for i in run)
            out.append(Unit(doc_id, "list", s, e, f"{doc_id}:{run[0]}"))
        for i, kind in enumerate(kinds):
            if kind not in HEADING_KINDS or not NUMBERED_HEADING.match(texts[i]):
                continue
            last = i
            for j in range(i + 1, len(kinds)):
                if kinds[j] in HEADING_KINDS and levels[j] <= levels[i]:
                    break
                last = j
            if last == i:
                continue  # a heading with no body in this row
            body_start, end = min(starts[i + 1 : last + 1]), max(ends[i + 1 : last + 1])
            out.append(Unit(doc_id, "numbered_section", body_start, end, texts[i].strip()))
    return out
