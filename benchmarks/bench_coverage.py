"""The coverage matrix on a real set, checked against a computation by hand.

Intents by rule from the query's length (short < 10 words, medium 10-15, long >= 16), document
types by rule from the gold documents' length (an abstract under 150 words is `short`, else
`long`; the most common among a query's gold documents, ties to the first in sorted order), and
per query a value in {0, 1}: whether BM25 (bm25s, k1 0.9, b 0.4) puts a gold document in its top
10. ragrig.metrics.coverage.matrix gives the counts, empty cells, per-cell means and the queries
each cell needs for a half-width `--half-width` at 95%; the same numbers are then computed here
without it (pandas crosstab, the Agresti-Coull-adjusted sd written out, z = 1.959964) and
compared. Timed too.

    python benchmarks/bench_coverage.py [--dataset-root ../shared/datasets/scifact] [--half-width 0.1]
"""

from __future__ import annotations

import argparse
import math
import time

import _common as C

Z = 1.959964


def length_intent(n_words: int) -> str:
    return "short" if n_words < 10 else ("medium" if n_words < 16 else "long")


def by_hand(intents: dict, types: dict, values: dict, h: float) -> dict:
    """Counts, empty cells, means and sizes without ragrig.metrics.coverage."""
    import pandas as pd

    frame = pd.DataFrame({"intent": intents, "type": types})
    counts = pd.crosstab(frame["intent"], frame["type"])
    cells = {}
    for r in counts.index:
        for c in counts.columns:
            qs = [q for q in intents if intents[q] == r and types[q] == c]
            v = [values[q] for q in qs]
            if len(v) >= 2:
                n = len(v) + Z**2
                mean = (sum(v) + Z**2 / 2) / n
                ss = sum((x - mean) ** 2 for x in v) + Z**2 / 2 * (mean**2 + (1 - mean) ** 2)
                sd = math.sqrt(ss / (n - 1))
            else:
                sd = 0.5
            needed = max(2, math.ceil((Z * sd / h) ** 2 - 1e-9))
            cells[(r, c)] = {"queries": len(qs), "mean": (sum(v) / len(v)) if v else None,
                             "needed": needed}  # fmt: skip
    empty = sorted(k for k, x in cells.items() if x["queries"] == 0)
    return {"counts": counts, "cells": cells, "empty": empty}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    C.add_common_args(p)
    p.add_argument("--half-width", type=float, default=0.1)
    args = p.parse_args(argv)
    C.setup_env()
    from ragrig.index.sparse import Bm25sIndex
    from ragrig.metrics.coverage import doc_types, matrix
    from ragrig.training.split import MiningConfig

    ds = C.load_dataset(args.dataset_root, args.params)
    docs = ds.documents
    kinds = {
        str(d): ("short" if len(str(t).split()) < 150 else "long")
        for d, t in zip(docs["doc_id"], docs["text"], strict=True)
    }
    qids = [q for q in ds.query_ids if any(r > 0 for r in ds.qrels.get(q, {}).values())]
    texts = dict(zip(ds.query_ids, ds.query_texts, strict=True))
    intents = {q: length_intent(len(texts[q].split())) for q in qids}
    types = doc_types({q: ds.qrels[q] for q in qids}, kinds)
    index = Bm25sIndex.build(
        [f"{t}. {x}" for t, x in zip(docs["title"], docs["text"], strict=True)], MiningConfig()
    )
    _, rows = index.search([texts[q] for q in qids], 10)
    ids = docs["doc_id"].astype(str).tolist()
    values = {
        q: float(any(ds.qrels[q].get(ids[r], 0) > 0 for r in hits if r >= 0))
        for q, hits in zip(qids, rows, strict=True)
    }
    t0 = time.perf_counter()
    m = matrix(intents, types, values, args.half_width, 0.95)
    seconds = time.perf_counter() - t0
    hand = by_hand(intents, types, values, args.half_width)
    got = {(x["intent"], x["doc_type"]): x for x in m["cells"]}
    agree = {
        "counts": m["counts"].to_dict() == hand["counts"].to_dict(),
        "empty": sorted(m["empty"]) == hand["empty"],
        "means": all(
            (got[k]["mean"] is None and v["mean"] is None)
            or (
                got[k]["mean"] is not None
                and v["mean"] is not None
                and abs(got[k]["mean"] - v["mean"]) < 1e-12
            )
            for k, v in hand["cells"].items()
        ),  # fmt: skip
        "needed": all(got[k]["needed"] == v["needed"] for k, v in hand["cells"].items()),
    }
    rows_out = [
        [x["intent"], x["doc_type"], x["queries"], x["mean"], x["needed"], x["missing"]]
        for x in m["cells"]
    ]
    C.print_table(
        f"coverage of {len(qids)} queries ({args.dataset_root.name}): length intent x gold "
        f"abstract length, value = BM25 hit@10, half-width {args.half_width} at 95%",
        ["intent", "doc type", "queries", "hit@10", "needed", "missing"],
        rows_out,
    )
    print(f"\nempty cells: {m['empty'] or 'none'}; agree with the hand computation: {agree}")
    print(f"matrix computed in {seconds * 1e3:.1f} ms (1000 bootstrap resamples per cell)")
    result = {
        **C.header("coverage"),
        "dataset": str(args.dataset_root),
        "queries": len(qids),
        "half_width": args.half_width,
        "cells": [
            {k: x[k] for k in ("intent", "doc_type", "queries", "mean", "needed", "missing")}
            for x in m["cells"]
        ],
        "empty": [list(k) for k in m["empty"]],
        "agree": agree,
        "seconds": round(seconds, 4),
    }
    C.write_json(args.json, result)
    if not all(agree.values()):
        raise SystemExit(f"the matrix disagrees with the hand computation: {agree}")
    return result


if __name__ == "__main__":
    main()
