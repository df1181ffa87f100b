"""`ragrig compare`: two runs (parquet, TREC or report folders) against qrels, exact deltas."""

from __future__ import annotations

import json

import pandas as pd

from ragrig.cli.app import main
from ragrig.core.io import write_table
from ragrig.metrics.trec import write_trec_qrels, write_trec_run


def _run(rows: list[tuple[str, str, int]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "qid": [q for q, _, _ in rows],
            "doc_id": [d for _, d, _ in rows],
            "chunk_id": [d for _, d, _ in rows],
            "score": [1.0 / r for _, _, r in rows],
            "rank": [r for _, _, r in rows],
        }
    )


QRELS = pd.DataFrame({"qid": ["q1", "q2"], "doc_id": ["d1", "d2"], "relevance": [1, 1]})
A = _run([("q1", "d9", 1), ("q1", "d1", 2), ("q2", "d2", 1)])
B = _run([("q1", "d1", 1), ("q1", "d9", 2), ("q2", "d2", 1)])


def test_compare_parquet_runs_prints_and_writes_exact_deltas(tmp_path, capsys):
    write_table(A, tmp_path / "a.parquet", "run")
    write_table(B, tmp_path / "b.parquet", "run")
    write_table(QRELS, tmp_path / "qrels.parquet", "qrels")
    code = main(
        [
            "compare",
            str(tmp_path / "a.parquet"),
            str(tmp_path / "b.parquet"),
            "--qrels",
            str(tmp_path / "qrels.parquet"),
            "--seed",
            "13",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "MRR" in out and "+0.2500" in out
    d = json.loads((tmp_path / "out" / "deltas.json").read_text())
    assert d["overall"]["rr"]["delta"] == 0.25 and d["overall"]["p@1"]["delta"] == 0.5


def test_compare_report_folders_reads_trec_and_slices(tmp_path, capsys):
    for name, run in (("ra", A), ("rb", B)):
        folder = tmp_path / name / "run"
        write_trec_run(run, folder / "trec" / "final.run", "t")
        write_trec_qrels(QRELS, folder / "trec" / "qrels.txt")
        pd.DataFrame(
            {"qid": ["q1", "q2"], "measure": "m", "value": 0.0, "kind": ["x", "y"]}
        ).to_parquet(folder / "per_query.parquet")
    code = main(["compare", str(tmp_path / "ra"), str(tmp_path / "rb"), "--seed", "13"])
    assert code == 0
    out = capsys.readouterr().out
    assert "kind=x" in out and "kind=y" in out


def test_compare_refuses_different_query_sets(tmp_path, capsys):
    write_table(A, tmp_path / "a.parquet", "run")
    write_table(B[B["qid"] == "q1"], tmp_path / "b.parquet", "run")
    write_table(QRELS, tmp_path / "qrels.parquet", "qrels")
    code = main(
        ["compare", str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")]
        + ["--qrels", str(tmp_path / "qrels.parquet"), "--seed", "1"]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "1 query id ('q2') only in" in err


def test_compare_report_folders_pairs_the_answers_on_the_queries_both_scored(tmp_path, capsys):
    rows = {
        # A: q1 faithful, q2 not, q3 only in A; B: q1 and q2 faithful, q4 only in B
        "ra": [("q1", 1.0), ("q2", 0.0), ("q3", 1.0)],
        "rb": [("q1", 1.0), ("q2", 1.0), ("q4", 0.0)],
    }
    for name, run in (("ra", A), ("rb", B)):
        folder = tmp_path / name / "run"
        write_trec_run(run, folder / "trec" / "final.run", "t")
        write_trec_qrels(QRELS, folder / "trec" / "qrels.txt")
        pd.DataFrame(
            {
                "qid": [q for q, _ in rows[name]],
                "measure": "faithfulness/judged_faithful",
                "value": [v for _, v in rows[name]],
            }
        ).to_parquet(folder / "per_query.parquet")
    code = main(["compare", str(tmp_path / "ra"), str(tmp_path / "rb"), "--seed", "13",
                 "--resamples", "200", "--out", str(tmp_path / "out")])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert "answers, paired on the queries both runs scored (B - A)" in out
    table = pd.read_csv(tmp_path / "out" / "answer_deltas.csv")
    (row,) = table.to_dict("records")
    assert (row["measure"], row["n"], row["mean_a"], row["mean_b"], row["delta"]) == (
        "faithfulness/judged_faithful", 2, 0.5, 1.0, 0.5)  # fmt: skip
    assert "faithfulness/judged_faithful" in out and "1/1" in out  # unpaired A/B
