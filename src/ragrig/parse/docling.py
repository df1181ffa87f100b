"""parse=docling: a folder of documents (PDF, HTML, Markdown, DOCX, PPTX, XLSX, JATS, ...) into
the standard documents table, one row per section (or per file), plus one row per element.

Conversion runs in worker processes (`parse.workers`), one file at a time each, and a file
whose conversion outlives `parse.timeout_s` has its worker killed (status timed_out) and a
fresh worker takes the next file. Every file gets a status in the parse report: parsed, failed
(with its reason), skipped (unsupported extension, excluded, oversized, a symbolic link, a PDF
without a text layer that would need OCR) or timed_out, and a short cause (CAUSES). The stage
fails only when failed + timed_out exceed `parse.max_failure_share` of the files, naming them.

Before any conversion a file's first bytes must match its extension (a ZIP archive named
report.pdf fails as such instead of being converted into whatever docling makes of it). A
symbolic link is never a second copy: one to a file inside its documents folder is skipped (the
file is parsed under its own path), one leaving the folder is skipped unless
`parse.follow_outside_links`, one to a folder is not descended, a broken one fails.

Ids are stable: file_id = `<slug(path)>-<sha256(path NUL text)[:10]>`, with path relative to
its documents folder; a section's doc_id is `<file_id>/s<n:03d>` (n-th section of the file).

A file name that is not UTF-8 (its bytes come back as lone surrogates) and any lone surrogate in
a converted file's text are replaced by U+FFFD, counted in the manifest's `surrogates_replaced`
and warned about on stderr, naming the file.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import sys
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ragrig.core.errors import DataValidationError, RagrigError
from ragrig.core.text import (
    counted,
    replace_surrogates,
    replace_surrogates_in,
    strict_int,
    surrogate_warning,
)
from ragrig.parse.base import Parsed, content_hash

# file extension -> format name (the worker's INPUT_FORMATS keys)
EXTENSIONS: dict[str, str] = {
    ".pdf": "pdf",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".md": "md",
    ".markdown": "md",
    ".docx": "docx",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".csv": "csv",
    ".adoc": "asciidoc",
    ".asciidoc": "asciidoc",
    ".nxml": "jats",
    ".xml": "jats",
}
STATUSES = ("parsed", "failed", "skipped", "timed_out")
# why a file was not parsed, one short name per kind of reason (the reason text has the details)
CAUSES = {
    "skipped": (
        "excluded",
        "unsupported",
        "oversized",
        "link_inside",
        "link_outside",
        "link_to_folder",
        "not_regular",
        "needs_ocr",
    ),
    "failed": (
        "empty",
        "unreadable",
        "content_mismatch",
        "broken_link",
        "encrypted",
        "conversion",
        "worker_died",
        "no_text",
    ),
    "timed_out": ("timeout",),
}
EXAMPLES = 5  # files named per status in the manifest's `not_parsed` (all are in the report)
JOIN = "\n\n"  # between elements in a documents row's content
SECTION_SEP = " > "
ELEMENT_COLUMNS = [
    "doc_id",
    "n",
    "kind",
    "text",
    "page",
    "section",
    "start",
    "end",
    "level",
    "self_ref",
]
DOC_COLUMNS = [
    "doc_id",
    "title",
    "text",
    "content",
    "source",
    "content_hash",
    "file_id",
    "path",
    "format",
    "section",
    "page_start",
]
SHOWN = 20  # files not parsed named on the console (all are in parse_report.json)
WORKER_START_S = 600.0  # a worker must have built its converter within this time


def slug(path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "file"


def file_id_of(path: str, text: str) -> str:
    digest = hashlib.sha256(f"{path}\0{text}".encode()).hexdigest()[:10]
    return f"{slug(path)}-{digest}"


# --- which files --------------------------------------------------------------------------------


@dataclass
class FileEntry:
    path: str  # relative to its folder, POSIX
    abspath: Path
    format: str  # "" when the extension is not supported
    status: str = ""
    reason: str = ""
    cause: str = ""  # one of CAUSES[status] when not parsed
    seconds: float = 0.0
    pages: int = 0
    chars: int = 0
    file_id: str = ""
    result: dict[str, Any] = field(default_factory=dict, repr=False)
    # lone surrogates replaced by U+FFFD: in the file's name (bytes not UTF-8), in its text
    name_replaced: int = 0
    text_replaced: int = 0

    def report(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format or Path(self.path).suffix.lower().lstrip(".") or "none",
            "status": self.status,
            "reason": self.reason,
            "cause": self.cause,
            "seconds": round(self.seconds, 3),
            "pages": self.pages,
            "chars": self.chars,
            "file_id": self.file_id,
        }

    def mark(self, status: str, cause: str, reason: str) -> None:
        assert cause in CAUSES[status], (status, cause)
        self.status, self.cause, self.reason = status, cause, reason


# --- does the content match the extension --------------------------------------------------------

HEAD_BYTES = 8192
# leading bytes -> what the file is; checked in order
SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "a PDF"),
    (b"PK\x03\x04", "a ZIP archive"),
    (b"PK\x05\x06", "an empty ZIP archive"),
    (
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",
        "an OLE2 file (legacy .doc/.xls/.ppt, or encrypted Office)",
    ),
    (b"\x1f\x8b", "a gzip file"),
    (b"\xfd7zXZ\x00", "an xz file"),
    (b"(\xb5/\xfd", "a zstd file"),
    (b"7z\xbc\xaf'\x1c", "a 7-Zip archive"),
    (b"Rar!\x1a\x07", "a RAR archive"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"\x7fELF", "an ELF executable"),
)
# the part an Office Open XML package of each format must hold
OOXML_PART = {"docx": "word/", "pptx": "ppt/", "xlsx": "xl/"}
# byte-order marks of UTF-16/32, whose text holds NUL bytes
WIDE_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _kind_of(head: bytes) -> str:
    return next((what for magic, what in SIGNATURES if head.startswith(magic)), "")


def content_mismatch(path: Path, fmt: str) -> str:
    """Why the file's bytes are not a `fmt` file ("" when they may be): a PDF needs `%PDF-` in its
    first 1024 bytes (where readers look for it), DOCX/PPTX/XLSX a ZIP holding their main part
    (a ZIP too damaged to list is left to the converter, which names the damage), and the text
    formats no known binary signature and no NUL byte."""
    with open(path, "rb") as fh:
        head = fh.read(HEAD_BYTES)
    kind = _kind_of(head)
    if fmt == "pdf":
        if b"%PDF-" in head[:1024]:
            return ""
        return kind or "no %PDF- header"
    if fmt in OOXML_PART:
        if not head.startswith(b"PK\x03\x04"):
            return kind or "not a ZIP archive"
        import zipfile

        try:
            with zipfile.ZipFile(path) as z:
                names = z.namelist()
        except (zipfile.BadZipFile, OSError, ValueError):
            return ""
        part = OOXML_PART[fmt]
        if not any(n.startswith(part) for n in names):
            return f"a ZIP archive without {part}"
        return ""
    if kind:
        return kind
    if b"\x00" in head and not head.startswith(WIDE_BOMS):
        return "binary content (NUL bytes)"
    return ""


# --- which files --------------------------------------------------------------------------------


def _link(f: Path, real_root: str, follow_outside: bool, e: FileEntry) -> bool:
    """Mark a symbolic link `f` that is not parsed; True when it was marked. `real_root` is the
    documents folder with its own links resolved."""
    target = os.path.realpath(f)  # never raises, a loop included (it then does not exist)
    if not os.path.exists(target):
        e.mark("failed", "broken_link", "broken symbolic link: its target does not exist")
    elif os.path.isdir(target):
        e.mark("skipped", "link_to_folder", "symbolic link to a folder: not descended")
    elif os.path.commonpath([real_root, target]) == real_root:
        inside = replace_surrogates(Path(target).relative_to(real_root).as_posix())[0]
        e.mark("skipped", "link_inside", f"symbolic link to {inside}: parsed under that path")
    elif not follow_outside:
        e.mark(
            "skipped",
            "link_outside",
            "symbolic link to a file outside the documents folder "
            "(parse.follow_outside_links is false)",
        )
    elif not os.path.isfile(target):
        e.mark("skipped", "not_regular", "symbolic link to something that is not a regular file")
    else:
        return False
    return True


def list_files(
    folders: list[Path], exclude: list[str], max_bytes: int, follow_outside_links: bool = False
) -> list[FileEntry]:
    """Every regular file and symbolic link below the folders (sorted by relative path), each with
    its format and, when it will not be converted, its status: skipped (excluded, a link,
    unsupported, oversized) or failed (a broken link, empty, content that does not match the
    extension). A path found in two folders is an error (ids would collide). A name that is not
    UTF-8 is read with its undecodable bytes replaced by U+FFFD (counted, warned about)."""
    entries: dict[str, FileEntry] = {}
    for folder in folders:
        if not folder.is_dir():
            raise DataValidationError(f"documents folder not found: {folder}")
        real_root = os.path.realpath(folder)
        for f in sorted(folder.rglob("*")):
            # rglob does not descend into linked folders, but lists every link itself
            link = f.is_symlink()
            if not link and not f.is_file():
                continue
            rel, replaced = replace_surrogates(f.relative_to(folder).as_posix())
            if replaced:
                print(
                    f"ragrig: warning: {replace_surrogates(str(folder))[0]}/{rel}: file name is "
                    f"not UTF-8: {replaced} byte(s) replaced by U+FFFD",
                    file=sys.stderr,
                )
            if rel in entries:
                raise DataValidationError(
                    f"{rel} is in two documents folders ({entries[rel].abspath} and {f}): "
                    "paths relative to their folder must be unique"
                    if replaced == 0 and entries[rel].name_replaced == 0
                    else f"two file names read as {rel!r} once their bytes that are not UTF-8 "
                    "are replaced by U+FFFD: rename one"
                )
            suffix = replace_surrogates(f.suffix)[0]
            e = FileEntry(rel, f, EXTENSIONS.get(suffix.lower(), ""), name_replaced=replaced)
            entries[rel] = e
            if any(fnmatch.fnmatch(rel, pat) for pat in exclude):
                e.mark("skipped", "excluded", "excluded by parse.exclude")
                continue
            if link and _link(f, real_root, follow_outside_links, e):
                continue
            nbytes = f.stat().st_size
            if not e.format:
                e.mark("skipped", "unsupported", f"unsupported extension {suffix or '(none)'!r}")
            elif nbytes > max_bytes:
                e.mark("skipped", "oversized", f"oversized: {nbytes} bytes > parse.max_bytes")
            elif nbytes == 0:
                e.mark("failed", "empty", "empty file (0 bytes)")
            else:
                try:
                    what = content_mismatch(f, e.format)
                except OSError as exc:
                    e.mark("failed", "unreadable", f"cannot be read: {exc.strerror}")
                    continue
                if what:
                    e.mark(
                        "failed",
                        "content_mismatch",
                        f"content does not match its extension {suffix}: {what}",
                    )
    return [entries[k] for k in sorted(entries)]


# --- conversion in worker processes ---------------------------------------------------------------


class _Worker:
    def __init__(self, ctx: Any):
        from ragrig.parse import docling_worker

        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=docling_worker.serve, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.started = time.monotonic()
        self.ready = False
        self.task: int | None = None
        self.deadline = 0.0

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(10)
        self.conn.close()

    def stop(self) -> None:
        try:
            if self.proc.is_alive() and self.ready:
                self.conn.send(None)
                self.proc.join(5)
        except (OSError, EOFError):
            pass
        self.kill()


def _context() -> Any:
    """A forkserver that has imported docling once: a new worker (also one replacing a killed
    one) starts in well under a second instead of re-importing docling and torch."""
    import multiprocessing as mp

    import ragrig

    # Python 3.11's forkserver ignores the parent's sys.path: put the ragrig being run (a
    # checkout's src/, as stages/_bootstrap.py does) first on the path it starts with
    src = str(Path(ragrig.__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH", "")
    if path.split(os.pathsep)[0] != src:
        os.environ["PYTHONPATH"] = src + (os.pathsep + path if path else "")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["ragrig.parse.docling_worker"])
    return ctx


def take_result(e: FileEntry, result: dict[str, Any]) -> None:
    """A worker's result into its entry; the reason with its lone surrogates replaced, as a
    converter's message may quote the file's name, whose bytes need not be UTF-8."""
    e.status, e.result, e.cause = result["status"], result, result.get("cause", "")
    e.reason = replace_surrogates(result["reason"])[0]


def convert_all(entries: list[FileEntry], workers: int, timeout_s: float, done: Any = None) -> None:
    """Convert the entries without a status, `workers` at a time; fill status/reason/seconds and
    the worker's result in place. `done()` is called once per file finished."""
    from multiprocessing.connection import wait

    todo = deque(i for i, e in enumerate(entries) if not e.status)
    if not todo:
        return
    ctx = _context()
    pool = [_Worker(ctx) for _ in range(min(workers, len(todo)))]
    try:
        while todo or any(w.task is not None for w in pool):
            now = time.monotonic()
            for w in pool:
                if w.ready and w.task is None and todo:
                    w.task = todo.popleft()
                    e = entries[w.task]
                    w.conn.send((w.task, str(e.abspath), e.format))
                    w.deadline = time.monotonic() + timeout_s
            deadlines = [w.deadline for w in pool if w.task is not None]
            deadlines += [w.started + WORKER_START_S for w in pool if not w.ready]
            wait_s = max(0.0, min(deadlines) - now) if deadlines else None
            for conn in wait([w.conn for w in pool], timeout=wait_s):
                w = next(w for w in pool if w.conn is conn)
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    w.proc.join(5)  # the pipe closed: the process has ended, or is ending
                    code = w.proc.exitcode
                    if not w.ready:
                        raise RagrigError(
                            "parse: a docling worker exited while starting "
                            f"(exit code {w.proc.exitcode}; its error is printed above)"
                        ) from None
                    if w.task is not None:
                        e = entries[w.task]
                        e.mark(
                            "failed", "worker_died", f"converter process died (exit code {code})"
                        )
                        e.seconds = timeout_s - max(0.0, w.deadline - time.monotonic())
                        if done:
                            done()
                    w.kill()
                    pool[pool.index(w)] = _Worker(ctx)
                    continue
                if msg[0] == "ready":
                    w.ready = True
                else:
                    _, index, result = msg
                    e = entries[index]
                    e.seconds = timeout_s - max(0.0, w.deadline - time.monotonic())
                    take_result(e, result)
                    w.task = None
                    if done:
                        done()
            now = time.monotonic()
            for i, w in enumerate(pool):
                if w.task is not None and now >= w.deadline:
                    e = entries[w.task]
                    e.mark(
                        "timed_out",
                        "timeout",
                        f"conversion exceeded parse.timeout_s={timeout_s:g}s",
                    )
                    e.seconds = timeout_s
                    w.kill()  # the conversion stops with its process
                    pool[i] = _Worker(ctx)
                    if done:
                        done()
                elif not w.ready and now >= w.started + WORKER_START_S:
                    raise RagrigError(
                        f"parse: a docling worker did not start within {WORKER_START_S:g}s"
                    )
    finally:
        for w in pool:
            w.stop()


# --- rows ---------------------------------------------------------------------------------------


def build_rows(
    e: FileEntry, source: str, unit: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The documents rows and element rows of one converted file; sets e.file_id and e.chars.

    A row's content is its elements' texts joined by a blank line; each element's [start, end)
    is its span in that content. With unit=section a row is a run of elements under the same
    section path (a new heading starts a new row)."""
    elements = e.result["elements"]
    text = JOIN.join(el["text"] for el in elements)
    e.file_id = file_id_of(e.path, text)
    e.chars = len(text)
    title = e.result.get("title") or Path(e.path).stem
    groups: list[list[dict[str, Any]]] = []
    for el in elements:
        if not groups or (
            unit == "section" and (el["heading"] or el["section"] != groups[-1][-1]["section"])
        ):
            groups.append([])
        groups[-1].append(el)
    docs, elems = [], []
    for n, group in enumerate(groups):
        doc_id = e.file_id if unit == "file" else f"{e.file_id}/s{n:03d}"
        section = "" if unit == "file" else group[0]["section"]
        pos, parts = 0, []
        for k, el in enumerate(group):
            start = pos
            end = start + len(el["text"])
            elems.append(
                {
                    "doc_id": doc_id,
                    "n": k,
                    "kind": el["kind"],
                    "text": el["text"],
                    "page": el["page"],
                    "section": el["section"],
                    "start": start,
                    "end": end,
                    "level": el["level"],
                    "self_ref": el["self_ref"],
                }
            )
            parts.append(el["text"])
            pos = end + len(JOIN)
        content = JOIN.join(parts)
        pages = [el["page"] for el in group if el["page"] > 0]
        docs.append(
            {
                "doc_id": doc_id,
                "title": f"{title}{SECTION_SEP}{section}" if section else title,
                "text": content,
                "content": content,
                "source": source,
                "content_hash": content_hash(content),
                "file_id": e.file_id,
                "path": e.path,
                "format": e.format,
                "section": section,
                "page_start": min(pages) if pages else 0,
            }
        )
    return docs, elems


# --- the golden queries and qrels of a document dataset -----------------------------------------


@dataclass(frozen=True)
class GoldTarget:
    """What a qrels line can name: the documents rows of each parsed file, with their section,
    and the files that are in the folder but were not parsed (their status)."""

    sections: dict[str, list[tuple[str, str]]]  # path -> [(doc_id, section)] of parsed files
    not_parsed: dict[str, str]  # path -> status of files listed but not parsed


def map_gold(path: str, section: str, target: GoldTarget, where: str, unit: str) -> list[str]:
    """The doc_ids a (path, section) judgment covers: with unit=file the file's id; with
    unit=section every row whose section is `section` or below it ("" = the whole file).
    An unknown file or section raises naming `where` (file:line); a file listed but not
    parsed maps to one placeholder id `unparsed:<path>` (gold that cannot be retrieved)."""
    if path not in target.sections:
        if path in target.not_parsed:
            return [f"unparsed:{path}"]
        known = sorted([*target.sections, *target.not_parsed])
        raise DataValidationError(
            f"{where}: unknown file {path!r}: not in the documents folder(s)"
            f" (has {len(known)} file(s), e.g. {known[:5]})"
        )
    rows = target.sections[path]
    if unit == "file" or not section:
        return sorted({d for d, _ in rows})
    hit = [d for d, s in rows if s == section or s.startswith(section + SECTION_SEP)]
    if not hit:
        sections = sorted({s for _, s in rows if s})
        raise DataValidationError(
            f"{where}: file {path!r} has no section {section!r}"
            f" (its {counted(sections, 'section', form=repr)})"
        )
    return hit


def load_gold_qrels(qrels_path: Path, target: GoldTarget, unit: str) -> dict[str, dict[str, int]]:
    """qrels.tsv of a document dataset: `query-id <TAB> path <TAB> section <TAB> relevance`,
    with a header line; a qid's judgment on several rows of one section keeps the highest grade."""
    from ragrig.core.io import iter_lines

    qrels: dict[str, dict[str, int]] = {}
    first = True
    for lineno, line in iter_lines(qrels_path):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        row = line.split("\t")
        if first:
            first = False
            if row[0].strip().lower() in {"query-id", "query_id", "qid"}:
                continue
        where = f"{qrels_path}:{lineno}"
        if len(row) != 4:
            raise DataValidationError(
                f"{where}: expected 4 tab-separated fields (query-id, path, section, "
                f"relevance), got {len(row)}"
            )
        qid, path, section, score = (c.strip() for c in row)
        if not qid or not path:
            raise DataValidationError(f"{where}: empty query id or path")
        rel = strict_int(score, where, "relevance", signed=True)
        for doc_id in map_gold(path, section, target, where, unit):
            judged = qrels.setdefault(qid, {})
            judged[doc_id] = max(rel, judged.get(doc_id, rel))
    if not qrels:
        raise DataValidationError(f"{qrels_path}: no judgments")
    return qrels


def load_golden(folder: Path, target: GoldTarget, unit: str) -> Any:
    """queries.jsonl + qrels.tsv as a BeirDataset (no corpus): the queries judged in qrels,
    the others counted as unjudged; a qrels query id not in queries.jsonl raises."""
    from ragrig.dataset.beir import BeirDataset, Replaced, load_queries, load_query_metadata

    qpath, rpath = folder / "queries.jsonl", folder / "qrels.tsv"
    replaced = Replaced()
    queries = load_queries(qpath, replaced)
    metadata, nested = load_query_metadata(qpath)
    qrels = load_gold_qrels(rpath, target, unit)
    unknown = sorted(set(qrels) - set(queries))
    if unknown:
        ids = counted(unknown, "query id", form=repr)
        raise DataValidationError(f"{rpath}: {ids} not in {qpath}")
    return BeirDataset(
        corpus={},
        queries={q: t for q, t in queries.items() if q in qrels},
        qrels=qrels,
        corpus_path=folder,
        unjudged=tuple(sorted(set(queries) - set(qrels))),
        query_metadata={q: m for q, m in metadata.items() if q in qrels},
        nested_metadata_fields=nested,
        surrogates_replaced={"queries": replaced.count},
    )


# --- the parser ---------------------------------------------------------------------------------


def _empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object") for c in columns})


def parse_report(entries: list[FileEntry]) -> dict[str, Any]:
    files = [e.report() for e in entries]
    by_format: dict[str, dict[str, Any]] = {}
    for f in files:
        b = by_format.setdefault(
            f["format"],
            {"files": 0, "pages": 0, "chars": 0, "seconds": 0.0, **dict.fromkeys(STATUSES, 0)},
        )
        b["files"] += 1
        b[f["status"]] += 1
        if f["status"] == "parsed":
            b["pages"] += f["pages"]
            b["chars"] += f["chars"]
            b["seconds"] = round(b["seconds"] + f["seconds"], 3)
    counts = Counter(f["status"] for f in files)
    return {
        "files": files,
        "counts": {s: counts.get(s, 0) for s in STATUSES},
        "by_format": dict(sorted(by_format.items())),
    }


def not_parsed(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per status other than parsed: how many files, how many per cause, and the first
    EXAMPLES of them (path, reason) - what the manifest, console and scorecard show."""
    out: dict[str, dict[str, Any]] = {}
    for status in STATUSES[1:]:
        files = [f for f in report["files"] if f["status"] == status]
        out[status] = {
            "count": len(files),
            "causes": dict(sorted(Counter(f["cause"] or "other" for f in files).items())),
            "examples": [{"path": f["path"], "reason": f["reason"]} for f in files[:EXAMPLES]],
        }
    return out


def check_failures(entries: list[FileEntry], max_share: float) -> None:
    """Raise when (failed + timed_out) / files > max_share, naming each such file."""
    bad = [e for e in entries if e.status in ("failed", "timed_out")]
    if entries and len(bad) / len(entries) > max_share:
        named = "; ".join(f"{e.path}: {e.status} ({e.reason})" for e in bad[:20])
        more = f"; and {len(bad) - 20} more" if len(bad) > 20 else ""
        raise DataValidationError(
            f"parse: {len(bad)} of {len(entries)} file(s) failed or timed out, more than "
            f"parse.max_failure_share={max_share:g}: {named}{more}"
        )


def _replace_surrogates(e: FileEntry) -> None:
    """Replace the lone surrogates of a converted file's result in place: its elements' texts
    (counted in e.text_replaced and warned about), and the title, sections and DoclingDocument
    JSON that repeat them (or the file name, counted apart)."""
    res = e.result
    for el in res["elements"]:
        el["text"], n = replace_surrogates(el["text"])
        e.text_replaced += n
        el["section"], _ = replace_surrogates(el["section"])
    res["title"], _ = replace_surrogates_in(res.get("title"))
    res["json"], _ = replace_surrogates_in(res.get("json"))
    if e.text_replaced:
        shown = replace_surrogates(str(e.abspath))[0]
        print(surrogate_warning(shown, e.text_replaced), file=sys.stderr)


class DoclingParser:
    def __init__(
        self,
        unit: str = "section",
        workers: int = 2,
        timeout_s: float = 120.0,
        max_bytes: int = 100_000_000,
        max_failure_share: float = 0.1,
        exclude: tuple[str, ...] = (),
        follow_outside_links: bool = False,
    ):
        self.unit = unit
        self.workers = workers
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self.max_failure_share = max_failure_share
        self.exclude = list(exclude)
        self.follow_outside_links = follow_outside_links

    @classmethod
    def from_config(cls, cfg: Any) -> DoclingParser:
        return cls(
            cfg.unit,
            cfg.workers,
            cfg.timeout_s,
            cfg.max_bytes,
            cfg.max_failure_share,
            tuple(cfg.exclude),
            cfg.follow_outside_links,
        )

    def convert(self, folders: list[Path]) -> list[FileEntry]:
        """List and convert the files; statuses filled in, PDFs without text marked."""
        from ragrig.core.progress import bar

        entries = list_files(folders, self.exclude, self.max_bytes, self.follow_outside_links)
        with bar("parse", len(entries), "files") as b:
            b.update(sum(1 for e in entries if e.status))
            convert_all(entries, self.workers, self.timeout_s, done=b.update)
        for e in entries:
            if e.status == "parsed":
                _replace_surrogates(e)
                e.pages = int(e.result.get("pages", 0))
                if not e.result["elements"] and e.format == "pdf" and e.pages:
                    e.mark(
                        "skipped", "needs_ocr", "needs OCR: no text layer (no OCR model offline)"
                    )
                elif not e.result["elements"]:
                    e.mark("failed", "no_text", "no text extracted")
        return entries

    def parse(self, dataset: Any) -> Parsed:
        folders = [Path(d) for d in (dataset.documents or [dataset.root])]
        return self.assemble(self.convert(folders), dataset, folders)

    def assemble(self, entries: list[FileEntry], dataset: Any, folders: list[Path]) -> Parsed:
        """The tables of converted files (after the failure-share check) and the golden set."""
        from ragrig.parse.beir import parse_stats, qrels_table, queries_table

        check_failures(entries, self.max_failure_share)
        parsed = [e for e in entries if e.status == "parsed"]
        if not parsed:
            report = parse_report(entries)
            shown = "; ".join(f"{e.path}: {e.reason}" for e in entries[:3])
            more = f"; and {len(entries) - 3} more" if len(entries) > 3 else ""
            raise DataValidationError(
                f"parse: no document parsed in {', '.join(map(str, folders))} ({len(entries)} "
                f"file(s): {files_line(report['counts'], not_parsed(report))})"
                + (f": {shown}{more}" if entries else "")
            )
        source = f"docling:{dataset.name}"
        doc_rows, elem_rows, docling_json = [], [], {}
        for e in parsed:
            docs, elems = build_rows(e, source, self.unit)
            doc_rows += docs
            elem_rows += elems
            docling_json[e.file_id] = e.result["json"]
        documents = pd.DataFrame(doc_rows, columns=DOC_COLUMNS)
        elements = pd.DataFrame(elem_rows, columns=ELEMENT_COLUMNS)
        target = GoldTarget(
            sections={
                p: list(zip(g["doc_id"], g["section"], strict=True))
                for p, g in documents.groupby("path", sort=True)
            },
            not_parsed={e.path: e.status for e in entries if e.status != "parsed"},
        )
        report = parse_report(entries)
        stats: dict[str, Any] = {
            "parser": "docling",
            "unit": self.unit,
            "files": report["counts"],
            "not_parsed": not_parsed(report),
        }
        replaced = {
            "documents": sum(e.text_replaced for e in parsed),
            "file_names": sum(e.name_replaced for e in entries),
        }
        if dataset.golden:
            gold = load_golden(Path(dataset.golden), target, self.unit)
            queries, qrels = queries_table(gold, None), qrels_table(gold)
            counts = parse_stats(gold, None, split=dataset.split)
            stats |= {k: v for k, v in counts.items() if k not in ("empty_text", "split")}
            replaced |= counts["surrogates_replaced"]
            stats["judgments_on_unparsed_files"] = int(
                qrels["doc_id"].str.startswith("unparsed:").sum()
            )
        else:
            queries = _empty(["qid", "text", "claim_label", "evidence", "n_gold", "n_words"])
            queries = queries.astype({"n_gold": "int64", "n_words": "int64"})
            qrels = _empty(["qid", "doc_id", "relevance"]).astype({"relevance": "int64"})
        stats["surrogates_replaced"] = replaced
        return Parsed(
            documents, queries, qrels, stats, elements=elements, docling=docling_json, report=report
        )


def files_line(counts: dict[str, int], causes: dict[str, dict[str, Any]]) -> str:
    """ "3 parsed, 2 failed (content_mismatch 1, empty 1), 0 skipped, 0 timed out"."""
    parts = []
    for status in STATUSES:
        n = counts.get(status, 0)
        by = causes.get(status, {}).get("causes", {})
        detail = f" ({', '.join(f'{k} {v}' for k, v in by.items())})" if n and by else ""
        parts.append(f"{n} {status.replace('_', ' ')}{detail}")
    return ", ".join(parts)


def stats_lines(stats: dict[str, Any], report: dict[str, Any]) -> list[str]:
    """Console lines: the per-status file counts and each file not parsed, with its reason."""
    lines = [
        f"parse: files: {files_line(report['counts'], not_parsed(report))} (unit={stats['unit']})"
    ]
    others = [f for f in report["files"] if f["status"] != "parsed"]
    for f in others[:SHOWN]:
        lines.append(f"parse:   {f['status']}: {f['path']}: {f['reason']}")
    if len(others) > SHOWN:
        lines.append(f"parse:   and {len(others) - SHOWN} more (parse_report.json)")
    if "queries_scored" in stats:
        lines.append(
            f"parse: queries: {stats['queries_scored']} scored, {stats['queries_unjudged']} in "
            "queries.jsonl with no judgment in qrels.tsv"
            + (
                f"; {stats['judgments_on_unparsed_files']} judgment(s) on files not parsed "
                "(gold that cannot be retrieved)"
                if stats.get("judgments_on_unparsed_files")
                else ""
            )
        )
    else:
        lines.append("parse: no golden queries (dataset.golden is not set)")
    replaced = stats.get("surrogates_replaced", {})
    if any(replaced.values()):
        from ragrig.parse.beir import surrogates_line

        lines.append(surrogates_line(replaced))
    return lines
