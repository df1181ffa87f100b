"""`ragrig coverage`: the coverage matrix of a run's queries (intent x document type), its empty
cells, and per cell the interval an axis has and the queries a decision's half-width needs
(ragrig.metrics.coverage)."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any


def traffic_shares(path: Any, key: str) -> tuple[dict[str, float], int, int]:
    """(share of the log's lines per value of slice `key`, lines read, lines left out); a line
    without the key counts as `unknown`."""
    from pathlib import Path

    from ragrig.core.errors import DataValidationError
    from ragrig.traces.read import Problems, interactions

    counts: Counter = Counter()
    problems = Problems()
    for _, x in interactions(Path(path), problems):
        counts[dict(x.slices).get(key, "unknown")] += 1
    total = sum(counts.values())
    if not total:
        raise DataValidationError(
            f"{path}: no interaction read ({problems.total} lines left out): no traffic to cover"
        )
    return {k: n / total for k, n in sorted(counts.items())}, total, problems.total


def classified(queries: Any, args: argparse.Namespace) -> dict[str, str]:
    """The queries' intents by the nearest prototype of a labelled sample, after its held-out
    figures are printed (ragrig.metrics.intents)."""
    from ragrig.core.config import load_section
    from ragrig.embed import make_embedder
    from ragrig.metrics import intents as it

    texts, labels = it.read_sample(args.intent_sample)
    embedder = make_embedder(load_section("embed", Path(args.params)), role="query")
    got = it.train_and_measure(texts, labels, embedder.encode, args.holdout)
    h = got["held_out"]
    print(
        f"intent classifier: nearest prototype of {len(texts)} labelled texts, {len(got['intents'])} "
        f"intents; held out {h['n']} (trained on {got['train']}): macro precision "
        f"{h['macro']['precision']:.3f}, recall {h['macro']['recall']:.3f}, F1 {h['macro']['f1']:.3f}"
        + (f"; {sum(got['unseen'].values())} held-out texts of intents not in training: "
           f"{', '.join(sorted(got['unseen']))}" if got["unseen"] else "")
    )  # fmt: skip
    for name, f in h["per_intent"].items():
        print(f"  {name:<20} P {f['precision']:.3f}  R {f['recall']:.3f}  F1 {f['f1']:.3f}  "
              f"(n={f['support']})")  # fmt: skip
    vectors = embedder.encode(queries["text"].astype(str).tolist())
    predicted = it.nearest(vectors, got["intents"], got["prototypes"])
    return {str(q): p for q, p in zip(queries["qid"], predicted, strict=True)}


def cmd_coverage(args: argparse.Namespace) -> int:
    from ragrig.core.errors import DataValidationError, RagrigError
    from ragrig.core.io import atomic_write_text, file_sha256, read_table
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
        if args.intent_sample:
            intents = classified(queries, args)
        elif args.intent:
            intents = cov.intents_from(queries, args.intent)
        else:
            raise DataValidationError("give --intent COLUMN or --intent-sample FILE")
        rows: list[str] = []
        unknown: dict[str, int] = {}
        parents: dict[str, str | None] = {}
        if args.ontology:
            parents = cov.read_ontology(args.ontology)
            intents, rows, unknown = cov.branches(intents, parents, args.branch_depth)
        types = cov.types_from(qrels, documents, args.doc_type, list(intents))
        values = None
        per_query = Path(args.per_query)
        if per_query.is_file():
            import pandas as pd

            values = cov.values_from(pd.read_parquet(per_query), f"axis/{args.axis}")
        m = cov.matrix(intents, types, values, args.half_width, args.level, rows=rows)
    except RagrigError as exc:
        print(f"ragrig coverage: error: {exc}", file=sys.stderr)
        return 2
    print(
        f"ragrig coverage: {len(intents)} queries, intent "
        f"{repr(args.intent) if not args.intent_sample else 'by the classifier'}, document type "
        f"{args.doc_type or 'none given'}, axis {args.axis} "
        f"({'from ' + str(per_query) if values is not None else 'no run: sizes from the prior'})"
    )
    if args.ontology:
        print(
            f"ontology {args.ontology}: rows are its {len(rows)} branches at depth "
            f"{args.branch_depth}"
            + (f"; {sum(unknown.values())} queries of {len(unknown)} intents it does not name "
               f"({', '.join(f'{k} {n}' for k, n in unknown.items())}) in the row "
               f"{cov.UNKNOWN!r}" if unknown else "")
        )  # fmt: skip
    for line in cov.format_matrix(m):
        print(line)
    record = {k: v for k, v in m.items() if k != "counts"}
    if args.ontology:
        record["ontology"] = {"file": str(args.ontology), "depth": args.branch_depth,
                              "branches": rows, "unknown_intents": unknown}  # fmt: skip
    # the gate reads this report only for the query set it was made of
    record["queries_sha256"] = file_sha256(data / "parse" / "queries.parquet")
    record["counts"] = m["counts"].to_dict(orient="index")
    if args.traffic:
        try:
            shares, lines, left_out = traffic_shares(args.traffic, args.traffic_key)
        except RagrigError as exc:
            print(f"ragrig coverage: error: {exc}", file=sys.stderr)
            return 2
        if args.ontology:  # production's intents on the same branches as the set's
            shares = cov.branch_shares(shares, parents, args.branch_depth)
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
    p.add_argument("--intent", default=None, help="the queries-table column holding the intent")
    p.add_argument(
        "--intent-sample",
        default=None,
        help="instead: a labelled sample (JSONL or CSV of text, intent); a nearest-prototype "
        "classifier is measured on its held-out part, then labels the queries",
    )
    p.add_argument("--holdout", type=float, default=0.3, help="with --intent-sample")
    p.add_argument("--params", default="params.yaml", help="with --intent-sample: the embedder")
    p.add_argument(
        "--ontology",
        default=None,
        help="a YAML/JSON mapping of each intent to its parent (null at a root): rows become "
        "its branches, a branch with no query an empty row",
    )
    p.add_argument("--branch-depth", type=int, default=1, help="with --ontology: levels kept")
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
