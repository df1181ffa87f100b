"""What an MLflow run contains, without a store: names, view columns, the answers table."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ragrig.tracking.contents import (
    answers_table,
    changed_params,
    point_param_keys,
    short_label,
    view_state,
)

DEFAULTS = {
    "dataset": {"name": "scifact", "root": "../data/scifact", "claims": {"files": ["a"]}},
    "chunk": {"method": "document"},
    "generate": {"method": "llama_cpp", "max_tokens": 128},
    "retrieve": {"method": "hybrid_rrf", "ef_search": 128},
    "report": {"mlflow": {"tracking_uri": None}},
}


def test_changed_params_name_the_choices_not_their_consequences(tmp_path: Path):
    (tmp_path / "conf" / "retrieve").mkdir(parents=True)
    (tmp_path / "conf" / "retrieve" / "dense.yaml").write_text("method: dense\nef_search: 128\n")
    (tmp_path / "conf" / "dataset").mkdir()
    (tmp_path / "conf" / "dataset" / "tiny.yaml").write_text(
        "name: tiny\nroot: tests/fixtures/tiny_beir\n"
    )
    # conf/generate/ absent: keys the defaults lack count as the option's own
    params = json.loads(json.dumps(DEFAULTS))
    params["dataset"] = {"name": "tiny", "root": "tests/fixtures/tiny_beir"}  # another dataset
    params["generate"] = {"method": "extractive", "max_sentences": 3}
    params["retrieve"]["ef_search"] = 64
    params["report"]["mlflow"]["tracking_uri"] = "sqlite:////x.db"
    changed = changed_params(params, DEFAULTS, tmp_path)
    assert changed == {
        "dataset.name": "tiny",
        "generate.method": "extractive",
        "retrieve.ef_search": "64",
    }
    assert short_label(changed) == "dataset=tiny generate=extractive ef_search=64"
    # the same root spelled absolute (as the sweep rewrites it) is no change
    same = json.loads(json.dumps(DEFAULTS))
    same["dataset"]["root"] = str((tmp_path / "../data/scifact").resolve())
    assert changed_params(same, DEFAULTS, tmp_path) == {}
    # a choice plus a key of its own that differs from the option's value: both named
    dense = json.loads(json.dumps(DEFAULTS))
    dense["retrieve"] = {"method": "dense", "ef_search": 64}
    assert short_label(changed_params(dense, DEFAULTS, tmp_path)) == "retrieve=dense ef_search=64"
    dense["retrieve"]["ef_search"] = 128  # the option's own value (the default's too)
    assert short_label(changed_params(dense, DEFAULTS, tmp_path)) == "retrieve=dense"
    # a last part two changed keys share is spelled in full
    assert short_label({"index.dense.m": "16", "other.m": "2"}) == "index.dense.m=16 other.m=2"
    assert short_label({"report.slices": json.dumps([{"name": "x" * 40}])}) == "slices=…"


def test_point_label_keys_map_to_params():
    flat = {"chunk.method": "recursive", "retrieve.ef_search": "64", "index.dense.m": "16"}
    assert point_param_keys("chunk=recursive ef_search=64 index/dense.m=16 unknown=1", flat) == [
        "chunk.method",
        "retrieve.ef_search",
        "index.dense.m",
    ]


def test_view_keeps_earlier_param_columns_and_orders_headline_first():
    first = view_state(["retrieval/ndcg_at_10", "judge/faithfulness", "x/y"], ["chunk.method"])
    assert (
        first["selectedColumns"]
        == first["columnOrder"]
        == [
            "metrics.`retrieval/ndcg_at_10`",
            "metrics.`judge/faithfulness`",
            "params.`chunk.method`",
        ]
    )
    second = view_state(["judge/faithfulness"], ["retrieve.ef_search"], first)
    assert second["selectedColumns"] == [
        "metrics.`judge/faithfulness`",
        "params.`chunk.method`",
        "params.`retrieve.ef_search`",
    ]
    assert second["orderByKey"] == "metrics.`judge/faithfulness`"


def test_answers_table_rows():
    queries = pd.DataFrame({"qid": ["1", "2", "3"], "text": ["Q one?", "Q two?", "Q three?"]})
    gens = pd.DataFrame(
        {
            "qid": ["2", "1"],
            "status": ["ok", "empty"],
            "answer": ["Mars has two moons. [1]", ""],
            "context_chunk_ids": ['["d01#0", "d02#0"]', "[]"],
            "contexts": [json.dumps(["Mars has two moons.  Phobos", "x" * 300]), "[]"],
            "citations": ["[1]", "[]"],
        }
    )
    judg = pd.DataFrame(
        {
            "qid": ["1", "2"],
            "status": ["skipped", "scored"],
            "faithfulness": [None, 0.5],
            "claims": ["[]", json.dumps([{"claim": "A", "supported": True}, {"claim": "B"}])],
        }
    )
    score = pd.DataFrame({"qid": [2], "faithfulness": [0.5], "gate": ["pass"]})
    t = answers_table(queries, gens, judg, score)
    assert t["qid"].tolist() == ["1", "2"]  # one row per generated answer
    row = t.iloc[1]
    assert row["question"] == "Q two?"
    assert row["passages"] == "[1] d01#0: Mars has two moons. Phobos\n[2] d02#0: " + "x" * 159 + "…"
    assert (row["answer"], row["judge_status"], row["faithfulness"]) == (
        "Mars has two moons. [1]",
        "scored",
        0.5,
    )
    assert row["unsupported_claims"] == "B" and row["gate"] == "pass"
    assert t.columns[:6].tolist() == [
        "qid",
        "question",
        "passages",
        "answer",
        "generation_status",
        "judge_status",
    ]
