"""The team's own system read from files: run files (ragrig.retrieve.run_file) and answers files
(ragrig.generate.external), each bad input one error line naming file, line and case."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ragrig.core.errors import DataValidationError
from ragrig.generate.external import read_answers_file, to_generations
from ragrig.retrieve.run_file import read_run_file, run_from_file

CHUNKS = pd.DataFrame(
    {
        "chunk_id": ["a#0", "b#0", "b#1", "c#0"],
        "doc_id": ["a", "b", "b", "c"],
        "text": ["alpha text", "beta one", "beta two", "gamma"],
        "start": [0, 0, 8, 0],
        "end": [10, 8, 16, 5],
    }
)
QIDS = ["q1", "q2", "q3"]


def _trec(tmp_path, lines, name="team.run"):
    path = tmp_path / name
    path.write_text("".join(f"{x}\n" for x in lines))
    return path


def test_a_trec_run_is_ordered_as_trec_eval_orders_it_with_ties_counted(tmp_path):
    path = _trec(
        tmp_path, ["q1 Q0 a 1 0.5 t", "q1 Q0 c 2 0.5 t", "q1 Q0 b 3 0.9 t", "q2 Q0 a 1 1 t"]
    )
    qv = {"q1": np.array([0.0, 1.0]), "q2": np.array([1.0, 0.0])}
    cv = {"a#0": np.array([1.0, 0.0]), "b#0": np.array([1.0, 0.0]), "b#1": np.array([0.0, 1.0]),
          "c#0": np.array([0.0, 1.0])}  # fmt: skip
    run, counts = run_from_file(read_run_file(path), path, QIDS, CHUNKS, 2, qv, cv)
    # score descending, the tie (a, c at 0.5) by document id descending; depth 2 cuts a
    assert run[["qid", "doc_id", "rank"]].values.tolist() == [
        ["q1", "b", 1], ["q1", "c", 2], ["q2", "a", 1]]  # fmt: skip
    # b has two chunks: the one nearest q1's vector
    assert run.loc[run["doc_id"] == "b", "chunk_id"].item() == "b#1"
    assert counts == {"rows": 4, "queries_ranked": 2, "queries_without_ranking": 1, "ties": 1,
                      "cut_at_depth": 1, "passage_by_nearest_chunk": 1}  # fmt: skip


def test_jsonl_and_parquet_runs_name_their_chunks(tmp_path):
    rows = [{"qid": "q1", "doc_id": "b", "score": 2, "chunk_id": "b#0"},
            {"qid": "q1", "doc_id": "a", "score": 1}]  # fmt: skip
    jl = tmp_path / "r.jsonl"
    jl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run, _ = run_from_file(read_run_file(jl), jl, QIDS, CHUNKS, 10)
    assert run["chunk_id"].tolist() == ["b#0", "a#0"]
    pq = tmp_path / "r.parquet"
    pd.DataFrame(rows).to_parquet(pq)
    again, _ = run_from_file(read_run_file(pq), pq, QIDS, CHUNKS, 10)
    pd.testing.assert_frame_equal(again, run)
    other = tmp_path / "o.jsonl"
    other.write_text(json.dumps({"qid": "q1", "doc_id": "a", "score": 1, "chunk_id": "b#0"}))
    with pytest.raises(DataValidationError, match="names chunk 'b#0', which is not a chunk of"):
        run_from_file(read_run_file(other), other, QIDS, CHUNKS, 10)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "u.run",
            "q1 Q0 zz 1 1 t\nq1 Q0 yy 2 0.5 t\n",
            r"2 documents not in the dataset \('yy', 'zz'\)",
        ),
        ("u.run", "q9 Q0 a 1 1 t\n", r"1 queries not in the dataset \('q9'\)"),
        ("d.run", "q1 Q0 a 1 1 t\nq1 Q0 a 2 0.5 t\n", "lists document 'a' twice"),
        ("m.run", "q1 Q0 a 1\n", r"m.run:1: a TREC run line has 6 fields"),
        ("s.jsonl", '{"qid": "q1", "doc_id": "a"}\n', r"s.jsonl:1: no score"),
        ("n.jsonl", '{"qid": "q1", "doc_id": "a", "score": "high"}\n', "is not a finite number"),
        ("x.jsonl", "not json\n", r"x.jsonl:1: not a JSON object"),
        ("e.run", "", "ranks no document"),
        ("r.csv", "q1,a,1\n", "cannot tell the run file's format"),
    ],
)
def test_a_bad_run_file_is_one_line_naming_the_case(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DataValidationError, match=message) as err:
        run_from_file(read_run_file(path), path, QIDS, CHUNKS, 10)
    assert "\n" not in str(err.value)


RUN = pd.DataFrame(
    {
        "qid": ["q1", "q1"],
        "doc_id": ["a", "b"],
        "chunk_id": ["a#0", "b#1"],
        "score": [2.0, 1.0],
        "rank": [1, 2],
    }  # fmt: skip
)


def _answers(tmp_path, objs):
    path = tmp_path / "answers.jsonl"
    path.write_text("".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs))
    return path


def test_answers_map_their_passages_onto_the_run_and_count_the_rest(tmp_path):
    path = _answers(tmp_path, [
        {"qid": "q2", "answer": "", "status": "error", "error": "HTTP 500"},
        {"qid": "q1", "answer": "Alpha [1], beta [2] and [7].", "passage_ids": ["a", "b", "c"],
         "latency_ms": 12.5, "prompt_tokens": 40, "completion_tokens": 9},
    ])  # fmt: skip
    gens, extra, counts = to_generations(
        read_answers_file(path), str(path), QIDS, RUN, CHUNKS, 4, "team-system"
    )
    q1 = gens.set_index("qid").loc["q1"]
    # a document id is the run's chunk of it (b#1, not b#0); c is not ranked: the context run
    assert json.loads(q1["context_chunk_ids"]) == ["a#0", "b#1", "c#0"]
    assert json.loads(q1["contexts"]) == ["alph", "beta", "gamm"]  # cut at max_passage_chars
    assert json.loads(q1["citations"]) == [1, 2]
    assert (q1["latency_ms"], q1["prompt_tokens"], q1["model"]) == (12.5, 40, "team-system")
    assert extra.values.tolist() == [["q1", "c", "c#0", 0.0, 3]]
    assert gens.set_index("qid").loc["q2", "status"] == "error"
    assert counts == {"answers": 2, "passages_outside_the_run": 1, "passage_texts_given": 0}


@pytest.mark.parametrize(
    ("objs", "message"),
    [
        ([{"qid": "q1", "answer": "x"}, {"qid": "q1", "answer": "y"}],
         r"answers.jsonl:2: query 'q1' is answered twice \(first on line 1\)"),
        (["{broken"], r"answers.jsonl:1: not JSON"),
        ([{"qid": "q1"}], r"answers.jsonl:1: no answer"),
        ([{"answer": "x"}], r"answers.jsonl:1: no qid"),
        ([{"qid": "q1", "answer": "x", "status": "fine"}], "status 'fine' is not one of"),
        ([{"qid": "q1", "answer": "x", "latency_ms": -1}], "latency_ms -1 is not a count"),
        ([{"qid": "q1", "answer": "x", "passage_ids": ["a"], "passages": ["p", "q"]}],
         "2 passages for 1 passage_ids"),
        ([{"qid": "q9", "answer": "x"}], r"1 query \('q9'\) not in the dataset"),
        ([{"qid": "q1", "answer": "x", "passage_ids": ["zz"]}],
         "used passage 'zz', neither a chunk nor a document"),
        ([], "holds no answer"),
    ],
)  # fmt: skip
def test_a_bad_answers_file_is_one_line_naming_the_case(tmp_path, objs, message):
    path = _answers(tmp_path, objs)
    with pytest.raises(DataValidationError, match=message) as err:
        to_generations(read_answers_file(path), str(path), QIDS, RUN, CHUNKS, 100, "m")
    assert "\n" not in str(err.value)


def test_the_default_files_are_placeholders_a_stage_refuses_in_one_line(tmp_path):
    from ragrig.core.config import SystemConfig, refuse_placeholder
    from ragrig.core.errors import ConfigError

    from ..conftest import PROJECT

    defaults = SystemConfig()
    for key in ("run_file", "answers_file"):
        path = PROJECT / getattr(defaults, key)
        with pytest.raises(ConfigError, match=f"system.{key} is the placeholder .*: set it"):
            refuse_placeholder(path, f"system.{key}")
    real = tmp_path / "team.run"
    real.write_text("q1 Q0 a 1 1 t\n")
    refuse_placeholder(real, "system.run_file")  # a real file passes
