"""A parse=docling-like output built in tests: documents, elements and docling JSON of a small
HTML or Markdown file converted by docling (no model needed for these formats).

It follows the parse contract: `content` is the elements' texts joined by a blank line (tables
as Markdown), every element's [start, end) indexes `content`, `section` joins the headings
above (and including) an element with " > ", page is 0 (no pages in HTML).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd


def convert(path: Path):
    from docling.document_converter import DocumentConverter

    return DocumentConverter().convert(str(path)).document


def tables_from(doc, file_id: str, unit: str = "file") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(documents, elements) of one DoclingDocument; unit "file" (one row) or "section"."""
    from docling_core.types.doc import SectionHeaderItem, TableItem, TextItem, TitleItem

    rows, heads = [], []  # heads: (level, text)
    for item, _ in doc.iterate_items():
        if isinstance(item, TableItem):
            text = item.export_to_markdown(doc=doc)
        elif isinstance(item, TextItem):
            text = item.text
        else:
            continue
        if not text.strip():
            continue
        level = 0
        if isinstance(item, TitleItem | SectionHeaderItem):
            level = 0 if isinstance(item, TitleItem) else int(item.level)
            heads = [h for h in heads if h[0] < level] + [(level, text)]
        page = item.prov[0].page_no if item.prov else 0
        rows.append(
            {
                "kind": str(item.label.value),
                "text": text,
                "page": page,
                "section": " > ".join(h[1] for h in heads),
                "level": level,
                "self_ref": item.self_ref,
            }
        )
    if unit == "file":
        groups = [(file_id, rows)]
    else:
        groups, seen = [], {}
        for r in rows:
            if r["section"] not in seen:
                seen[r["section"]] = len(groups)
                groups.append((f"{file_id}/s{len(groups):03d}", []))
            groups[seen[r["section"]]][1].append(r)
    docs, els = [], []
    for doc_id, group in groups:
        parts, at = [], 0
        for n, r in enumerate(group):
            els.append({"doc_id": doc_id, "n": n, **r, "start": at, "end": at + len(r["text"])})
            parts.append(r["text"])
            at += len(r["text"]) + 2
        content = "\n\n".join(parts)
        section = group[0]["section"] if unit == "section" else ""
        docs.append(
            {
                "doc_id": doc_id,
                "title": doc.name,
                "text": content,
                "content": content,
                "source": "fixture",
                "content_hash": "",
                "file_id": file_id,
                "path": f"{doc.name}.html",
                "format": "html",
                "section": section,
                "page_start": 0,
            }
        )
    elements = pd.DataFrame(els)[
        ["doc_id", "n", "kind", "text", "page", "section", "start", "end", "level", "self_ref"]
    ]
    return pd.DataFrame(docs), elements


def write_parse_dir(
    doc, out: Path, file_id: str, unit: str = "file"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """documents.parquet, elements.parquet and docling/<file_id>.json under `out`."""
    documents, elements = tables_from(doc, file_id, unit)
    (out / "docling").mkdir(parents=True, exist_ok=True)
    (out / "docling" / f"{file_id}.json").write_text(json.dumps(doc.export_to_dict()))
    documents.to_parquet(out / "documents.parquet", index=False)
    elements.to_parquet(out / "elements.parquet", index=False)
    return documents, elements
