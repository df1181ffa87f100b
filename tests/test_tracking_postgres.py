"""MLflow for a team: the tracking store on PostgreSQL, artifacts on S3 (an emulator).

A throwaway PostgreSQL cluster (tests/pg_cluster.py, started with ragrig.tracking.postgres as `make
postgres` does) and moto's S3 server. Bad input first (seconds): an unreachable server, a wrong
password, a missing database, each one line naming it, before anything runs, never printing the
secret. Then concurrent logging through one `mlflow server` (nothing lost), and a two-point sweep
on the tiny fixture logged to PostgreSQL + S3, read back through the server's REST API.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import requests

from ragrig.core.errors import ServiceError
from ragrig.metrics.aggregate import flatten
from ragrig.tracking import server as ui
from ragrig.tracking.run import configure
from ragrig.tracking.stores import preflight, sqlalchemy_uri

from .conftest import copy_project, project_env, sh
from .pg_cluster import postgres  # noqa: F401
from .s3_emulator import free_port, s3  # noqa: F401

pytestmark = pytest.mark.full  # make test-all (CI) only

BUCKET = "ragrig-mlflow"


def _env(postgres, s3, **extra: str) -> dict[str, str]:  # noqa: F811
    return project_env({**postgres.env, **s3.env, "NO_PROXY": "127.0.0.1,localhost", **extra})


# --- bad input ---------------------------------------------------------------------------------


def test_unreachable_postgres_fails_in_seconds_naming_host_and_port():
    port = free_port()  # nothing listens there
    uri = f"postgresql://ragrig@127.0.0.1:{port}/ragrig"
    started = time.monotonic()
    with pytest.raises(ServiceError) as err:
        preflight(uri, timeout_s=2)
    assert time.monotonic() - started < 10
    msg = str(err.value)
    assert "\n" not in msg and f"127.0.0.1:{port}" in msg and "cannot reach PostgreSQL" in msg


def test_postgres_that_never_answers_times_out_in_seconds():
    """A port that accepts the connection and never answers: connect_timeout bounds the wait."""
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(ServiceError) as err:
            preflight(f"postgresql://ragrig@127.0.0.1:{port}/ragrig", timeout_s=2)
        took = time.monotonic() - started
    assert 1.5 < took < 10, took
    msg = str(err.value)
    assert f"cannot reach PostgreSQL at 127.0.0.1:{port}" in msg and "timeout" in msg
    assert "\n" not in msg


def test_wrong_password_says_so_without_printing_it(postgres, monkeypatch):  # noqa: F811
    secret = "Wr0ng-S3cret-pa55"
    monkeypatch.setenv("PGPASSWORD", secret)
    with pytest.raises(ServiceError) as err:
        preflight(postgres.uri)
    msg = str(err.value)
    assert "password authentication failed for user 'ragrig'" in msg
    assert secret not in msg and "\n" not in msg
    # the right one passes
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    preflight(postgres.uri)


def test_password_from_a_named_variable(postgres, monkeypatch):  # noqa: F811
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("TEAM_PG_SECRET", postgres.password)
    cfg = {"tracking_uri": postgres.uri, "password_env": "TEAM_PG_SECRET"}
    assert configure(cfg, Path.cwd()) == sqlalchemy_uri(postgres.uri)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.delenv("TEAM_PG_SECRET")
    with pytest.raises(
        ServiceError, match=r"password_env names \$TEAM_PG_SECRET, which is not set"
    ):
        configure(cfg, Path.cwd())


def test_missing_database_says_so(postgres, monkeypatch):  # noqa: F811
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    uri = postgres.uri.rsplit("/", 1)[0] + "/no_such_db"
    with pytest.raises(ServiceError) as err:
        preflight(uri)
    assert f"database 'no_such_db' does not exist on 127.0.0.1:{postgres.port}" in str(err.value)


def test_local_server_on_a_taken_port_says_so(postgres, tmp_path):  # noqa: F811
    """`make postgres PG_PORT=<a port in use>`: one error naming the port and the reason."""
    import socket
    import tempfile

    from ragrig.tracking.postgres import Cluster

    base = Path(tempfile.mkdtemp(prefix="ragrig-pg-taken-"))
    base.chmod(0o755)
    try:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen(1)
            port = taken.getsockname()[1]
            cluster = Cluster(base / "data", port, "admin-pw", bindir=postgres.cluster.bindir)
            cluster.init(fast=True)
            with pytest.raises(ServiceError) as err:
                cluster.start(fast=True)
        msg = str(err.value)
        assert f"127.0.0.1:{port}" in msg and "Address already in use" in msg
        assert "\n" not in msg and not cluster.running()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_password_in_the_uri_is_refused_without_echoing_it():
    from ragrig.compose.params import compose, validate_composition
    from ragrig.core.errors import ConfigError

    from .conftest import PROJECT

    cfg = compose(PROJECT / "conf", ["report.mlflow.tracking_uri=postgresql://u:Top5ecret@h/db"])
    with pytest.raises(ConfigError) as err:
        validate_composition(cfg)
    msg = str(err.value)
    assert msg.startswith("report.mlflow.tracking_uri: credentials inside the URL are refused")
    assert "export PGPASSWORD" in msg and "postgresql://***@h/db" in msg
    assert "Top5ecret" not in msg and "\n" not in msg


def test_postgres_start_prints_a_uri_without_the_password(monkeypatch, capsys):
    """`make postgres` (ragrig postgres start) in a fresh project: the tracking URI it prints has
    no password, the password is in .ragrig/postgres.pass (0600) for PGPASSWORD, and that URI
    with that variable reaches the store and validates as report.mlflow.tracking_uri."""
    import argparse
    import tempfile

    from ragrig.core.config import validate_section
    from ragrig.tracking.postgres import bin_dir, cmd_postgres

    if bin_dir() is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true and PostgreSQL's initdb/pg_ctl are missing (make test installs)")
        pytest.skip("PostgreSQL's initdb/pg_ctl are not installed")
    root = Path(tempfile.mkdtemp(prefix="ragrig-pg-start-"))
    root.chmod(0o755)  # the server's own user (postgres, when tests run as root) enters it
    port = free_port()
    monkeypatch.chdir(root)
    monkeypatch.delenv("PGPASSWORD", raising=False)

    def run(action: str) -> int:
        return cmd_postgres(argparse.Namespace(action=action, port=port, user="ragrig", db="rr"))

    try:
        assert run("start") == 0
        out = capsys.readouterr().out
        pass_file = root / ".ragrig" / "postgres.pass"
        password = pass_file.read_text().strip()
        assert len(password) >= 16 and password not in out
        assert pass_file.stat().st_mode & 0o777 == 0o600
        uri = f"postgresql://ragrig@127.0.0.1:{port}/rr"
        assert f"tracking URI: {uri}\n" in out
        assert "export PGPASSWORD=$(cat .ragrig/postgres.pass)" in out
        assert f"report.mlflow.tracking_uri={uri} " in out
        assert validate_section("report", {"mlflow": {"tracking_uri": uri}})
        monkeypatch.setenv("PGPASSWORD", password)
        preflight(uri)  # libpq takes the password from PGPASSWORD
    finally:
        try:
            run("stop")
        finally:
            shutil.rmtree(root, ignore_errors=True)


def test_s3_artifact_location_problems_are_named(s3, monkeypatch):  # noqa: F811
    for k, v in s3.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("MLFLOW_S3_ENDPOINT_URL", s3.endpoint)
    with pytest.raises(ServiceError, match="bucket 'no-such-bucket' does not exist"):
        preflight("sqlite:///x.db", "s3://no-such-bucket/mlflow")
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("MLFLOW_S3_ENDPOINT_URL", dead)
    started = time.monotonic()
    with pytest.raises(ServiceError) as err:
        preflight("sqlite:///x.db", "s3://bucket/mlflow", timeout_s=2)
    assert time.monotonic() - started < 15
    assert dead in str(err.value) and "cannot reach the endpoint" in str(err.value)


def test_store_uris_and_artifact_locations(tmp_path, monkeypatch):
    from ragrig.tracking.contents import params_hash
    from ragrig.tracking.run import artifact_location, tracking_uri
    from ragrig.tracking.stores import redact

    pg = "postgresql://ragrig@db.example:5433/ragrig"
    assert tracking_uri(pg, tmp_path) == "postgresql+psycopg2://ragrig@db.example:5433/ragrig"
    assert sqlalchemy_uri("postgresql+psycopg2://u@h/d") == "postgresql+psycopg2://u@h/d"
    assert sqlalchemy_uri("sqlite:///x.db") == "sqlite:///x.db"
    assert redact("postgresql://u:pw@h:1/d") == "postgresql://u:***@h:1/d"
    # from inside DVC's temporary copy: beside the project, never the copy's ./mlruns
    copy = tmp_path / "proj" / ".dvc" / "tmp" / "exps" / "standalone" / "tmpx"
    copy.mkdir(parents=True)
    monkeypatch.chdir(copy)
    expected = (tmp_path / "proj" / "mlartifacts").resolve().as_uri()
    assert artifact_location(sqlalchemy_uri(pg)) == expected
    assert artifact_location(pg, "s3://b/p") == "s3://b/p"
    assert artifact_location("http://127.0.0.1:5000") is None
    # the run's identity leaves out where it is logged
    base = {"report": {"k_values": [10], "mlflow": {"tracking_uri": None}}, "x": 1}
    moved = {"report": {"k_values": [10], "mlflow": {"tracking_uri": pg}}, "x": 1}
    other = {"report": {"k_values": [5], "mlflow": {"tracking_uri": None}}, "x": 1}
    assert params_hash(base) == params_hash(moved) != params_hash(other)


# --- a project copy on the tiny fixture --------------------------------------------------------

BASE = ["dataset=tiny", "generate=extractive", "chunk=recursive", "chunk.overlap=2"]


def _python() -> str:
    return str(Path(project_env()["PATH"].split(":")[0]) / "python")


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    ws = copy_project(tmp_path_factory.mktemp("pgsweep") / "proj")
    sh([_python(), "-m", "ragrig", "init-dvc"], ws)
    sh([_python(), "-m", "ragrig", "params", "write", *BASE], ws)
    sh(["git", "add", "-A"], ws)
    sh(["git", "commit", "-qm", "tiny params"], ws)
    return ws


def _team(uri: str, s3, prefix: str) -> list[str]:  # noqa: F811
    return [
        "report/mlflow=team",
        f"report.mlflow.tracking_uri={uri}",
        f"report.mlflow.artifact_location=s3://{BUCKET}/{prefix}",
        f"report.mlflow.s3_endpoint_url={s3.endpoint}",
        "report.mlflow.connect_timeout_s=2",
    ]


@pytest.mark.e2e
def test_sweep_refuses_an_unreachable_store_before_any_point(ws, postgres, s3):  # noqa: F811
    out = ws / ".ragrig" / "bad-sweep"
    port = free_port()
    dead = f"postgresql://ragrig@127.0.0.1:{port}/ragrig"
    wrong = "N0t-The-Pa55word"
    cases = [
        (_team(dead, s3, "bad"), {}, f"cannot reach PostgreSQL at 127.0.0.1:{port}"),
        (_team(postgres.uri, s3, "bad"), {"PGPASSWORD": wrong}, "password authentication failed"),
    ]
    for overrides, extra, expected in cases:
        shutil.rmtree(out, ignore_errors=True)
        started = time.monotonic()
        proc = sh(
            [_python(), "-m", "ragrig", "sweep", "--sweep-dir", str(out), *BASE, *overrides]
            + ["retrieve.ef_search=16,64"],
            ws,
            env=_env(postgres, s3, **extra),
            check=False,
        )
        took = time.monotonic() - started
        assert proc.returncode == 1, proc.stdout + proc.stderr
        errors = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert len(errors) == 1 and expected in errors[0], proc.stderr
        assert wrong not in proc.stdout + proc.stderr
        assert not list(out.glob("logs/*.log"))  # no point started
        assert took < 60, took  # composing the points and importing DVC dominate


# --- concurrent logging through one server -----------------------------------------------------

WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from ragrig.tracking.contents import RunContents
    from ragrig.tracking.run import log_contents

    uri, worker, n_runs, n_metrics, start_at, folder = sys.argv[1:7]
    worker, n_runs, n_metrics = int(worker), int(n_runs), int(n_metrics)
    art = Path(folder) / f"worker{worker}.txt"
    art.write_text(f"artifact of worker {worker}\\n")
    while time.time() < float(start_at):
        time.sleep(0.01)
    for r in range(n_runs):
        contents = RunContents(
            name=f"w{worker}-r{r}",
            tags={"worker": str(worker), "run": str(r)},
            params={"worker": str(worker), "run": str(r)},
            metrics={f"m/{k}": worker * 1000 + r * 100 + k for k in range(n_metrics)},
            artifacts=[art],
        )
        print(log_contents(uri, "concurrent", contents), flush=True)
    """
)


def _failures(procs: list, outs: list) -> list[str]:
    """The error lines of the writers that failed (tracebacks are long)."""
    return [
        " | ".join(ln for ln in err.splitlines() if "Error" in ln or "error" in ln)[-1500:]
        for p, (_, err) in zip(procs, outs, strict=True)
        if p.returncode != 0
    ]


def _search(url: str, exp_id: str) -> list[dict]:
    runs, token = [], None
    while True:
        body = {"experiment_ids": [exp_id], "max_results": 1000}
        if token:
            body["page_token"] = token
        reply = requests.post(f"{url}/api/2.0/mlflow/runs/search", json=body, timeout=30)
        reply.raise_for_status()
        data = reply.json()
        runs += data.get("runs", [])
        token = data.get("next_page_token")
        if not token:
            return runs


def _metrics(run: dict) -> dict[str, float]:
    return {m["key"]: m["value"] for m in run["data"].get("metrics", [])}


def _tags(run: dict) -> dict[str, str]:
    return {t["key"]: t["value"] for t in run["data"].get("tags", [])}


@pytest.fixture(scope="module")
def server(tmp_path_factory, postgres, s3):  # noqa: F811
    """`mlflow server` on a database of its own, artifacts proxied to the S3 emulator."""
    root = tmp_path_factory.mktemp("mlflow-server")
    uri = postgres.database("ragrig_server")
    s3.bucket(BUCKET)
    env = {**postgres.env, **s3.env, "MLFLOW_S3_ENDPOINT_URL": s3.endpoint}
    info = ui.start(
        root, uri, port=free_port(), artifacts=f"s3://{BUCKET}/served", env=env, timeout=180
    )
    try:
        yield info
    finally:
        ui.stop(root)


@pytest.mark.e2e
def test_concurrent_writers_through_one_server_lose_nothing(server, s3, tmp_path):  # noqa: F811
    n_workers, n_runs, n_metrics = 8, 3, 40
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = project_env({"NO_PROXY": "127.0.0.1,localhost"})
    start_at = time.time() + 8  # every writer imports MLflow first, then all log at once
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), server["url"], str(w), str(n_runs), str(n_metrics)]
            + [str(start_at), str(tmp_path)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(n_workers)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), _failures(procs, outs)
    logged = {w for out, _ in outs for w in out.split() if re.fullmatch(r"[0-9a-f]{32}", w)}
    assert len(logged) == n_workers * n_runs

    exp = requests.get(
        f"{server['url']}/api/2.0/mlflow/experiments/get-by-name",
        params={"experiment_name": "concurrent"},
        timeout=30,
    ).json()["experiment"]
    runs = _search(server["url"], exp["experiment_id"])
    assert {r["info"]["run_id"] for r in runs} == logged
    for run in runs:
        tags = _tags(run)
        w, r = int(tags["worker"]), int(tags["run"])
        assert run["info"]["status"] == "FINISHED"
        assert _metrics(run) == {f"m/{k}": float(w * 1000 + r * 100 + k) for k in range(n_metrics)}
        listed = requests.get(
            f"{server['url']}/api/2.0/mlflow/artifacts/list",
            params={"run_id": run["info"]["run_id"]},
            timeout=30,
        ).json()
        assert [f["path"] for f in listed["files"]] == [f"worker{w}.txt"]
    # every artifact went through the server's proxy into the bucket
    keys = [k for k in s3.keys(BUCKET, "served/") if k.endswith(".txt")]
    assert len(keys) == n_workers * n_runs


@pytest.mark.e2e
def test_concurrent_writers_create_one_new_postgres_store(postgres, tmp_path):  # noqa: F811
    """Straight to a database with no MLflow schema yet: the writers' first calls race to create
    it and the experiment (serialised by an advisory lock); every run and metric is there."""
    uri = postgres.database("ragrig_fresh")
    n_workers, n_runs, n_metrics = 6, 2, 25
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    # the writers run where DVC runs a point: a temporary copy inside the project
    project = tmp_path / "proj"
    copy = project / ".dvc" / "tmp" / "exps" / "standalone" / "tmpabc"
    copy.mkdir(parents=True)
    env = project_env(postgres.env)
    start_at = time.time() + 10
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), uri, str(w), str(n_runs), str(n_metrics)]
            + [str(start_at), str(tmp_path)],
            cwd=copy,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(n_workers)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), _failures(procs, outs)
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow.tracking import MlflowClient

    old = os.environ.get("PGPASSWORD")
    os.environ["PGPASSWORD"] = postgres.password
    try:
        client = MlflowClient(tracking_uri=sqlalchemy_uri(uri))
        (exp,) = [e for e in client.search_experiments() if e.name == "concurrent"]
        runs = client.search_runs([exp.experiment_id], max_results=1000)
    finally:
        if old is None:
            os.environ.pop("PGPASSWORD", None)
        else:
            os.environ["PGPASSWORD"] = old
    assert len(runs) == n_workers * n_runs
    # artifacts beside the project, not in the temporary copy (MLflow's default: ./mlruns)
    assert exp.artifact_location == (project / "mlartifacts").as_uri()
    assert not (copy / "mlruns").exists()
    for run in runs:
        w, r = int(run.data.tags["worker"]), int(run.data.tags["run"])
        assert run.info.status == "FINISHED"
        art = project / "mlartifacts" / run.info.run_id / "artifacts" / f"worker{w}.txt"
        assert art.read_text() == f"artifact of worker {w}\n"
        assert run.data.metrics == {
            f"m/{k}": float(w * 1000 + r * 100 + k) for k in range(n_metrics)
        }


# --- a sweep logged to PostgreSQL + S3, read back through mlflow server -------------------------


@pytest.mark.e2e
def test_two_point_sweep_to_postgres_and_s3_read_back_through_the_server(
    ws,
    postgres,  # noqa: F811
    s3,  # noqa: F811
    tmp_path,
):
    uri = postgres.database("ragrig_sweep")
    s3.bucket(BUCKET)
    out = tmp_path / "sweep"
    proc = sh(
        [_python(), "-m", "ragrig", "sweep", "--sweep-dir", str(out), *BASE]
        + _team(uri, s3, "team")
        + ["retrieve.ef_search=16,64"],
        ws,
        env=_env(postgres, s3),
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads((out / "rows.json").read_text())
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert not (ws / "mlflow.db").exists()  # nothing went to the sqlite default

    root = tmp_path / "server"
    root.mkdir()
    info = ui.start(
        root,
        uri,
        port=free_port(),
        artifacts=f"s3://{BUCKET}/served",
        env={**postgres.env, **s3.env, "MLFLOW_S3_ENDPOINT_URL": s3.endpoint},
        timeout=180,
    )
    try:
        url = info["url"]
        exp = requests.get(
            f"{url}/api/2.0/mlflow/experiments/get-by-name",
            params={"experiment_name": "ragrig"},
            timeout=30,
        ).json()["experiment"]
        assert exp["artifact_location"] == f"s3://{BUCKET}/team"
        runs = _search(url, exp["experiment_id"])
        (parent,) = [r for r in runs if _tags(r).get("ragrig.sweep") == "1"]
        assert parent["info"]["status"] == "FINISHED"
        children = [
            r for r in runs if _tags(r).get("mlflow.parentRunId") == parent["info"]["run_id"]
        ]
        assert len(runs) == 3 and len(children) == 2
        by_point = {_tags(c)["ragrig.sweep_point"]: c for c in children}
        assert set(by_point) == {r["point"] for r in rows}
        for row in rows:
            child = by_point[row["point"]]
            assert child["info"]["status"] == "FINISHED"
            metrics = _metrics(child)
            assert metrics["retrieval/ndcg_at_10"] == pytest.approx(
                row["metrics"]["retrieval/ndcg_at_10"]
            )
            run_id = child["info"]["run_id"]
            assert child["info"]["artifact_uri"].startswith(f"s3://{BUCKET}/team/")
            listed = requests.get(
                f"{url}/api/2.0/mlflow/artifacts/list", params={"run_id": run_id}, timeout=30
            ).json()
            assert {"metrics.json", "answers.json", "summary.txt"} <= {
                f["path"] for f in listed["files"]
            }
            # the bytes in the bucket are the report's metrics, the values the run holds
            key = child["info"]["artifact_uri"].split(f"s3://{BUCKET}/", 1)[1] + "/metrics.json"
            assert key in s3.keys(BUCKET, "team/")
            body = s3.client().get_object(Bucket=BUCKET, Key=key)["Body"].read()
            stored = {k: v for k, v in flatten(json.loads(body)).items() if isinstance(v, float)}
            assert stored and all(metrics[k] == pytest.approx(v) for k, v in stored.items())
    finally:
        ui.stop(root)
