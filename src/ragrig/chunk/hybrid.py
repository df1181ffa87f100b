"""chunk=hybrid: docling's HybridChunker (structure- and token-aware) with pointers into content.

docling groups a document's items by section and packs them up to `max_tokens` tokens of the
packaged MiniLM tokenizer (a local folder; docling's default tokenizer would come from a hub).
Each docling chunk becomes a character span of a documents row: the span of its doc_items'
elements (elements.parquet, matched by self_ref), so a chunk's text is always
`content[start:end]`. Where docling cut one paragraph into pieces, each piece is located inside
that paragraph's span (its words in order, whatever whitespace lies between them); where it cut a table or a list (a table or list longer than max_tokens,
or list items packed apart), or a paragraph piece cannot be located, the pieces are joined
again: a table or list is never split, and a chunk whose own text (overlap aside) then exceeds
max_tokens is counted (`oversized`).

`overlap` > 0 starts each chunk after a document's first up to `overlap` tokens earlier,
always after the previous chunk's own start and never inside a table or list.

A documents row with no docling document (BEIR corpora) is chunked as a docling document of
its paragraphs (blocks separated by a blank line), counted as `plain_documents`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from ragrig.chunk.structure import TABLE_KINDS, list_runs
from ragrig.core.errors import RagrigError
from ragrig.core.io import verify_artifact

_PARAGRAPH = re.compile(r"\S(?:.*?\S)?(?=\s*\n\s*\n|\s*\Z)", re.S)


class Element:
    __slots__ = ("doc_id", "start", "end", "kind", "key")

    def __init__(self, doc_id: str, start: int, end: int, kind: str, key: str | None):
        self.doc_id, self.start, self.end, self.kind, self.key = doc_id, start, end, kind, key


def paragraphs(content: str) -> list[tuple[int, int]]:
    """Spans of the non-blank blocks of `content` separated by blank lines, stripped."""
    return [(m.start(), m.end()) for m in _PARAGRAPH.finditer(content)]


def load_hf_tokenizer(ref: str) -> Any:
    """transformers' tokenizer of a packaged model or a local folder (never a hub id)."""
    from transformers import AutoTokenizer

    from ragrig.weights.models import resolve_model

    path = Path(resolve_model(ref))
    if not path.exists():
        raise RagrigError(f"chunk.tokenizer {ref!r}: no local tokenizer at {path}")
    return AutoTokenizer.from_pretrained(str(path if path.is_dir() else path.parent))


class HybridDoclingChunker:
    def __init__(self, tokenizer: str, max_tokens: int, overlap: int = 0, merge_peers: bool = True):
        from docling_core.transforms.chunker.hybrid_chunker import HybridChunker
        from docling_core.transforms.chunker.tokenizer.huggingface import HuggingFaceTokenizer

        from ragrig.chunk.base import load_tokenizer

        if overlap >= max_tokens:
            raise ValueError("overlap must be smaller than max_tokens")
        self.max_tokens = max_tokens
        self.overlap = overlap
        self.fast = load_tokenizer(tokenizer)
        hf = HuggingFaceTokenizer(tokenizer=load_hf_tokenizer(tokenizer), max_tokens=max_tokens)
        self.chunker = HybridChunker(tokenizer=hf, merge_peers=merge_peers)
        self.stats: Counter[str] = Counter()

    @classmethod
    def from_config(cls, cfg: Any) -> HybridDoclingChunker:
        return cls(cfg.tokenizer, cfg.max_tokens, cfg.overlap, cfg.merge_peers)

    def spans(self, content: str) -> list[tuple[int, int]]:
        """One plain document (no docling document, no elements)."""
        docs = pd.DataFrame({"doc_id": ["d"], "content": [content]})
        return self.document_spans(docs, None, None, progress=False).get("d", [])

    # -- the corpus -------------------------------------------------------------------------
    def document_spans(
        self,
        documents: pd.DataFrame,
        elements: pd.DataFrame | None,
        docling_dir: Path | None,
        progress: bool = True,
    ) -> dict[str, list[tuple[int, int]]]:
        from ragrig.core.progress import track

        contents = dict(zip(documents["doc_id"], documents["content"], strict=True))
        by_file: dict[str, dict[str, Element]] = {}
        if elements is not None and len(elements):
            if "file_id" not in documents.columns:
                raise RagrigError("chunk=hybrid: elements exist but documents has no file_id")
            file_of = dict(zip(documents["doc_id"], documents["file_id"], strict=True))
            by_file = _element_index(elements, file_of)
        files = documents["file_id"] if "file_id" in documents.columns else [None] * len(documents)
        plain = [d for d, f in zip(documents["doc_id"], files, strict=True) if f not in by_file]
        jobs: list[tuple[str, Any]] = [("file", f) for f in by_file] + [("plain", d) for d in plain]
        out: dict[str, list[tuple[int, int]]] = {}
        bar: Iterable = track(jobs, "chunk", "documents", len(jobs)) if progress else jobs
        for kind, key in bar:
            if kind == "file":
                path = Path(docling_dir or "") / f"{key}.json"
                if not path.is_file():
                    raise RagrigError(f"chunk=hybrid: no docling document {path} for file {key}")
                doc = _load_docling(path)
                refs = by_file[key]
            else:
                doc, refs = _plain_document(key, contents[key])
                self.stats["plain_documents"] += 1
            for doc_id, spans in self._file_spans(doc, refs, contents).items():
                out.setdefault(doc_id, []).extend(spans)
        return {d: sorted(set(s)) for d, s in out.items()}

    def _file_spans(
        self, doc: Any, refs: dict[str, Element], contents: dict[str, str]
    ) -> dict[str, list[tuple[int, int]]]:
        # 1. docling's chunks as pieces: (doc_id, elements, the chunk's text)
        pieces: list[tuple[str, list[Element], str]] = []
        for chunk in self.chunker.chunk(doc):
            found = [refs[it.self_ref] for it in chunk.meta.doc_items if it.self_ref in refs]
            self.stats["docling_chunks"] += 1
            if not found:
                self.stats["unmapped_docling_chunks"] += 1
                continue
            for doc_id in dict.fromkeys(e.doc_id for e in found):
                pieces.append((doc_id, [e for e in found if e.doc_id == doc_id], chunk.text))
        # 2. a paragraph docling cut into pieces: locate each piece (which may also hold whole
        # elements around it) in order inside its elements' span, or keep the paragraph whole
        seen: Counter[int] = Counter(id(e) for _, els, _ in pieces for e in els)
        located: dict[int, tuple[int, int]] = {}  # piece index -> its span
        whole: set[int] = set()  # id() of split elements kept whole
        cursor: dict[int, int] = {}
        for i, (doc_id, els, text) in enumerate(pieces):
            split = [e for e in els if seen[id(e)] > 1]
            if not split:
                continue
            at = cursor.get(id(els[0]), els[0].start)
            found_at = locate(contents[doc_id], text, at, max(e.end for e in els))
            if found_at is None:
                whole.update(id(e) for e in split)
                continue
            located[i] = found_at
            cursor.update({id(e): found_at[1] for e in split})
        # 3. join consecutive pieces sharing a table, a list or a paragraph kept whole
        groups: list[tuple[str, int, int, set[str]]] = []
        for i, (doc_id, els, _) in enumerate(pieces):
            keys = {e.key for e in els if e.key is not None}
            keys |= {f"w{id(e)}" for e in els if id(e) in whole}
            if i in located and not any(id(e) in whole for e in els):
                start, end = located[i]
            else:
                start, end = min(e.start for e in els), max(e.end for e in els)
            last = groups[-1] if groups else None
            if last is not None and last[0] == doc_id and keys & last[3]:
                groups[-1] = (doc_id, min(last[1], start), max(last[2], end), last[3] | keys)
                self.stats["joined_pieces"] += 1
            else:
                groups.append((doc_id, start, end, keys))
        # 4. overlap, and what exceeds max_tokens
        out: dict[str, list[tuple[int, int]]] = {}
        units = _unit_spans(refs.values())
        offsets: dict[str, list[int]] = {}
        previous: dict[str, int] = {}  # a document's previous chunk start, before overlap
        for doc_id, start, end, _ in groups:
            spans = out.setdefault(doc_id, [])
            content = contents[doc_id]
            own_start = start
            if self.overlap and doc_id in previous:
                if doc_id not in offsets:
                    enc = self.fast.encode(content, add_special_tokens=False)
                    offsets[doc_id] = [s for s, e in enc.offsets if e > s]
                start = _overlap_start(
                    offsets[doc_id], start, previous[doc_id], units.get(doc_id, []), self.overlap
                )
            previous[doc_id] = own_start
            n_tokens = len(self.fast.encode(content[own_start:end], add_special_tokens=False).ids)
            if n_tokens > self.max_tokens:
                self.stats["oversized"] += 1
            spans.append((start, end))
        # 5. nothing lost: elements no chunk holds (a docling chunk naming no parsed element,
        # a section that is only its heading) become chunks, one per run of consecutive ones
        for doc_id, runs in uncovered_runs(refs.values(), out, contents).items():
            out.setdefault(doc_id, []).extend(runs)
            self.stats["uncovered_element_chunks"] += len(runs)
        return out


HEADING_KINDS = frozenset({"title", "section_header"})


def uncovered_runs(
    elements: Iterable[Element], spans: dict[str, list[tuple[int, int]]], contents: dict[str, str]
) -> dict[str, list[tuple[int, int]]]:
    """Per document, the spans of runs of consecutive (by start) elements with text that no
    span covers (whitespace between the pieces of a cut paragraph does not count). Headings are
    not text to keep: docling carries them in a chunk's headings, the chunk table in `section`."""
    by_doc: dict[str, list[Element]] = {}
    for e in elements:
        if e.end > e.start and e.kind not in HEADING_KINDS:
            by_doc.setdefault(e.doc_id, []).append(e)
    out: dict[str, list[tuple[int, int]]] = {}
    for doc_id, els in by_doc.items():
        content = contents[doc_id]
        covered = bytearray(len(content))
        for s, t in spans.get(doc_id, []):
            covered[s:t] = b"\x01" * (t - s)
        runs: list[tuple[int, int]] = []
        run: tuple[int, int] | None = None
        for e in sorted(els, key=lambda e: (e.start, e.end)):
            lost = any(not covered[i] and not content[i].isspace() for i in range(e.start, e.end))
            if not lost:
                if run is not None:
                    runs.append(run)
                    run = None
                continue
            run = (run[0], max(run[1], e.end)) if run is not None else (e.start, e.end)
        if run is not None:
            runs.append(run)
        if runs:
            out[doc_id] = runs
    return out


def locate(content: str, piece: str, at: int, end: int) -> tuple[int, int] | None:
    """Span of `piece` in content[at:end], its words matched in order whatever whitespace lies
    between them (docling's text splitter rejoins a paragraph's pieces with newlines)."""
    words = piece.split()
    if not words:
        return None
    found = re.compile(r"\s+".join(map(re.escape, words))).search(content, at, end)
    return (found.start(), found.end()) if found else None


def _overlap_start(
    offs: list[int], start: int, prev_start: int, units: list[tuple[int, int]], overlap: int
) -> int:
    """`start` moved back by up to `overlap` token starts `offs`, after `prev_start`, never
    inside a table or list span of `units`."""
    before = [s for s in offs if prev_start < s < start]
    if not before:
        return start
    new = before[max(len(before) - overlap, 0)]
    for us, ue in units:
        if us < new < ue:
            after = [s for s in offs if ue <= s <= start]
            new = after[0] if after else start
    return new


def _element_index(
    elements: pd.DataFrame, file_of: dict[str, str]
) -> dict[str, dict[str, Element]]:
    """file_id -> self_ref -> Element; the key of a table or list (runs of list items)."""
    out: dict[str, dict[str, Element]] = {}
    for doc_id, df in elements.groupby("doc_id", sort=False):
        doc_id = str(doc_id)
        if doc_id not in file_of:
            raise RagrigError(f"elements.parquet: doc_id {doc_id!r} is not in documents.parquet")
        df = df.sort_values("n", kind="mergesort").reset_index(drop=True)
        keys: dict[int, str] = {}
        for run in list_runs(df):
            keys.update({pos: f"list:{doc_id}:{run[0]}" for pos in run})
        refs = out.setdefault(str(file_of[doc_id]), {})
        for pos, row in enumerate(df.itertuples(index=False)):
            kind = str(row.kind)
            key = f"table:{doc_id}:{pos}" if kind in TABLE_KINDS else keys.get(pos)
            refs[str(row.self_ref)] = Element(doc_id, int(row.start), int(row.end), kind, key)
    return out


def _unit_spans(elements: Iterable[Element]) -> dict[str, list[tuple[int, int]]]:
    spans: dict[tuple[str, str], tuple[int, int]] = {}
    for e in elements:
        if e.key is None:
            continue
        s, t = spans.get((e.doc_id, e.key), (e.start, e.end))
        spans[(e.doc_id, e.key)] = (min(s, e.start), max(t, e.end))
    out: dict[str, list[tuple[int, int]]] = {}
    for (doc_id, _), span in spans.items():
        out.setdefault(doc_id, []).append(span)
    return out


def _load_docling(path: Path) -> Any:
    from docling_core.types.doc import DoclingDocument

    verify_artifact(path)  # the parse stage's output, as it recorded it
    try:
        return DoclingDocument.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise RagrigError(f"{path}: not a DoclingDocument ({str(exc).splitlines()[0]})") from exc


def _plain_document(doc_id: str, content: str) -> tuple[Any, dict[str, Element]]:
    """A docling document of the paragraphs of a plain documents row."""
    from docling_core.types.doc import DocItemLabel, DoclingDocument

    doc = DoclingDocument(name=doc_id)
    refs = {}
    for start, end in paragraphs(content):
        item = doc.add_text(label=DocItemLabel.TEXT, text=content[start:end])
        refs[item.self_ref] = Element(doc_id, start, end, "text", None)
    return doc, refs
