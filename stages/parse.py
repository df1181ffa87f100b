"""DVC stage parse: dataset folder -> documents, queries (with slice attributes) and qrels tables."""

from __future__ import annotations

import _bootstrap  # noqa: F401  (this checkout's src/ first on sys.path)
from ragrig.runtime import stage


def main() -> None:
    args = stage.parser(__doc__).parse_args()
    import pandas as pd

    from ragrig.core.config import load_section
    from ragrig.core.io import atomic_dir, atomic_write_text, write_json, write_table
    from ragrig.core.schemas import SCHEMAS
    from ragrig.parse import console_lines, make_parser

    ds = load_section("dataset", args.params)
    parsed = make_parser(load_section("parse", args.params)).parse(ds)
    docs, queries, qrels = parsed.documents, parsed.queries, parsed.qrels
    with atomic_dir(args.out) as out:
        write_table(docs, out / "documents.parquet", "documents")
        write_table(queries, out / "queries.parquet", "queries")
        write_table(qrels, out / "qrels.parquet", "qrels")
        # the document structure (parse=docling); written empty for a BEIR corpus, because the
        # chunk stage depends on both paths whatever the parser
        elements = parsed.elements
        if elements is None:
            elements = pd.DataFrame({c: [] for c in SCHEMAS["elements"].columns})
        write_table(elements, out / "elements.parquet", "elements")
        docling = dict(sorted((parsed.docling or {}).items()))
        for file_id, text in docling.items():
            atomic_write_text(out / "docling" / f"{file_id}.json", text)
        write_json(out / "docling" / "index.json", {"files": list(docling)})
        if parsed.report is not None:
            write_json(out / "parse_report.json", parsed.report)
        write_json(
            out / "manifest.json",
            {
                "dataset": ds.name,
                "split": ds.split,
                "documents": len(docs),
                "queries": len(queries),
                "judgments": len(qrels),
                "claim_labels": queries["claim_label"].value_counts().sort_index().to_dict(),
                **parsed.stats,
            },
        )
    print(f"parse: {len(docs)} documents, {len(queries)} queries, {len(qrels)} judgments")
    for line in console_lines(parsed):
        print(line)


if __name__ == "__main__":
    stage.run("parse", main)
