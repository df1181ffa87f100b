"""The filter measures at scale: the false-exclusion rate and Recall@k (ragrig.metrics.filters)
and the report's whole filter block (ragrig.report.filters.filter_measures) on synthetic
queries, each with `--candidates` retrieved documents.

Synthetic data (seeded): `--docs` documents with a tenant (4 values, the caller's eligible one
three in four) and a locale (5 values); `--queries` queries, each with 1-3 gold documents among
its candidates and a locale filter (its first gold document's locale, a fifth of them another);
the run ranks the query's candidates. Target: the false-exclusion rate of 10,000 queries x 100
candidates in <= 1 s. Medians over `--repeats`.

    python benchmarks/bench_filters.py [--queries 10000] [--candidates 100] [--docs 100000]
"""

from __future__ import annotations

import argparse
import time

import _common as C

TARGET_S = 1.0


def synthetic(n_queries: int, n_candidates: int, n_docs: int, seed: int = 13):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    tenants = np.array(["acme", "globex", "initech", "umbrella"])
    locales = np.array(["en-US", "en-GB", "de-DE", "fr-FR", "es-ES"])
    doc_tenant = tenants[rng.choice(4, n_docs, p=[0.75, 0.1, 0.1, 0.05])]
    doc_locale = locales[rng.integers(0, 5, n_docs)]
    ids = [f"d{i}" for i in range(n_docs)]
    metadata = {
        d: {"tenant": str(t), "locale": str(loc)}
        for d, t, loc in zip(ids, doc_tenant, doc_locale, strict=True)
    }
    gold, filters, rows = {}, {}, []
    for q in range(n_queries):
        qid = f"q{q}"
        cand = rng.choice(n_docs, n_candidates, replace=False)
        g = cand[: rng.integers(1, 4)]
        gold[qid] = [ids[i] for i in g]
        own = str(doc_locale[g[0]])
        filters[qid] = {"locale": own if rng.random() >= 0.2 else str(locales[rng.integers(0, 5)])}
        order = rng.permutation(n_candidates)
        rows.append((qid, [ids[cand[i]] for i in order]))
    rankings = dict(rows)
    run = pd.DataFrame(
        [
            {"qid": qid, "doc_id": d, "rank": r, "score": float(-r)}
            for qid, docs in rows
            for r, d in enumerate(docs, start=1)
        ]
    )
    qrels = pd.DataFrame(
        [{"qid": q, "doc_id": d, "relevance": 1} for q, docs in gold.items() for d in docs]
    )
    return metadata, gold, filters, rankings, run, qrels


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--queries", type=int, default=10_000)
    p.add_argument("--candidates", type=int, default=100)
    p.add_argument("--docs", type=int, default=100_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", type=C.Path, default=None)
    p.add_argument("--dataset-root", type=C.Path, default=None, help="unused (synthetic data)")
    p.add_argument("--params", type=C.Path, default=None, help="unused (report defaults)")
    args = p.parse_args(argv)
    C.setup_env()
    from ragrig.core.config import validate_section
    from ragrig.core.predicates import passing
    from ragrig.metrics.filters import false_exclusion, recall_at_k
    from ragrig.report.filters import FilterInputs, filter_measures

    t0 = time.perf_counter()
    metadata, gold, filters, rankings, run, qrels = synthetic(
        args.queries, args.candidates, args.docs
    )
    build_s = time.perf_counter() - t0
    eligibility = {"tenant": "acme"}
    times: dict[str, list[float]] = {"false_exclusion": [], "recall_at_k": [], "report": []}
    rule = validate_section("report", {}).filters
    fi = FilterInputs(metadata, filters, filters, eligibility, True, None)
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        exclusion = false_exclusion(gold, filters, metadata, eligibility)
        times["false_exclusion"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        eligible = passing(metadata, eligibility)
        recall = recall_at_k(rankings, gold, eligible, 10)
        times["recall_at_k"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        block = filter_measures(fi, qrels, run, rule, seed=13)[0]
        times["report"].append(time.perf_counter() - t0)
    med = {k: round(C.median(v), 4) for k, v in times.items()}
    rows = [
        ["false-exclusion rate", f"{med['false_exclusion']:.3f}", f"{exclusion.rate:.4f}"],
        ["Recall@10 (eligibility included)", f"{med['recall_at_k']:.3f}", f"{recall:.4f}"],
        ["report filter block", f"{med['report']:.3f}", f"{block['false_exclusion_rate']:.4f}"],
    ]
    C.print_table("filter measures", ["measure", "seconds (median)", "value"], rows)
    met = med["false_exclusion"] <= TARGET_S
    print(
        f"{args.queries} queries x {args.candidates} candidates, {args.docs} documents: "
        f"false-exclusion rate in {med['false_exclusion']:.3f} s (target <= {TARGET_S} s: "
        f"{'met' if met else 'NOT met'})"
    )
    result = {
        **C.header("filters"),
        "config": {
            "queries": args.queries,
            "candidates": args.candidates,
            "docs": args.docs,
            "repeats": args.repeats,
        },
        "build_s": round(build_s, 2),
        "seconds": med,
        "false_exclusion_rate": exclusion.rate,
        "eligible_queries": exclusion.eligible_queries,
        "recall@10": recall,
        "report_rate": block["false_exclusion_rate"],
        "target_s": TARGET_S,
        "target_met": met,
    }
    C.write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
