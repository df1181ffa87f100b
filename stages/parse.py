"""DVC stage parse: dataset folder -> documents, queries (with slice attributes) and qrels tables."""

from __future__ import annotations

import _bootstrap  # noqa: F401  (this checkout's src/ first on sys.path)
from ragrig import stage


def main() -> None:
    args = stage.parser(__doc__).parse_args()
    from ragrig.config import load_section
    from ragrig.io import atomic_dir, write_json, write_table
    from ragrig.parse import make_parser, stats_lines

    ds = load_section("dataset", args.params)
    parsed = make_parser(load_section("parse", args.params)).parse(ds)
    docs, queries, qrels = parsed.documents, parsed.queries, parsed.qrels
    with atomic_dir(args.out) as out:
        write_table(docs, out / "documents.parquet", "documents")
        write_table(queries, out / "queries.parquet", "queries")
        write_table(qrels, out / "qrels.parquet", "qrels")
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
    for line in stats_lines(parsed.stats):
        print(line)


if __name__ == "__main__":
    stage.run("parse", main)
