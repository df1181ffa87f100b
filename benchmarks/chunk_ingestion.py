"""The four chunkers on converted documents: chunks, seconds and the ingestion metrics.

Reads a parse folder with elements (documents.parquet, elements.parquet, docling/<file_id>.json:
the output of parse=docling), or, without --parse-dir, builds one from a reference folder laid
out like ../shared/datasets/docling_test_docs with tests/docling_corpus.py (the tests' stand-in
for parse=docling: docling offline, PDFs through the native pipeline, one documents row per
file). Then runs each chunker configuration through ragrig.chunk and ragrig.chunk.quality, as
the chunk stage does, and prints one row per configuration: chunks, seconds, attribution
fidelity, boundary violations (by kind), coherence (within − across), near-duplicate chunks.

    python benchmarks/chunk_ingestion.py [--root ../shared/datasets/docling_test_docs]
                                         [--parse-dir data/parse] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import _common as C

CONFIGS = [
    {"method": "document"},
    {"method": "recursive", "max_tokens": 256, "overlap": 32},
    {"method": "recursive", "max_tokens": 128, "overlap": 0},
    {"method": "hybrid", "max_tokens": 256, "overlap": 0},
    {"method": "hybrid", "max_tokens": 128, "overlap": 0},
    {"method": "semantic"},
]


def build_parse_dir(root: Path, out: Path) -> None:
    """documents/elements/docling JSON of every source under root/<type>/ (not groundtruth/)."""
    import pandas as pd

    sys.path.insert(0, str(C.PROJECT_ROOT))
    from docling.datamodel.base_models import InputFormat
    from docling.datamodel.pipeline_options import NativePdfPipelineOptions
    from docling.document_converter import DocumentConverter, NativePdfFormatOption
    from tests.docling_corpus import tables_from

    from ragrig.metrics.fidelity import reference_documents

    conv = DocumentConverter(
        format_options={
            InputFormat.PDF: NativePdfFormatOption(pipeline_options=NativePdfPipelineOptions())
        }
    )
    docs, els = [], []
    (out / "docling").mkdir(parents=True, exist_ok=True)
    for kind, src, _ in reference_documents(root):
        doc = conv.convert(str(src)).document
        file_id = f"{kind}-{src.stem}".replace(".", "-")
        d, e = tables_from(doc, file_id, "file")
        d["format"] = kind
        docs.append(d)
        els.append(e)
        (out / "docling" / f"{file_id}.json").write_text(json.dumps(doc.export_to_dict()))
    pd.concat(docs, ignore_index=True).to_parquet(out / "documents.parquet", index=False)
    pd.concat(els, ignore_index=True).to_parquet(out / "elements.parquet", index=False)


def run(parse_dir: Path) -> list[dict]:
    import pandas as pd
    from pydantic import TypeAdapter

    from ragrig.chunk import chunk_documents, make_chunker
    from ragrig.chunk.config import ChunkConfig
    from ragrig.chunk.quality import ingestion_metrics
    from ragrig.chunk.structure import read_elements

    docs = pd.read_parquet(parse_dir / "documents.parquet")
    elements = read_elements(parse_dir / "elements.parquet")
    rows = []
    for raw in CONFIGS:
        cfg = TypeAdapter(ChunkConfig).validate_python({**raw, "coherence_documents": 50})
        started = time.perf_counter()
        chunker = make_chunker(cfg)
        chunks = chunk_documents(
            docs, chunker, False, elements=elements, docling_dir=parse_dir / "docling"
        )
        seconds = time.perf_counter() - started
        metrics_started = time.perf_counter()
        ing = ingestion_metrics(chunks, docs, elements, cfg)
        metrics_seconds = time.perf_counter() - metrics_started
        b, c = ing["boundary_violations"], ing["coherence"]
        rows.append(
            {
                "config": " ".join(f"{k}={v}" for k, v in raw.items()),
                "chunks": len(chunks),
                "seconds": round(seconds, 2),
                "metrics_seconds": round(metrics_seconds, 2),
                "attribution": ing["attribution"]["value"],
                "boundary_violations": b["value"],
                "violating_chunks": b["violating_chunks"],
                "by_kind": b["by_kind"],
                "coherence": c["value"],
                "within": c["within"],
                "across": c["across"],
                "near_duplicate_chunks": ing["near_duplicates"]["chunks"]["items_in_groups"],
                "chunker_stats": dict(getattr(chunker, "stats", {})),
            }
        )
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict]) -> str:
    def f(v):
        return "n/a" if v is None else f"{v:.3f}"

    out = [
        "| chunker | chunks | s | attribution | boundary violations (table/list/numbered) "
        "| coherence (within − across) | near-dup chunks |",
        "|---|---:|---:|---:|---|---|---:|",
    ]
    for r in rows:
        k = r["by_kind"]
        out.append(
            f"| {r['config']} | {r['chunks']} | {r['seconds']:.1f} | {f(r['attribution'])} "
            f"| {f(r['boundary_violations'])} ({r['violating_chunks']}: {k['table']}/{k['list']}/"
            f"{k['numbered_section']}) | {f(r['coherence'])} ({f(r['within'])} − {f(r['across'])}) "
            f"| {r['near_duplicate_chunks']} |"
        )
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--root", type=Path, default=C.PROJECT_ROOT.parent / "shared/datasets/docling_test_docs"
    )
    p.add_argument("--parse-dir", type=Path, default=None)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    C.setup_env()
    parse_dir = args.parse_dir
    if parse_dir is None:
        parse_dir = Path(tempfile.mkdtemp(prefix="ragrig-chunk-ingestion-"))
        started = time.perf_counter()
        build_parse_dir(args.root, parse_dir)
        print(f"converted in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    rows = run(parse_dir)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
