"""`ragrig compare RUN_A RUN_B`: paired per-query deltas of two runs on the same queries.

A run is any of:
- a run table (`.parquet`: data/retrieve/run.parquet, data/rerank/run.parquet, or a copy);
- a TREC run file (any other file: `qid Q0 docid rank score tag`);
- a stage folder holding run.parquet (data/retrieve, data/rerank);
- a report folder (reports/run, or reports/ holding run/): its final run, trec/final.run.

Qrels come from --qrels (a qrels table `.parquet`, or TREC qrels), else from the first report
folder given (trec/qrels.txt), else data/parse/qrels.parquet. Slices come from a report folder's
per_query.parquet (its slice columns) when RUN_A or RUN_B is one, or from --slices (such a
file). The bootstrap and randomisation test are seeded by --seed, else by params.yaml's
runtime.seed. Deltas are B - A.

When both are report folders, the answers are compared too (`answer_deltas`): the scorecard's
three axes and the judge's decision per query (per_query.parquet), paired on the queries both
runs answered and scored, the others counted. Two deployed versions of a system judged through
generate=rag_http (two sweep points) are compared this way: their retrieval is the same, their
answers are not.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from ragrig.core.errors import DataValidationError

PER_QUERY_BASE = ("qid", "measure", "value")


def _report_folder(path: Path) -> Path | None:
    for candidate in (path, path / "run"):
        if (candidate / "trec" / "final.run").exists():
            return candidate
    return None


def read_run(path: Path) -> pd.DataFrame:
    """A run table (qid, doc_id, rank, ...) from any of the accepted forms."""
    from ragrig.core.io import read_table
    from ragrig.metrics.trec import read_trec_run

    path = Path(path)
    if path.is_dir():
        report = _report_folder(path)
        if report is not None:
            return read_trec_run(report / "trec" / "final.run")
        if (path / "run.parquet").exists():
            return read_table(path / "run.parquet", "run")
        raise DataValidationError(
            f"{path}: neither a report folder (trec/final.run) nor a stage folder (run.parquet)"
        )
    if not path.exists():
        raise DataValidationError(f"{path}: no such run file or folder")
    if path.suffix == ".parquet":
        return read_table(path, "run")
    return read_trec_run(path)


def read_qrels(path: Path) -> pd.DataFrame:
    from ragrig.core.io import read_table
    from ragrig.metrics.trec import read_trec_qrels

    path = Path(path)
    if not path.exists():
        raise DataValidationError(f"{path}: no such qrels file")
    return read_table(path, "qrels") if path.suffix == ".parquet" else read_trec_qrels(path)


def _slices(path: Path) -> tuple[pd.DataFrame | None, list[str]]:
    table = pd.read_parquet(path)
    names = [c for c in table.columns if c not in PER_QUERY_BASE]
    if not names:
        return None, []
    return table[["qid", *names]].drop_duplicates("qid"), names


ANSWER_MEASURES = (
    "axis/faithfulness",
    "axis/relevance",
    "axis/correctness",
    "faithfulness/judged_faithful",
)


def answer_deltas(
    per_query_a: pd.DataFrame,
    per_query_b: pd.DataFrame,
    seed: int,
    n_resamples: int,
    measures: tuple[str, ...] = ANSWER_MEASURES,
) -> tuple[pd.DataFrame, dict[str, dict[str, int]]]:
    """Summary rows (metrics.deltas.summarise) of the answer measures, paired on the queries
    with a value in both runs; per measure, how many had one in A only and in B only."""
    from ragrig.metrics.deltas import summarise

    def values(t: pd.DataFrame) -> pd.DataFrame:
        t = t[t["measure"].isin(measures)][["qid", "measure", "value"]]
        return t[t["value"].notna()]

    a, b = values(per_query_a), values(per_query_b)
    both = a.merge(b, on=["qid", "measure"], suffixes=("_a", "_b"), validate="one_to_one")
    both = both.rename(columns={"value_a": "a", "value_b": "b"})
    both["delta"] = both["b"] - both["a"]
    unpaired = {}
    for m in measures:
        qa = set(a.loc[a["measure"] == m, "qid"])
        qb = set(b.loc[b["measure"] == m, "qid"])
        unpaired[m] = {"only_a": len(qa - qb), "only_b": len(qb - qa)}
    return summarise(both, seed, n_resamples=n_resamples), unpaired


def format_answer_deltas(summary: pd.DataFrame, unpaired: dict[str, dict[str, int]]) -> str:
    lines = [
        "answers, paired on the queries both runs scored (B - A)",
        f"{'measure':<30} {'n':>5} {'A':>7} {'B':>7} {'delta':>8} {'interval':>19} {'p':>7}"
        "  unpaired A/B",
    ]
    for r in summary.itertuples(index=False):
        ci = "n/a" if r.ci_low is None else f"[{r.ci_low:+.4f}, {r.ci_high:+.4f}]"
        u = unpaired.get(r.measure, {"only_a": 0, "only_b": 0})
        lines.append(
            f"{r.measure:<30} {r.n:>5} {r.mean_a:>7.4f} {r.mean_b:>7.4f} {r.delta:>+8.4f} "
            f"{ci:>19} {r.p_value:>7.4f}  {u['only_a']}/{u['only_b']}"
        )
    return "\n".join(lines)


def cmd_compare(args: argparse.Namespace) -> int:
    from ragrig.metrics.deltas import compare_runs, format_comparison
    from ragrig.metrics.ir import qrels_from_table, rankings_from_run
    from ragrig.report.paired import write_deltas

    run_a, run_b = read_run(args.run_a), read_run(args.run_b)
    reports = [r for r in (_report_folder(Path(p)) for p in (args.run_a, args.run_b)) if r]
    if args.qrels:
        qrels_path = Path(args.qrels)
    elif reports:
        qrels_path = reports[0] / "trec" / "qrels.txt"
    else:
        qrels_path = Path("data/parse/qrels.parquet")
    slices, names = None, []
    slices_path = Path(args.slices) if args.slices else None
    if slices_path is None:
        slices_path = next(
            (r / "per_query.parquet" for r in reports if (r / "per_query.parquet").exists()), None
        )
    if slices_path is not None:
        slices, names = _slices(slices_path)
    if args.seed is not None:
        seed = args.seed
    else:
        from ragrig.runtime import stage

        seed = stage.read_runtime(Path(args.params), "seed")
    c = compare_runs(
        rankings_from_run(run_a),
        rankings_from_run(run_b),
        qrels_from_table(read_qrels(qrels_path)),
        seed=seed,
        names=(args.name_a or str(args.run_a), args.name_b or str(args.run_b)),
        slices=slices,
        slice_names=names,
        n_resamples=args.resamples,
    )
    print(f"qrels: {qrels_path}; slices: {slices_path if names else 'none'}")
    print(format_comparison(c, slices=not args.overall_only))
    tables = [r / "per_query.parquet" for r in reports]
    answers = None
    if len(tables) == 2 and all(t.exists() for t in tables):
        answers, unpaired = answer_deltas(
            pd.read_parquet(tables[0]), pd.read_parquet(tables[1]), seed, args.resamples
        )
        if len(answers):
            print("")
            print(format_answer_deltas(answers, unpaired))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for p in write_deltas(c, out):
            print(f"wrote {p}")
        if answers is not None and len(answers):
            answers.to_csv(out / "answer_deltas.csv", index=False, float_format="%.6f")
            print(f"wrote {out / 'answer_deltas.csv'}")
    return 0
