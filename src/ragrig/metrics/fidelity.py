"""ragrig ingest-fidelity: CER and WER of docling's conversions against reference Markdown.

Converts every document of a reference folder laid out like `../shared/datasets/docling_test_docs`
(`<type>/<file>` sources, `groundtruth/<file>.md` references; type = pdf, html, docx, jats, ...)
to Markdown and scores it against its reference, per type, with jiwer
(`ragrig.metrics.ingestion.cer_wer`: errors summed over the type's documents / reference
characters or words). Both sides pass through the same `normalise_markdown` first (Markdown
syntax stripped, whitespace collapsed; see there), so only the text is compared, not its markup.

The converter is docling offline: HTML, DOCX, JATS and Markdown with no model; PDF through the
model-free native pipeline (one text item per line, no layout model, no OCR). Another converter
(e.g. parse=docling's) can be scored with `score_folder(root, convert=...)`.

    python -m ragrig ingest-fidelity ../shared/datasets/docling_test_docs [--out f.json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragrig.core.errors import RagrigError


def reference_documents(root: Path) -> list[tuple[str, Path, Path]]:
    """(type, source, reference) for every source with a groundtruth/<file>.md, sorted."""
    truth = root / "groundtruth"
    if not truth.is_dir():
        raise RagrigError(f"{root}: no groundtruth/ folder of reference Markdown")
    out = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and p.name != "groundtruth"):
        for src in sorted(p for p in folder.iterdir() if p.is_file()):
            ref = truth / f"{src.name}.md"
            if ref.is_file():
                out.append((folder.name, src, ref))
    if not out:
        raise RagrigError(f"{root}: no source has a reference in groundtruth/<file>.md")
    return out


def docling_converter() -> Callable[[Path], str]:
    """Path -> Markdown with docling offline (PDF: native pipeline, no layout model)."""
    from docling.datamodel.base_models import InputFormat
    from docling.datamodel.pipeline_options import NativePdfPipelineOptions
    from docling.document_converter import DocumentConverter, NativePdfFormatOption

    conv = DocumentConverter(
        format_options={
            InputFormat.PDF: NativePdfFormatOption(pipeline_options=NativePdfPipelineOptions())
        }
    )

    def convert(path: Path) -> str:
        return conv.convert(str(path)).document.export_to_markdown()

    return convert


def score_folder(root: Path, convert: Callable[[Path], str] | None = None) -> dict[str, Any]:
    """Per-type and overall CER/WER, and one row per document (a failed conversion is
    counted under `failed` with its reason and left out of the scores)."""
    from ragrig.metrics.ingestion import cer_wer, normalise_markdown, text_fidelity

    convert = convert or docling_converter()
    records, rows, failed = [], [], []
    for kind, src, ref in reference_documents(root):
        started = time.perf_counter()
        try:
            hyp = convert(src)
        except Exception as exc:  # noqa: BLE001  (one document's failure is reported, not fatal)
            failed.append(
                {"type": kind, "file": src.name, "reason": f"{type(exc).__name__}: {exc}"}
            )
            continue
        seconds = time.perf_counter() - started
        r = normalise_markdown(ref.read_text(encoding="utf-8"))
        h = normalise_markdown(hyp)
        records.append({"type": kind, "reference": r, "hypothesis": h})
        one = cer_wer([r], [h])
        rows.append(
            {
                "type": kind,
                "file": src.name,
                "cer": one["cer"],
                "wer": one["wer"],
                "ref_chars": one["ref_chars"],
                "hyp_chars": len(h),
                "seconds": round(seconds, 3),
            }
        )
    return {**text_fidelity(records), "documents": rows, "failed": failed}


def format_table(result: dict[str, Any]) -> str:
    def f(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.3f}"

    lines = ["| type | documents | CER | WER | reference chars |", "|---|---|---|---|---|"]
    for kind, v in result["by_type"].items():
        lines.append(
            f"| {kind} | {v['documents']} | {f(v['cer'])} | {f(v['wer'])} | {v['ref_chars']:,} |"
        )
    a = result["all"]
    lines.append(f"| all | {a['documents']} | {f(a['cer'])} | {f(a['wer'])} | {a['ref_chars']:,} |")
    lines.append("")
    lines.append("| file | CER | WER | seconds |")
    lines.append("|---|---|---|---|")
    for r in result["documents"]:
        lines.append(
            f"| {r['type']}/{r['file']} | {f(r['cer'])} | {f(r['wer'])} | {r['seconds']:.2f} |"
        )
    for r in result["failed"]:
        lines.append(f"| {r['type']}/{r['file']} | failed: {r['reason']} | | |")
    return "\n".join(lines)


def cmd_ingest_fidelity(args: argparse.Namespace) -> int:
    result = score_folder(Path(args.root))
    print(format_table(result))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 1 if result["failed"] else 0
