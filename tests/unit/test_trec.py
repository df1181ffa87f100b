"""TREC run and qrels files: read back by ir_measures (and ranx when installed) with the same
figures as ragrig's metrics; ties written so every reader keeps ragrig's order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ragrig.core.config import validate_section
from ragrig.core.errors import DataValidationError
from ragrig.dataset.beir import load_beir
from ragrig.index.sparse import Bm25sIndex
from ragrig.metrics.ir import mean_measures, qrels_from_table, rankings_from_run
from ragrig.metrics.trec import (
    read_trec_qrels,
    read_trec_run,
    trec_run_lines,
    write_trec_qrels,
    write_trec_run,
)
from ragrig.retrieve import retrieve_all

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_beir"


def _fixture_run() -> tuple[pd.DataFrame, pd.DataFrame]:
    data = load_beir(FIXTURE, "test")
    doc_ids = sorted(data.corpus)
    texts = [f"{data.corpus[d]['title']} {data.corpus[d]['text']}" for d in doc_ids]
    sparse = validate_section(
        "index", {"dense": {"method": "flat"}, "sparse": {"method": "bm25s"}}
    ).sparse
    index = Bm25sIndex.build(texts, sparse)
    cfg = validate_section("retrieve", {"method": "bm25", "depth": 10, "chunk_depth": 20})
    qids = sorted(data.queries)
    run, _, _ = retrieve_all(
        cfg,
        qids,
        [data.queries[q] for q in qids],
        None,
        None,
        index,
        np.array(doc_ids),
        np.array(doc_ids),
        progress=False,
    )
    qrels = pd.DataFrame(
        [(q, d, r) for q, rels in data.qrels.items() for d, r in rels.items()],
        columns=["qid", "doc_id", "relevance"],
    )
    return run, qrels


def _reader_means(run_path: Path, qrels_path: Path) -> dict[str, float]:
    import ir_measures

    measures = [ir_measures.parse_measure(m) for m in ("nDCG@10", "RR", "P@1")]
    agg = ir_measures.calc_aggregate(
        measures,
        list(ir_measures.read_trec_qrels(str(qrels_path))),
        list(ir_measures.read_trec_run(str(run_path))),
    )
    return {str(m): float(v) for m, v in agg.items()}


@pytest.mark.parametrize(
    ("variant", "ndcg10"),
    [("bm25", 1.0), ("tied", 1.0), ("reversed", 0.636959876283733)],
)
def test_trec_files_read_back_with_the_reports_figures(tmp_path, variant, ndcg10):
    run, qrels = _fixture_run()
    if variant == "tied":  # equal scores: a reader ordering ties by doc id would reshuffle them
        run = run.assign(score=1.0)
    if variant == "reversed":  # ranks against the scores: the rank column decides, as in ragrig
        n = run.groupby("qid")["rank"].transform("max")
        run = run.assign(rank=n + 1 - run["rank"])
    write_trec_run(run, tmp_path / "final.run", "ragrig-final")
    write_trec_qrels(qrels, tmp_path / "qrels.txt")
    ours = mean_measures(rankings_from_run(run), qrels_from_table(qrels), ["ndcg@10", "rr", "p@1"])
    theirs = _reader_means(tmp_path / "final.run", tmp_path / "qrels.txt")
    assert theirs["nDCG@10"] == pytest.approx(ours["ndcg@10"], abs=1e-12)
    assert theirs["RR"] == pytest.approx(ours["rr"], abs=1e-12)
    assert theirs["P@1"] == pytest.approx(ours["p@1"], abs=1e-12)
    assert ours["ndcg@10"] == pytest.approx(ndcg10)  # BM25 ranks every gold document first
    # ragrig's own reader gives back the same ranking
    back = read_trec_run(tmp_path / "final.run")
    assert rankings_from_run(back) == rankings_from_run(run)
    # query 9 has only a non-relevant judgment: not scored, so not in the qrels file
    assert read_trec_qrels(tmp_path / "qrels.txt").equals(
        qrels[qrels["qid"] != "9"].sort_values(["qid", "doc_id"], ignore_index=True)
    )
    try:
        import ranx
    except ImportError:
        return
    r = ranx.evaluate(
        ranx.Qrels.from_file(str(tmp_path / "qrels.txt"), kind="trec"),
        ranx.Run.from_file(str(tmp_path / "final.run"), kind="trec"),
        "ndcg@10",
    )
    assert r == pytest.approx(ours["ndcg@10"], abs=1e-12)


def test_run_lines_fall_strictly_and_keep_rank_order():
    run = pd.DataFrame(
        {
            "qid": ["2", "1", "1", "1"],
            "doc_id": ["x", "b", "a", "c"],
            "score": [0.5, 1.0, 1.0, 0.25],
            "rank": [1, 1, 2, 3],
        }
    )
    assert trec_run_lines(run, "t") == [
        "1 Q0 b 1 1 t",
        "1 Q0 a 2 0.99999994 t",
        "1 Q0 c 3 0.25 t",
        "2 Q0 x 1 0.5 t",
    ]


def test_bad_ids_and_lines_raise_naming_them(tmp_path):
    run = pd.DataFrame({"qid": ["1"], "doc_id": ["a b"], "score": [1.0], "rank": [1]})
    with pytest.raises(DataValidationError, match="document id 'a b'"):
        trec_run_lines(run, "t")
    bad = tmp_path / "bad.run"
    bad.write_text("1 Q0 a 1 0.5 t\n1 Q0 b 2 t\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"bad.run:2: .* 6 fields"):
        read_trec_run(bad)
