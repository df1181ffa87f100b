"""The four chunkers on converted documents: chunks, seconds and the ingestion metrics.

Reads a parse folder with elements (documents.parquet, elements.parquet, docling/<file_id>.json:
the output of parse=docling), or, without --parse-dir, builds one with parse=docling (one
documents row per file) from a folder of documents (default ../shared/datasets/docling_test_docs,
its groundtruth/ Markdown excluded). Then runs each chunker configuration through ragrig.chunk and ragrig.chunk.quality, as
the chunk stage does, and prints one row per configuration: chunks, seconds, attribution
fidelity, boundary violations (by kind), coherence (within − across), near-duplicate chunks.

    python benchmarks/bench_chunk.py [--root ../shared/datasets/docling_test_docs]
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


def build_parse_dir(root: Path, out: Path, workers: int = 2) -> None:
    """documents/elements/docling JSON of every source under `root` (groundtruth/ and
    PROVENANCE.md excluded), one documents row per file, by parse=docling itself."""
    import pandas as pd

    from ragrig.core.schemas import SCHEMAS
    from ragrig.parse.docling import DoclingParser

    parser = DoclingParser(unit="file", workers=workers, exclude=("groundtruth/*", "*.md"))
    entries = parser.convert([root])

    class _NoGolden:  # the chunkers need documents and structure, not queries
        documents = [str(root)]
        golden = None
        name = "bench"
        split = "test"

    parsed = parser.assemble(entries, _NoGolden, [root])
    (out / "docling").mkdir(parents=True, exist_ok=True)
    docs = parsed.documents.copy()
    docs.to_parquet(out / "documents.parquet", index=False)
    elements = parsed.elements
    if elements is None:
        elements = pd.DataFrame({c: [] for c in SCHEMAS["elements"].columns})
    elements.to_parquet(out / "elements.parquet", index=False)
    for file_id, text in (parsed.docling or {}).items():
        (out / "docling" / f"{file_id}.json").write_text(text, encoding="utf-8")


def run(parse_dir: Path, methods: list[str] | None = None) -> list[dict]:
    import pandas as pd
    from pydantic import TypeAdapter

    from ragrig.chunk import chunk_documents, make_chunker
    from ragrig.chunk.config import ChunkConfig
    from ragrig.chunk.quality import ingestion_metrics
    from ragrig.chunk.structure import read_elements

    docs = pd.read_parquet(parse_dir / "documents.parquet")
    elements = read_elements(parse_dir / "elements.parquet")
    rows = []
    for raw in [c for c in CONFIGS if methods is None or c["method"] in methods]:
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


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--dataset-root",
        "--root",
        dest="root",
        type=Path,
        default=C.PROJECT_ROOT.parent / "shared/datasets/docling_test_docs",
        help="folder of documents (default ../shared/datasets/docling_test_docs)",
    )
    p.add_argument("--parse-dir", type=Path, default=None)
    p.add_argument(
        "--methods", nargs="+", default=None, help="only these chunker methods (default: all)"
    )
    p.add_argument("--params", type=Path, default=None, help="unused (chunker settings above)")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    C.setup_env()
    parse_dir = args.parse_dir
    convert_s = None
    with tempfile.TemporaryDirectory(prefix="ragrig-bench-chunk-") as tmp:
        if parse_dir is None:
            parse_dir = Path(tmp)
            started = time.perf_counter()
            build_parse_dir(args.root, parse_dir)
            convert_s = round(time.perf_counter() - started, 2)
            print(f"converted in {convert_s} s", file=sys.stderr, flush=True)
        rows = run(parse_dir, args.methods)
    print(table(rows))
    result = {
        **C.header("chunk", ["docling-core", "jiwer", "datasketch"]),
        "root": str(args.root),
        "convert_s": convert_s,
        "rows": rows,
    }
    C.write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
