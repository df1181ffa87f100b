"""What a report's MLflow run shows, through a real sqlite store: a sweep point is a child run
named after its swept values, a plain run is top-level and named after its non-default
choices, the experiment opens as a model-development experiment, the runs-table view holds
the headline columns, and the per-query answers table loads back as a table."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ragrig.tracking.contents import (
    ANSWERS_TABLE,
    ENV_PARENT,
    ENV_POINT,
    TAG_PARENT,
    TAG_SWEEP_POINT,
    VIEW_TAG_PREFIX,
)
from ragrig.tracking.run import (
    EXPERIMENT_KIND,
    TAG_EXPERIMENT_KIND,
    ensure_experiment,
    log_run,
    runs_table_url,
)

DEFAULTS = {
    "dataset": {"name": "tiny", "root": "tests/fixtures/tiny_beir"},
    "chunk": {"method": "document"},
    "retrieve": {"method": "hybrid_rrf", "ef_search": 128},
    "runtime": {"seed": 13},
}
METRICS = {
    "retrieval": {"ndcg@10": 0.5, "recall@100": 1.0},
    "judge": {"faithfulness": 0.75},
    "latency_ms": {"retrieve": {"p95": 3.0}},
    "cost_usd_per_query": {"mean": 0.001},
}


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    """A git checkout whose committed params.yaml is the default composition."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "params.yaml").write_text(yaml.safe_dump(DEFAULTS))
    (root / "dvc.yaml").write_text("stages: {}\n")
    for cmd in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@e.invalid", "commit", "-qm", "x"],
    ):
        subprocess.run(cmd, cwd=root, check=True, capture_output=True)
    return root


def _client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _with(**changes) -> dict:
    params = json.loads(json.dumps(DEFAULTS))
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        params[section][key] = value
    return params


def test_sweep_point_is_a_child_run_and_a_plain_run_is_top_level(project: Path):
    uri = f"sqlite:///{project / 'mlflow.db'}"
    client_id = ensure_experiment(uri, "ragrig")
    client = _client(uri)
    parent = client.create_run(client_id, run_name="sweep 2026 chunk ef_search").info.run_id

    point = "chunk=recursive retrieve.ef_search=64"
    child_id = log_run(
        uri,
        "ragrig",
        _with(chunk__method="recursive", retrieve__ef_search=64),
        METRICS,
        [],
        project,
        environ={ENV_PARENT: parent, ENV_POINT: point},
    )
    child = client.get_run(child_id)
    assert child.info.run_name == point
    assert child.data.tags[TAG_PARENT] == parent
    assert child.data.tags[TAG_SWEEP_POINT] == point
    assert child.info.experiment_id == client_id
    assert child.info.status == "FINISHED"

    plain_id = log_run(
        uri,
        "ragrig",
        _with(retrieve__method="dense", retrieve__ef_search=64),
        METRICS,
        [],
        project,
        environ={},
    )
    plain = client.get_run(plain_id)
    assert plain.info.run_name == "retrieve=dense ef_search=64"
    assert TAG_PARENT not in plain.data.tags and TAG_SWEEP_POINT not in plain.data.tags

    # the default configuration, with the dataset root made absolute as the sweep does
    same = _with(dataset__root=str((project / "tests/fixtures/tiny_beir").resolve()))
    default_id = log_run(uri, "ragrig", same, METRICS, [], project, environ={})
    assert client.get_run(default_id).info.run_name == "default"

    # the sweep's parent lists its points as children
    children = client.search_runs([client_id], f"tags.`{TAG_PARENT}` = '{parent}'")
    assert [r.info.run_id for r in children] == [child_id]


def test_experiment_is_tagged_for_model_development_new_and_existing(tmp_path: Path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    new_id = ensure_experiment(uri, "ragrig")
    client = _client(uri)
    assert client.get_experiment(new_id).tags[TAG_EXPERIMENT_KIND] == EXPERIMENT_KIND
    # an experiment created before the tag existed gets it on the next report
    old_id = client.create_experiment("older")
    assert TAG_EXPERIMENT_KIND not in client.get_experiment(old_id).tags
    assert ensure_experiment(uri, "older") == old_id
    assert client.get_experiment(old_id).tags[TAG_EXPERIMENT_KIND] == EXPERIMENT_KIND
    assert runs_table_url("http://127.0.0.1:5000/", new_id) == (
        f"http://127.0.0.1:5000/#/experiments/{new_id}/runs"
        "?workflowType=machine_learning&viewStateShareKey=ragrig"
    )


def test_view_holds_headline_columns_and_swept_params(project: Path):
    uri = f"sqlite:///{project / 'mlflow.db'}"
    exp_id = ensure_experiment(uri, "ragrig")
    client = _client(uri)
    log_run(uri, "ragrig", _with(chunk__method="recursive"), METRICS, [], project, environ={})
    log_run(uri, "ragrig", _with(retrieve__ef_search=32), METRICS, [], project, environ={})
    view = json.loads(client.get_experiment(exp_id).tags[VIEW_TAG_PREFIX + "ragrig"])
    assert view["selectedColumns"] == [
        "metrics.`retrieval/ndcg_at_10`",
        "metrics.`retrieval/recall_at_100`",
        "metrics.`judge/faithfulness`",
        "metrics.`latency_ms/retrieve/p95`",
        "metrics.`cost_usd_per_query/mean`",
        "params.`chunk.method`",  # kept from the first run
        "params.`retrieve.ef_search`",
    ]
    assert view["orderByKey"] == "metrics.`retrieval/ndcg_at_10`" and not view["orderByAsc"]

    parent = client.create_run(exp_id, run_name="sweep").info.run_id
    env = {ENV_PARENT: parent, ENV_POINT: "index/dense=flat ef_search=64"}
    log_run(uri, "ragrig", _with(retrieve__ef_search=64), METRICS, [], project, environ=env)
    sweep_view = json.loads(client.get_experiment(exp_id).tags[f"{VIEW_TAG_PREFIX}sweep-{parent}"])
    # index.dense.method is not a param of this run: only the params the run has
    assert [c for c in sweep_view["selectedColumns"] if c.startswith("params.")] == [
        "params.`retrieve.ef_search`"
    ]
    # the default view keeps its columns (the swept param was already one of them)
    assert json.loads(client.get_experiment(exp_id).tags[VIEW_TAG_PREFIX + "ragrig"]) == view


def test_answers_table_loads_back_with_its_rows(project: Path):
    import mlflow

    uri = f"sqlite:///{project / 'mlflow.db'}"
    answers = pd.DataFrame(
        {
            "qid": ["q1", "q2"],
            "question": ["How many moons has Mars?", "Who?"],
            "passages": ["[1] d01#0: Mars has two moons.", ""],
            "answer": ["Two [1]", ""],
            "judge_status": ["scored", "skipped"],
            "faithfulness": [1.0, None],
        }
    )
    art = project / "summary.txt"
    art.write_text("summary\n")
    run_id = log_run(uri, "ragrig", DEFAULTS, METRICS, [art], project, answers=answers, environ={})
    client = _client(uri)
    run = client.get_run(run_id)
    assert json.loads(run.data.tags["mlflow.loggedArtifacts"]) == [
        {"path": ANSWERS_TABLE, "type": "table"}
    ]
    assert {a.path for a in client.list_artifacts(run_id)} == {ANSWERS_TABLE, "summary.txt"}
    # read as mlflow.log_table's own tables are read (found through the loggedArtifacts tag)
    mlflow.set_tracking_uri(uri)  # load_table searches runs through the fluent API
    loaded = client.load_table(run.info.experiment_id, ANSWERS_TABLE, run_ids=[run_id])
    assert loaded["qid"].tolist() == ["q1", "q2"]
    assert loaded["passages"].tolist() == answers["passages"].tolist()
    assert loaded.loc[0, "faithfulness"] == 1.0 and pd.isna(loaded.loc[1, "faithfulness"])
    assert run.data.metrics["retrieval/ndcg_at_10"] == 0.5
    assert run.data.params["retrieve.ef_search"] == "128"
