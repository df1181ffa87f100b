"""DVC stage parse: dataset folder -> documents, queries (with slice attributes) and qrels tables."""

from __future__ import annotations

import _bootstrap  # noqa: F401  (this checkout's src/ first on sys.path)
from ragrig import stage


def main() -> None:
    args = stage.parser(__doc__).parse_args()
    from ragrig.config import load_section
    from ragrig.io import atomic_dir, atomic_write_text, write_json, write_table
    from ragrig.parse import console_lines, make_parser

    ds = load_section("dataset", args.params)
    parsed = make_parser(load_section("parse", args.params)).parse(ds)
    docs, queries, qrels = parsed.documents, parsed.queries, parsed.qrels
    with atomic_dir(args.out) as out:
        write_table(docs, out / "documents.parquet", "documents")
        write_table(queries, out / "queries.parquet", "queries")
        write_table(qrels, out / "qrels.parquet", "qrels")
        if parsed.elements is not None:  # a document-converting parser (parse=docling)
            write_table(parsed.elements, out / "elements.parquet", "elements")
            for file_id, text in sorted(parsed.docling.items()):
                atomic_write_text(out / "docling" / f"{file_id}.json", text)
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
