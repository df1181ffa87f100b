"""`ragrig ui`: a real mlflow server over a sqlite store lists the logged runs and stops cleanly."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import requests

from ragrig.cli.app import experiment_table_url
from ragrig.tracking import server as ui


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, set[str]]:
    """A sqlite tracking store with two finished runs in experiment 'ragrig'."""
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("DO_NOT_TRACK", "1")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp_id = client.create_experiment("ragrig")
    run_ids = set()
    for i in range(2):
        run = client.create_run(exp_id, run_name=f"run-{i}")
        client.log_param(run.info.run_id, "retrieve", ["bm25", "dense"][i])
        client.log_metric(run.info.run_id, "ndcg_at_10", 0.5 + i / 10)
        client.set_terminated(run.info.run_id)
        run_ids.add(run.info.run_id)
    return uri, exp_id, run_ids


@pytest.mark.full  # make test-all: an MLflow server
def test_ui_serves_the_store_and_stops_cleanly(
    tmp_path: Path, store: tuple[str, str, set[str]]
) -> None:
    uri, exp_id, run_ids = store
    port = _free_port()
    state = tmp_path / ".ragrig" / "mlflow_server.json"
    try:
        info = ui.start(tmp_path, uri, port=port)
        assert info["url"] == f"http://127.0.0.1:{port}"
        assert info["backend_uri"] == uri
        assert json.loads(state.read_text()) == info
        pgid = info["pgid"]
        assert info["pid"] in ui.group_members(pgid)

        assert ui.start(tmp_path, uri, port=port)["pid"] == info["pid"]  # already running: reused

        resp = requests.post(
            f"{info['url']}/api/2.0/mlflow/runs/search",
            json={"experiment_ids": [exp_id], "max_results": 100},
            timeout=30,
        )
        assert resp.status_code == 200, resp.text
        runs = resp.json()["runs"]
        assert {r["info"]["run_id"] for r in runs} == run_ids
        assert len(runs) == 2
        assert {r["data"]["params"][0]["value"] for r in runs} == {"bm25", "dense"}
        # `make ui` prints the runs table in the model-development view with the default columns
        assert experiment_table_url(info["url"], tmp_path) == (
            f"{info['url']}/#/experiments/{exp_id}/runs"
            "?workflowType=machine_learning&viewStateShareKey=ragrig"
        )
        (tmp_path / "params.yaml").write_text("report: {mlflow: {experiment: not-yet}}\n")
        assert experiment_table_url(info["url"], tmp_path) is None

        stopped = ui.stop(tmp_path)
    finally:
        ui.stop(tmp_path)  # never leave a server behind, even when an assertion failed

    assert stopped > 0
    assert ui.group_members(pgid) == []
    assert not state.exists()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{info['url']}/health", timeout=2)
    assert ui.stop(tmp_path) == 0


def _time_wait_port() -> int:
    """A port with no listener whose last connection the server side closed first, so the
    kernel keeps it in TIME_WAIT (what a just-stopped mlflow server leaves behind). Like the
    server (uvicorn), the listening socket sets SO_REUSEADDR."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    cli = socket.create_connection(("127.0.0.1", port))
    conn, _ = srv.accept()
    conn.close()  # the server side closes first: its end goes to TIME_WAIT
    srv.close()
    cli.close()
    return port


def test_port_probe_accepts_a_port_left_in_time_wait() -> None:
    port = _time_wait_port()
    # the old probe (no SO_REUSEADDR) saw the port as taken
    with socket.socket() as plain, pytest.raises(OSError):
        plain.bind(("127.0.0.1", port))
    ui._check_port_free("127.0.0.1", port)  # no error: the server could bind it


def test_port_in_use_is_one_clear_line(tmp_path, monkeypatch, capsys) -> None:
    from ragrig.cli import app as cli

    monkeypatch.chdir(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        assert cli.main(["ui", "start", "--port", str(port)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"ragrig: error: port {port} on 127.0.0.1 is in use")
    assert "make ui PORT=" in err[0]
    assert not (tmp_path / ".ragrig" / "mlflow_server.json").exists()


def test_make_ui_takes_a_port() -> None:
    import subprocess

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        ["make", "-n", "-o", ".venv/.installed", "ui", "PORT=5123"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "ragrig ui start --port 5123" in out


def test_make_ui_takes_the_store_overrides() -> None:
    """`make ui ARGS="report/mlflow=team"`: the overrides reach `ragrig ui start` before its
    options (argparse reads positionals after the action only there)."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        ["make", "-n", "-o", ".venv/.installed", "ui", "PORT=5123", "ARGS=report/mlflow=team"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "ragrig ui start report/mlflow=team --port 5123" in out
    from ragrig.cli.app import build_parser

    ns = build_parser().parse_args(["ui", "start", "report/mlflow=team", "--port", "5123"])
    assert ns.overrides == ["report/mlflow=team"] and ns.port == 5123
