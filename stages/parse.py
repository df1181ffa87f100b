"""DVC stage parse: dataset folder -> documents, queries (with slice attributes) and qrels tables."""

from __future__ import annotations

from pathlib import Path

from ragrig import stage


def main() -> None:
    args = stage.parser(__doc__).parse_args()
    from ragrig.config import load_section
    from ragrig.data.beir import load_beir
    from ragrig.data.claims import load_claims
    from ragrig.io import atomic_dir, write_json, write_table
    from ragrig.parse import documents_table, qrels_table, queries_table

    ds = load_section("dataset", args.params)
    cfg = load_section("parse", args.params)
    root = Path(ds.root)
    data = load_beir(root, ds.split)
    claims = load_claims([root / f for f in ds.claims.files]) if ds.claims else None
    docs = documents_table(data, source=f"beir:{ds.name}", title_separator=cfg.title_separator)
    queries = queries_table(data, claims)
    qrels = qrels_table(data)
    with atomic_dir(Path(args.out)) as out:
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
            },
        )
    print(f"parse: {len(docs)} documents, {len(queries)} queries, {len(qrels)} judgments")


if __name__ == "__main__":
    stage.run("parse", main)
