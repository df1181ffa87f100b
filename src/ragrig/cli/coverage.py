"""`ragrig coverage`: the coverage matrix of a run's queries (intent x document type), its empty
cells, and per cell the interval an axis has and the queries a decision's half-width needs
(ragrig.metrics.coverage)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def cmd_coverage(args: argparse.Namespace) -> int:
    from ragrig.core.errors import DataValidationError, RagrigError
    from ragrig.core.io import atomic_write_text, read_table
    from ragrig.metrics import coverage as cov

    data = Path(args.data)
    try:
        cov.check_half_width(args.half_width)
        need = [data / "parse" / f"{n}.parquet" for n in ("queries", "qrels", "documents")]
        missing = [str(p) for p in need if not p.is_file()]
        if missing:
            raise DataValidationError(
                f"not found: {', '.join(missing)} (run dvc repro first, or point --data at a "
                "run's stage outputs)"
            )
        queries = read_table(data / "parse" / "queries.parquet", "queries")
        qrels = read_table(data / "parse" / "qrels.parquet", "qrels")
        documents = read_table(data / "parse" / "documents.parquet", "documents")
        intents = cov.intents_from(queries, args.intent)
        types = cov.types_from(qrels, documents, args.doc_type, list(intents))
        values = None
        per_query = Path(args.per_query)
        if per_query.is_file():
            import pandas as pd

            values = cov.values_from(pd.read_parquet(per_query), f"axis/{args.axis}")
        m = cov.matrix(intents, types, values, args.half_width, args.level)
    except RagrigError as exc:
        print(f"ragrig coverage: error: {exc}", file=sys.stderr)
        return 2
    print(
        f"ragrig coverage: {len(intents)} queries, intent {args.intent!r}, document type "
        f"{args.doc_type or 'none given'}, axis {args.axis} "
        f"({'from ' + str(per_query) if values is not None else 'no run: sizes from the prior'})"
    )
    for line in cov.format_matrix(m):
        print(line)
    record = {k: v for k, v in m.items() if k != "counts"}
    record["counts"] = m["counts"].to_dict(orient="index")
    if args.traffic:
        try:
            shares, lines, left_out = cov.traffic_shares(args.traffic, args.traffic_key)
        except RagrigError as exc:
            print(f"ragrig coverage: error: {exc}", file=sys.stderr)
            return 2
        t = cov.traffic_coverage(shares, intents)
        print("")
        for line in cov.format_traffic(t, lines, left_out, args.traffic_key):
            print(line)
        record["traffic"] = {"file": str(args.traffic), "key": args.traffic_key, "lines": lines,
                             "left_out": left_out, **t}  # fmt: skip
    out = Path(args.out)
    atomic_write_text(out, json.dumps(record, indent=2) + "\n")
    print(f"ragrig coverage: wrote {out}")
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "coverage",
        help="the coverage matrix of the queries (intent x document type), its empty cells, and "
        "the queries each cell needs for a decision's interval half-width",
    )
    p.add_argument("--intent", required=True, help="the queries-table column holding the intent")
    p.add_argument("--doc-type", default=None, help="the documents-table column of the type")
    p.add_argument("--axis", default="faithfulness", help="faithfulness | relevance | correctness")
    p.add_argument("--half-width", type=float, default=0.05, help="the decision's tolerance")
    p.add_argument("--level", type=float, default=0.95)
    p.add_argument("--data", default="data", help="the run's stage outputs (parse)")
    p.add_argument("--per-query", default="reports/run/per_query.parquet")
    p.add_argument(
        "--traffic",
        default=None,
        help="a log of interactions (ragrig traces' format): its share per intent is the target",
    )
    p.add_argument("--traffic-key", default="intent", help="the log's slice key of the intent")
    p.add_argument("--out", default="reports/coverage.json")
    p.set_defaults(func=cmd_coverage)
