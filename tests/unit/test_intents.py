"""The intent classifier (nearest prototype by embedding): precision, recall and F1 per intent
by hand, a held-out intent never seen in training counted apart, and the command labelling a
run's queries after printing its held-out figures."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from ragrig.core.errors import DataValidationError
from ragrig.metrics.intents import held_out, scores, train_and_measure


def test_scores_by_hand_and_no_nan_for_an_intent_never_predicted():
    s = scores(["a", "a", "b", "b", "c"], ["a", "b", "b", "b", "a"])
    p = s["per_intent"]
    assert p["a"] == {"precision": 0.5, "recall": 0.5, "f1": 0.5, "support": 2}
    assert p["b"]["precision"] == pytest.approx(2 / 3) and p["b"]["recall"] == 1.0
    assert p["b"]["f1"] == pytest.approx(0.8)
    assert p["c"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert s["macro"]["precision"] == pytest.approx((0.5 + 2 / 3) / 3)


def _encode(texts):
    # x texts point one way, y texts the other; z texts between, nearer x
    table = {"x": [1.0, 0.05], "y": [0.05, 1.0], "z": [0.8, 0.6]}
    return np.asarray([table[t[0]] for t in texts])


def test_held_out_figures_and_an_intent_only_held_out_is_counted_apart():
    texts = [f"x{i}" for i in range(12)] + [f"y{i}" for i in range(12)]
    labels = ["x"] * 12 + ["y"] * 12
    z = next(f"z{i}" for i in range(100) if held_out(f"z{i}", 13, 0.3))  # held out
    got = train_and_measure([*texts, z], [*labels, "z"], _encode, 0.3, 13)
    test = [t for t in texts if held_out(t, 13, 0.3)]
    assert got["held_out"]["n"] == len(test) and got["train"] == 24 - len(test)
    assert got["held_out"]["macro"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    assert got["unseen"] == {"z": 1}  # never scored as an error of x
    assert got["intents"] == ["x", "y", "z"]  # the whole sample's prototypes label queries
    with pytest.raises(DataValidationError, match="two intents at least"):
        train_and_measure(["x1", "x2"], ["x", "x"], _encode)
    with pytest.raises(DataValidationError, match="strictly between 0 and 1"):
        train_and_measure(texts, labels, _encode, holdout=1.0)


def _parse_outputs(folder):
    """The tiny fixture's parse outputs (queries, qrels, documents) under folder/parse."""
    from ragrig.core.config import validate_section
    from ragrig.core.io import write_table
    from ragrig.parse import make_parser

    from ..conftest import FIXTURE

    ds = validate_section("dataset", {"name": "tiny", "root": str(FIXTURE), "split": "test"})
    parsed = make_parser(validate_section("parse", {"method": "beir"})).parse(ds)
    for name in ("queries", "qrels", "documents"):
        write_table(getattr(parsed, name), folder / "parse" / f"{name}.parquet", name)
    return folder


def test_the_command_measures_the_classifier_then_labels_the_queries(tmp_path):
    from ..conftest import BIN, PROJECT, project_env

    tiny_stage_run = _parse_outputs(tmp_path / "data")

    sample = tmp_path / "intents.csv"
    rows = ["text,intent"]
    rows += [f"Mars moon number {i} and its orbit around Mars,space" for i in range(8)]
    rows += [f"Vitamin {i} deficiency and blood levels in patients,health" for i in range(8)]
    sample.write_text("\n".join(rows) + "\n")
    cmd = [str(BIN / "python"), "-m", "ragrig", "coverage", "--intent-sample", str(sample),
           "--data", str(tiny_stage_run), "--params", str(PROJECT / "params.yaml"),
           "--per-query", str(tmp_path / "none.parquet"), "--out", str(tmp_path / "c.json")]  # fmt: skip
    proc = subprocess.run(cmd, env=project_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "intent classifier: nearest prototype of 16 labelled texts, 2 intents" in proc.stdout
    assert "intent by the classifier" in proc.stdout and "health" in proc.stdout


def test_the_command_reads_an_ontology_and_lists_the_branches_no_query_falls_in(tmp_path):
    import json

    import pandas as pd

    from ..conftest import BIN, project_env

    data = _parse_outputs(tmp_path / "data")
    path = data / "parse" / "queries.parquet"
    queries = pd.read_parquet(path)
    queries["intent"] = ["mars" if "Mars" in t else "other" for t in queries["text"]]
    queries.to_parquet(path)
    n_mars = int((queries["intent"] == "mars").sum())
    onto = tmp_path / "ontology.yaml"
    onto.write_text("space: null\nmars: space\nmoon: space\nhealth: null\n")
    out = tmp_path / "c.json"
    cmd = [str(BIN / "python"), "-m", "ragrig", "coverage", "--intent", "intent", "--ontology",
           str(onto), "--data", str(data), "--per-query", str(tmp_path / "none.parquet"),
           "--out", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, env=project_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    n_other = len(queries) - n_mars
    assert (
        f"ontology {onto}: rows are its 2 branches at depth 1; {n_other} queries of 1 intents "
        f"it does not name (other {n_other}) in the row 'unknown'"
    ) in proc.stdout
    assert "rows with no query at all: 1 (health)" in proc.stdout
    record = json.loads(out.read_text())
    assert record["counts"]["space"] == {"all": n_mars}
    assert record["ontology"]["unknown_intents"] == {"other": n_other}
    onto.write_text("space: null\nmars: planets\n")
    proc = subprocess.run(cmd, env=project_env(), capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.strip() == (
        f"ragrig coverage: error: ontology {onto}: 'mars' has the unknown parent 'planets' "
        "(not a node)"
    )
