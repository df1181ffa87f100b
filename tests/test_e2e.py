"""End to end on the tiny fixture through real DVC: caching, partial reruns, sweeps, MLflow, UI."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from .conftest import PROJECT, TINY, project_env, sh

pytestmark = pytest.mark.e2e

BASE = TINY


def _python(ws: Path) -> str:
    return str(Path(project_env()["PATH"].split(os.pathsep)[0]) / "python")


def _stage_log(ws: Path) -> list[dict]:
    path = ws / ".ragrig" / "stage_log.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _ran(ws: Path, since: int) -> list[str]:
    return [e["stage"] for e in _stage_log(ws)[since:] if e["status"] == "ok"]


def _params(ws: Path, *overrides: str) -> None:
    sh([_python(ws), "-m", "ragrig", "params", "write", *BASE, *overrides], ws)


def _mlflow_runs(ws: Path) -> pd.DataFrame:
    code = (
        "import mlflow,sys;mlflow.set_tracking_uri(sys.argv[1]);"
        "df=mlflow.search_runs(experiment_names=['ragrig']);print(df.to_json(orient='records'))"
    )
    out = sh([_python(ws), "-c", code, f"sqlite:///{ws / 'mlflow.db'}"], ws).stdout
    return pd.DataFrame(json.loads(out.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def ws(tiny_run) -> Path:
    """The session's fixture run (tests/conftest.py), changed here in place and put back."""
    return tiny_run


def test_repro_writes_outputs_metrics_and_one_mlflow_run(ws):
    assert _ran(ws, 0) == [
        "parse",
        "chunk",
        "train_embed",  # off by default: a manifest saying so, no model
        "embed",
        "index",
        "retrieve",
        "train_rerank",  # off by default: a manifest saying so, no model
        "rerank",
        "estimate",  # the run's model calls priced: within budget (none set)
        "generate",
        "train_verifier",  # off by default: a manifest saying so, no model
        "judge",
        "report",
    ]
    trained = json.loads((ws / "data/train_verifier/manifest.json").read_text())
    assert trained["trained"] is False and "enabled is false" in trained["reason"]
    rerank_model = json.loads((ws / "data/train_rerank/manifest.json").read_text())
    assert rerank_model["trained"] is False and "enabled is false" in rerank_model["reason"]
    for out in [
        "data/parse/documents.parquet",
        "data/chunk/chunks.parquet",
        "data/embed/chunks.npy",
        "data/index/dense.faiss",
        "data/retrieve/run.parquet",
        "data/rerank/run.parquet",
        "data/generate/generations.parquet",
        "data/judge/judgments.parquet",
        "reports/run/per_query.parquet",
        "reports/run/plots/slices_ndcg.png",
    ]:
        assert (ws / out).exists(), out
    metrics = json.loads((ws / "reports/metrics.json").read_text())
    c = metrics["counts"]
    assert (c["queries"], c["answerable"], c["no_gold"], c["missing_runs"]) == (9, 8, 1, 0)
    assert c["generated"] == 9 and sum(c["judgment_status"].values()) == 9
    assert 0.0 <= metrics["retrieval"]["ndcg@10"] <= 1.0
    assert metrics["retrieval"]["recall@100"] == 1.0  # 20 documents, depth 100: every gold is found
    assert set(metrics["lanes"]) == {"dense", "bm25"}
    labels = {k: v["n_queries"] for k, v in metrics["slices"]["claim_label"].items()}
    assert labels == {"SUPPORT": 4, "CONTRADICT": 2, "NOT_ENOUGH_INFO": 3}
    assert set(metrics["latency_ms"]) == {
        "embed_query",
        "retrieve",
        "rerank",
        "generate",
        "judge",
        "total",  # end to end per answered query
    }
    runs = _mlflow_runs(ws)
    assert len(runs) == 1
    run = runs.iloc[0]
    assert run["metrics.retrieval/ndcg_at_10"] == pytest.approx(metrics["retrieval"]["ndcg@10"])
    assert run["params.retrieve.ef_search"] == "128"
    # rerank=identity: the reranker's paired deltas on identical candidates are exactly 0
    for measure in ("ndcg@10", "rr", "p@1"):
        d = metrics["deltas"]["rerank_vs_retrieve"][measure]
        assert (d["delta"], d["ci_low"], d["ci_high"], d["p_value"]) == (0.0, 0.0, 0.0, 1.0)
    assert run["metrics.deltas/rerank_vs_retrieve/ndcg_at_10/delta"] == 0.0
    deltas = pd.read_csv(ws / "reports/run/deltas.csv")
    assert (deltas["delta"] == 0.0).all() and "claim_label" in set(deltas["slice"])
    # the TREC files read back by ir_measures give the report's figures
    import ir_measures

    trec = ws / "reports/run/trec"
    assert {p.name for p in trec.iterdir()} == {
        "lane_bm25.run",
        "lane_dense.run",
        "retrieve.run",
        "final.run",
        "qrels.txt",
    }
    ndcg = ir_measures.calc_aggregate(
        [ir_measures.nDCG @ 10],
        list(ir_measures.read_trec_qrels(str(trec / "qrels.txt"))),
        list(ir_measures.read_trec_run(str(trec / "final.run"))),
    )
    assert list(ndcg.values())[0] == pytest.approx(metrics["retrieval"]["ndcg@10"], abs=1e-12)
    assert run["tags.params_hash"] and len(run["tags.git_commit"]) == 40
    # embed.precision auto: what it resolved to on this CPU, in the manifest and the run's tags
    from ragrig.weights.precision import cpu_info, resolve_precision

    decided = json.loads((ws / "data/embed/manifest.json").read_text())["precision_decision"]
    assert decided["requested"] == "auto" and decided["resolved"] == resolve_precision("auto")
    assert decided["cpu"] == cpu_info()[0]
    assert run["tags.precision.embed"] == f"{resolve_precision('auto')} (auto)"
    # the scorecard: three axes measured on the fixture (relevance from the embed vectors and
    # qrels, correctness from the claim labels), logged, and read back by `ragrig gate`
    sc = metrics["scorecard"]
    assert {a: sc["axes"][a]["n"] for a in ("relevance", "correctness")} == {
        "relevance": 9,
        "correctness": 9,
    }
    assert sc["relevance"]["answers_with_part"]["semantic"] == 9
    assert (ws / "reports/run/scorecard.csv").exists()
    # the HTML scorecard shows the same numbers, with intervals seeded from runtime.seed
    page = (ws / "reports/index.html").read_text(encoding="utf-8")
    assert f'class="value">{metrics["retrieval"]["ndcg@10"]:.4f}</div>' in page
    assert f'id="gate">{sc["gate"]}</span>' in page and "seed 13 (runtime.seed)" in page
    artifacts = Path(run["artifact_uri"].removeprefix("file://"))
    assert (artifacts / "index.html").read_text(encoding="utf-8") == page
    # the answers page it links: every answer, and the reasons of each unfaithful one
    answers = (ws / "reports/run/answers.html").read_text(encoding="utf-8")
    judged = pd.read_parquet(ws / "data/judge/judgments.parquet")
    unfaithful = int((judged["judged_faithful"] == 0.0).sum())
    assert '<p id="answers-link"><a href="run/answers.html">' in page
    assert f'id="answers-count">9 of 9 answers shown; in all {unfaithful} unfaithful' in answers
    assert answers.count('<article class="answer ') == 9
    assert answers.count('<div class="why">') == unfaithful
    assert '<a href="../index.html">back to the run scorecard</a>' in answers
    assert (artifacts / "answers.html").read_text(encoding="utf-8") == answers
    assert run["metrics.scorecard/axes/relevance/value"] == pytest.approx(
        sc["axes"]["relevance"]["value"]
    )
    gate = subprocess.run(
        [_python(ws), "-m", "ragrig", "gate"], cwd=ws, capture_output=True, text=True
    )
    expected = {"pass": 0, "fail_soft": 0}.get(sc["gate"], 2 if sc["unmeasured"] else 1)
    assert gate.returncode == expected, gate.stdout + gate.stderr
    assert f"gate: {sc['gate']}" in gate.stdout


def test_second_repro_runs_no_stage(ws):
    before = len(_stage_log(ws))
    proc = sh(["dvc", "repro"], ws)
    assert _ran(ws, before) == []
    assert "Running stage" not in proc.stdout


@pytest.mark.full  # make test-all: a second pass over the fixture run
def test_mlflow_logging_benchmark_on_the_fixture_run(ws):
    """Smoke run of benchmarks/mlflow_logging.py on this finished run: it logs into its own
    store (the project's store gains no run) and prints its figures."""
    before = len(_mlflow_runs(ws))
    proc = subprocess.run(
        [_python(ws), str(PROJECT / "benchmarks" / "mlflow_logging.py"), "--project", str(ws)]
        + ["--runs", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "first run (creates the store)" in proc.stdout
    assert "next 1 runs: median" in proc.stdout
    assert len(_mlflow_runs(ws)) == before


def test_dvc_views_headline_plots_and_metrics_diff(ws, tmp_path):
    from ragrig.report.views import headline, rounded

    metrics = json.loads((ws / "reports/metrics.json").read_text())
    text = (ws / "reports/run/headline.json").read_text()
    head = json.loads(text)
    assert list(head.items()) == list(headline(metrics).items())  # same keys, same order
    assert (head["n_queries"], head["recall@100"], head["gate"]) == (
        9,
        1.0,
        metrics["scorecard"]["gate"],
    )
    assert head["total_p95_ms"] == rounded(metrics["latency_ms"]["total"]["p95"])
    shown = json.loads(sh(["dvc", "metrics", "show", "--json"], ws).stdout)[""]["data"]
    assert shown["reports/run/headline.json"]["data"] == head  # declared under metrics:
    assert "reports/metrics.json" in shown  # beside the full one

    out = tmp_path / "dvc_plots"
    plots = json.loads(sh(["dvc", "plots", "show", "--json", "-o", str(out)], ws).stdout)["data"]
    assert list(plots) == [
        "p95 latency per stage (ms)",
        "retrieval at k (final ranking)",
        "reports/run/plots/latency.png",
        "reports/run/plots/slices_ndcg.png",
    ]
    lat = plots["p95 latency per stage (ms)"][0]["content"]["data"]["values"]
    assert [row["stage"] for row in lat] == [
        "embed_query",
        "retrieve",
        "rerank",
        "generate",
        "judge",
        "total",
    ]
    assert float(lat[-1]["p95_ms"]) == head["total_p95_ms"]
    curve = plots["retrieval at k (final ranking)"][0]["content"]["data"]["values"]
    assert {row["field"] for row in curve} == {"recall_final", "ndcg_final"}
    at100 = [r for r in curve if r["k"] == "100" and r["field"] == "recall_final"]
    assert float(at100[0]["recall_final"]) == 1.0  # every gold document of the fixture found
    assert all(p[0]["type"] == "image" for k, p in plots.items() if k.endswith(".png"))

    # HEAD: dvc.lock and reports/ are not committed, so it has no metrics to compare with
    own = json.loads(sh(["dvc", "metrics", "diff", "HEAD", "--json"], ws).stdout)
    assert own["reports/run/headline.json"]["ndcg@10"] == {"old": None, "new": head["ndcg@10"]}
    said = sh([_python(ws), "-m", "ragrig", "metrics-diff"], ws).stdout.splitlines()
    assert said[0].startswith("HEAD has no recorded metrics (its dvc.lock is not committed")
    assert said[1].split() == ["metric", "HEAD", "workspace", "change"]
    assert said[2].split() == ["ndcg@10", "-", str(head["ndcg@10"]), "-"]
    assert len(said) == 2 + len(head)

    # a fresh clone, nothing run yet: DVC prints no table; ragrig says what to do, one line
    clone = tmp_path / "clone"
    sh(["git", "clone", "-q", str(ws), str(clone)], tmp_path)
    proc = sh(["dvc", "metrics", "diff", "HEAD"], clone)
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    proc = sh([_python(ws), "-m", "ragrig", "metrics-diff"], clone, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "ragrig metrics-diff: the workspace has no reports/run/headline.json yet: run "
        "`dvc repro` (or `make smoke` on the fixture) first"
    )


@pytest.mark.full  # make test-all: a second pass over the fixture run
def test_exp_show_selection_lists_swept_params_and_headline_only(ws):
    from ragrig.report.views import headline

    sh(["dvc", "exp", "run", *(f"-S{o}" for o in (*BASE, "retrieve.ef_search=48"))], ws)
    try:
        proc = sh([_python(ws), "-m", "ragrig", "exp-show", "--no-pager", "--csv"], ws)
        rows = proc.stdout.strip().splitlines()
        header = rows[0].split(",")
        keys = [
            k if k != "cost_usd_per_query" else "reports/run/headline.json:" + k
            for k in headline({})
        ]
        assert header in (
            ["Experiment", "Created", *keys, "retrieve.ef_search"],
            ["Experiment", "Created", *headline({}), "retrieve.ef_search"],
        )
        ef = [r.split(",")[-1] for r in rows[1:]]
        assert ef[:2] == ["48", "128"] and "48" in ef[2:]  # workspace, baseline, experiment
    finally:
        _params(ws)  # back to the default: restored from the run-cache
        sh(["dvc", "repro"], ws)


def test_ef_search_change_reruns_only_retrieve_and_downstream(ws):
    before = len(_stage_log(ws))
    run_before = pd.read_parquet(ws / "data/retrieve/run.parquet")
    _params(ws, "retrieve.ef_search=16")
    sh(["dvc", "repro"], ws)
    same_run = run_before.equals(pd.read_parquet(ws / "data/retrieve/run.parquet"))
    # rerank, generate and judge depend on the ranking file only: an unchanged ranking (likely on
    # 20 vectors) stops the cascade; the report still reruns, its ANN recall and latency changed
    expected = (
        ["retrieve", "report"]
        if same_run
        else ["retrieve", "rerank", "estimate", "generate", "judge", "report"]
    )
    assert _ran(ws, before) == expected
    _params(ws)  # back to the default: every stage restored from the run-cache, none recomputed
    before = len(_stage_log(ws))
    sh(["dvc", "repro"], ws)
    assert _ran(ws, before) == []


@pytest.mark.full  # make test-all: the report stage once more
def test_the_report_draws_the_coverage_matrix_when_an_intent_column_is_named(ws):
    before = len(_stage_log(ws))
    _params(ws, "report.coverage.intent=claim_label", "report.coverage.doc_type=source")
    sh(["dvc", "repro"], ws)
    # the estimate reads the report section's prices: it reruns, and generate does not
    assert _ran(ws, before) == ["estimate", "report"]
    cov = json.loads((ws / "reports/metrics.json").read_text())["coverage"]
    n = len(pd.read_parquet(ws / "data/parse/queries.parquet"))
    assert (cov["intent"], cov["doc_type"], cov["axis_measured"]) == ("claim_label", "source", True)
    assert sum(sum(row.values()) for row in cov["counts"].values()) == n
    cells = pd.read_csv(ws / "reports/run/coverage.csv")
    assert int(cells["queries"].sum()) == n and (cells["needed"] >= 2).all()
    assert "coverage: " in (ws / "reports/run/summary.txt").read_text()
    assert 'id="coverage"' in (ws / "reports/index.html").read_text()
    _params(ws)
    sh(["dvc", "repro"], ws)  # restored from the run-cache


@pytest.mark.full  # make test-all: a second pass over the fixture run
def test_rerank_change_reruns_rerank_and_downstream_only(ws):
    before = len(_stage_log(ws))
    _params(ws, "rerank=cross_encoder", "rerank.model=/nonexistent/model")
    proc = sh(["dvc", "repro"], ws, check=False)
    assert proc.returncode != 0  # a model that cannot load fails the stage, loudly
    assert "unknown cross-encoder '/nonexistent/model'" in proc.stderr
    assert [(e["stage"], e["status"]) for e in _stage_log(ws)[before:]] == [("rerank", "failed")]
    assert not (ws / "data/rerank").exists()
    _params(ws)
    sh(["dvc", "repro"], ws)  # restored from the run-cache


def test_editing_one_stage_schema_reruns_only_that_stage_and_after(ws):
    schema = ws / "src/ragrig/judge/config.py"
    original = schema.read_text()
    schema.write_text(original + "\n# a comment: the judge's code changed\n")
    try:
        before = len(_stage_log(ws))
        sh(["dvc", "repro"], ws)
        # nothing upstream re-embeds or re-indexes; the estimate prices the judge's calls with
        # this schema, and its gate file is the same bytes, so generate does not rerun
        assert _ran(ws, before) == ["estimate", "judge", "report"]
    finally:
        schema.write_text(original)
    before = len(_stage_log(ws))
    sh(["dvc", "repro"], ws)
    assert _ran(ws, before) == []


def _without_timing(obj):
    if isinstance(obj, dict):
        return {
            k: _without_timing(v)
            for k, v in obj.items()
            # measured times, and the cost priced from measured CPU time and latency
            if k not in {"latency_ms", "approx_ms", "exact_ms", "cpu_s", "cost_usd_per_query"}
        }
    return obj


@pytest.mark.full  # make test-all: a second pass over the fixture run
def test_forced_rerun_reproduces_outputs_to_the_digit(ws):
    def snapshot():
        return {
            "chunks": pd.read_parquet(ws / "data/chunk/chunks.parquet"),
            "vectors": (ws / "data/embed/chunks.npy").read_bytes(),
            "index": (ws / "data/index/dense.faiss").read_bytes(),
            "run": pd.read_parquet(ws / "data/rerank/run.parquet"),
            "gens": pd.read_parquet(ws / "data/generate/generations.parquet").drop(
                columns=["latency_ms", "cpu_s"]
            ),
            "judge": pd.read_parquet(ws / "data/judge/judgments.parquet").drop(
                columns=["latency_ms", "judge_cpu_s"]
            ),
            "metrics": _without_timing(json.loads((ws / "reports/metrics.json").read_text())),
        }

    first = snapshot()
    sh(["dvc", "repro", "-f"], ws)
    second = snapshot()
    assert first["vectors"] == second["vectors"]
    assert first["index"] == second["index"]
    for key in ("chunks", "run", "gens", "judge"):
        pd.testing.assert_frame_equal(first[key], second[key])
    assert first["metrics"] == second["metrics"]


def test_killed_stage_leaves_nothing_half_written_and_resumes(ws):
    reference = pd.read_parquet(ws / "data/retrieve/run.parquet")
    env = project_env()
    proc = subprocess.Popen(
        ["dvc", "repro", "-f", "-s", "embed"],
        cwd=ws,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (ws / "data/embed").exists():
        time.sleep(0.1)  # DVC removes the stage's outputs before running it
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (ws / "data/embed").exists()
    status = sh(["dvc", "status"], ws).stdout
    assert "embed" in status
    sh(["dvc", "repro"], ws)
    assert not list((ws / "data").glob(".*.tmp-*"))
    pd.testing.assert_frame_equal(reference, pd.read_parquet(ws / "data/retrieve/run.parquet"))


def test_an_index_changed_with_size_and_mtime_kept_is_refused_by_the_next_stage(ws, tmp_path):
    """DVC trusts a file's size and modification time; the stage that loads it checks its bytes
    against the sha256 recorded in the writing stage's manifest."""
    path = ws / "data/index/dense.faiss"
    original, st = path.read_bytes(), path.stat()
    damaged = bytearray(original)
    damaged[len(damaged) // 2] ^= 0xFF
    out = tmp_path / "retrieve"
    inputs = ["data/parse", "data/chunk", "data/embed", "data/index"]
    try:
        path.write_bytes(bytes(damaged))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert "Data and pipelines are up to date" in sh(["dvc", "status"], ws).stdout
        cmd = [_python(ws), "stages/retrieve.py", "--out", str(out), "--inputs", *inputs]
        proc = subprocess.run(cmd, cwd=ws, env=project_env(), capture_output=True, text=True)
    finally:
        path.write_bytes(original)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        "ragrig retrieve: error: data/index/dense.faiss does not match the sha256 recorded in "
        "data/index/manifest.json (changed since its stage wrote it: a bad copy, a damaged disk "
        "or cache, an edit); rerun the stage that writes it: `dvc repro -f index`"
    )
    assert not out.exists() and not list(tmp_path.iterdir())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.full  # make test-all: a second pass over the fixture run
def test_sweep_embeds_once_logs_two_runs_and_ui_lists_them(ws):
    before = len(_stage_log(ws))
    runs_before = set(_mlflow_runs(ws)["run_id"])
    sh([_python(ws), "-m", "ragrig", "sweep", "--multirun", *BASE, "retrieve.ef_search=24,40"], ws)
    ran = _ran(ws, before)
    # positive control: the stage log sees the sweep's points (retrieve ran once per point),
    # so embed's absence means it was restored from the run-cache, not that nothing was logged
    assert ran.count("retrieve") == 2 and ran.count("report") == 2
    assert "embed" not in ran and "index" not in ran
    runs = _mlflow_runs(ws)
    new = runs[~runs["run_id"].isin(runs_before)]
    # one parent run for the sweep (its params list the swept values), a child run per point
    parent = new[new["tags.ragrig.sweep"] == "1"]
    points = new[new["tags.ragrig.sweep"] != "1"]
    assert list(parent["params.retrieve.ef_search"]) == ["24,40"]
    assert sorted(points["params.retrieve.ef_search"]) == ["24", "40"]
    assert set(points["tags.mlflow.parentRunId"]) == set(parent["run_id"])

    import requests

    from ragrig.tracking import server as ui

    port = _free_port()
    info = ui.start(ws, f"sqlite:///{ws / 'mlflow.db'}", port=port)
    try:
        exp = requests.get(
            f"{info['url']}/api/2.0/mlflow/experiments/get-by-name",
            params={"experiment_name": "ragrig"},
            timeout=120,
        ).json()["experiment"]
        listed = requests.post(
            f"{info['url']}/api/2.0/mlflow/runs/search",
            json={"experiment_ids": [exp["experiment_id"]], "max_results": 100},
            timeout=120,
        ).json()
        listed_ids = {r["info"]["run_id"] for r in listed["runs"]}
        assert set(new["run_id"]) <= listed_ids
        assert len(listed_ids) == len(runs)
    finally:
        stopped = ui.stop(ws)
    assert stopped > 0
    assert ui.group_members(info["pgid"]) == []
