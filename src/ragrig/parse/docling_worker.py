"""The docling side of parse=docling: what runs inside a conversion worker process.

Importing this module imports docling (and torch), so only worker processes import it: the
parent preloads it into its forkserver, and every worker forked from there converts one file at
a time, sending back plain data (elements, page count, the DoclingDocument as JSON). A worker
whose conversion outlives `parse.timeout_s` is killed by the parent (`ragrig.parse.docling`).

No model is used: HTML, Markdown, DOCX, PPTX, XLSX, CSV, AsciiDoc and JATS have rule-based
backends; PDFs go through docling's native pipeline (text lines with page provenance, no layout
model, no OCR).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from docling.datamodel.base_models import ConversionStatus, InputFormat
from docling.datamodel.pipeline_options import NativePdfPipelineOptions
from docling.document_converter import DocumentConverter, NativePdfFormatOption
from docling_core.types.doc import (
    DocItemLabel,
    ListItem,
    SectionHeaderItem,
    TableItem,
    TextItem,
    TitleItem,
)

# ragrig's format name -> docling's input format
INPUT_FORMATS: dict[str, InputFormat] = {
    "pdf": InputFormat.PDF,
    "html": InputFormat.HTML,
    "md": InputFormat.MD,
    "docx": InputFormat.DOCX,
    "pptx": InputFormat.PPTX,
    "xlsx": InputFormat.XLSX,
    "csv": InputFormat.CSV,
    "asciidoc": InputFormat.ASCIIDOC,
    "jats": InputFormat.XML_JATS,
}

# Test hooks (tests/unit/test_parse_docling.py): a file whose name contains the text of
# RAGRIG_PARSE_TEST_HANG makes the worker write its pid into `<file>.pid` and sleep (a conversion
# that hangs); one whose name contains RAGRIG_PARSE_TEST_CRASH makes the worker exit at once with
# code 3 (a converter that crashes its process).
ENV_TEST_HANG = "RAGRIG_PARSE_TEST_HANG"
ENV_TEST_CRASH = "RAGRIG_PARSE_TEST_CRASH"


def make_converter() -> DocumentConverter:
    conv = DocumentConverter(
        allowed_formats=list(INPUT_FORMATS.values()),
        format_options={
            InputFormat.PDF: NativePdfFormatOption(
                # text only: rendered page and picture images would cost time and fill the
                # JSON (megabytes of base64 per document) that nothing downstream reads
                pipeline_options=NativePdfPipelineOptions(
                    generate_page_images=False, generate_picture_images=False
                )
            )
        },
    )
    for fmt in INPUT_FORMATS.values():  # build every pipeline now, not inside a timed file
        conv.initialize_pipeline(fmt)
    return conv


def _label(item: Any) -> str:
    label = item.label
    return label.value if isinstance(label, DocItemLabel) else str(label)


def _item_text(item: Any, doc: Any) -> str:
    if isinstance(item, TableItem):
        return item.export_to_markdown(doc).strip()
    if isinstance(item, ListItem):
        text = item.text.strip()
        marker = (item.marker or "").strip() or "-"
        return f"{marker} {text}" if text else ""
    if isinstance(item, TextItem):
        return item.text.strip()
    return ""


def elements_of(doc: Any) -> tuple[str, list[dict[str, Any]]]:
    """(the document's title, its elements in reading order): each element's kind (docling's
    label), text (tables as Markdown, list items with their marker), 1-based page (0 without
    pages), section path (the enclosing headings, the title excluded), tree depth, self_ref and
    whether it is a heading (a section header, or a title after the first, e.g. a slide's).

    Items with no text (pictures, empty paragraphs) are left out; furniture (page headers and
    footers) is not in the body docling iterates.
    """
    title = ""
    headings: list[tuple[int, str]] = []  # (heading level, text) of the open sections
    out: list[dict[str, Any]] = []
    for item, depth in doc.iterate_items():
        text = _item_text(item, doc)
        if not text:
            continue
        heading = False
        if isinstance(item, TitleItem) and not title:  # the document's title: no section
            title, headings = text, []
        elif isinstance(item, TitleItem | SectionHeaderItem):  # a later title (a slide's) is
            level = int(getattr(item, "level", 1) or 1)  # a top-level heading
            headings = [h for h in headings if h[0] < level] + [(level, text)]
            heading = True
        prov = getattr(item, "prov", None) or []
        out.append(
            {
                "kind": _label(item),
                "text": text,
                "page": int(prov[0].page_no) if prov else 0,
                "section": " > ".join(h for _, h in headings),
                "level": int(depth),
                "self_ref": str(item.self_ref),
                "heading": heading,  # starts a section
            }
        )
    return title, out


def convert(conv: DocumentConverter, path: str, fmt: str) -> dict[str, Any]:
    """Convert one file; never raises: {"status": "parsed" | "failed", "cause", "reason", ...}."""
    hang = os.environ.get(ENV_TEST_HANG)
    if hang and hang in Path(path).name:
        Path(path + ".pid").write_text(str(os.getpid()))
        time.sleep(3600)
    crash = os.environ.get(ENV_TEST_CRASH)
    if crash and crash in Path(path).name:
        os._exit(3)
    try:
        res = conv.convert(path, raises_on_error=False)
    except Exception as exc:  # noqa: BLE001 - any converter error is this file's failure
        reason = _one_line(f"{type(exc).__name__}: {exc}")
        return {"status": "failed", "cause": "conversion", "reason": reason}
    if res.status != ConversionStatus.SUCCESS:  # nothing half-converted counts as parsed
        if fmt == "pdf" and _encrypted(path):
            return {
                "status": "failed",
                "cause": "encrypted",
                "reason": "encrypted PDF (needs a password)",
            }
        errors = "; ".join(_one_line(e.error_message) for e in (res.errors or [])[:3])
        what = "partial conversion" if res.status == ConversionStatus.PARTIAL_SUCCESS else "failed"
        reason = f"{what} ({res.status.value})" + (f": {errors}" if errors else "")
        return {"status": "failed", "cause": "conversion", "reason": reason}
    doc = res.document
    title, elements = elements_of(doc)
    return {
        "status": "parsed",
        "reason": "",
        "title": title,
        "elements": elements,
        "pages": len(doc.pages),
        "json": json.dumps(doc.export_to_dict(), ensure_ascii=False, sort_keys=True),
    }


def _encrypted(path: str) -> bool:
    """Whether PDFium refuses the file for want of a password (docling only says it failed)."""
    import pypdfium2

    try:
        pypdfium2.PdfDocument(path).close()
    except pypdfium2.PdfiumError as exc:
        return "password" in str(exc).lower()
    return False


def _one_line(text: Any) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= 300 else s[:297] + "..."


def serve(conn: Any) -> None:
    """A worker's loop: build the converter, say "ready", then answer (index, path, format)
    requests with ("result", index, result) until it receives None."""
    conv = make_converter()
    conn.send(("ready", os.getpid()))
    while True:
        task = conn.recv()
        if task is None:
            break
        index, path, fmt = task
        cpu = time.process_time()
        result = convert(conv, path, fmt)
        result["cpu_s"] = time.process_time() - cpu  # this process's CPU time on the file
        conn.send(("result", index, result))
    conn.close()
