"""Record a report as one MLflow run: flattened params, metrics, tags and artifacts.

A run is FINISHED only once everything is logged. A run whose process died while logging is
marked FAILED: at once when the process is interrupted or terminated (SIGINT/SIGTERM), and for an
uncatchable kill (SIGKILL, power loss) by the next process that opens the store.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ragrig.core.paths import project_root
from ragrig.runtime.process import pid_alive
from ragrig.runtime.signals import sigterm_raises
from ragrig.tracking.contents import (
    DEFAULT_VIEW,
    VIEW_TAG_PREFIX,
    RunContents,
    build_contents,
    view_state,
)

ENV_URI = "RAGRIG_MLFLOW_URI"
# where a URI from $RAGRIG_MLFLOW_URI ends up besides messages (`make ui`)
ENV_WRITTEN_TO = "the mlflow server's command line and .ragrig/mlflow_server.json"


def tracking_uri(configured: str | None, cwd: Path) -> str:
    """Configured URI, else $RAGRIG_MLFLOW_URI, else sqlite:///<project>/mlflow.db (absolute).
    A PostgreSQL URI gets its driver named (postgresql+psycopg2://). A URI holding credentials
    is refused, from either (ConfigError, one line): the URI reaches messages, the mlflow
    server's command line and .ragrig/mlflow_server.json."""
    from ragrig.tracking.stores import refuse_uri_credentials, sqlalchemy_uri

    if configured:
        return sqlalchemy_uri(refuse_uri_credentials(configured, "report.mlflow.tracking_uri"))
    if os.environ.get(ENV_URI):
        env_uri = refuse_uri_credentials(os.environ[ENV_URI], ENV_URI, ENV_WRITTEN_TO)
        return sqlalchemy_uri(env_uri)
    return f"sqlite:///{project_root(cwd) / 'mlflow.db'}"


TAG_PID = "ragrig.pid"
TAG_HOST = "ragrig.host"
TAG_FAILURE = "ragrig.failure"
TAG_ERROR = "ragrig.error"  # why a run ended FAILED (also what the sweep records)


def sqlite_path(uri: str) -> Path | None:
    """The database file of a `sqlite:///` URI (absolute), else None."""
    from ragrig.tracking.stores import sqlite_store

    store = sqlite_store(uri)
    return store.path if store is not None else None


def artifact_location(uri: str, configured: str | None = None) -> str | None:
    """Where a new experiment keeps its artifacts: the configured location (e.g.
    `s3://bucket/prefix`), else `<store folder>/mlartifacts` (absolute) for a local sqlite store.
    Never the working directory: during `dvc exp run --temp` or a queued experiment that is
    DVC's temporary copy, deleted afterwards. None (the server's default artifact root) for a
    tracking server; for another database (PostgreSQL) without one, `<project>/mlartifacts`
    (MLflow's own default there is ./mlruns under the working directory)."""
    if configured:
        return configured
    db = sqlite_path(uri)
    if db is not None:
        return (db.parent / "mlartifacts").as_uri()
    if uri.startswith(("http://", "https://")):
        return None
    return (project_root(Path.cwd()) / "mlartifacts").as_uri()


def configure(mlflow_cfg: Any, cwd: Path) -> str:
    """The tracking URI of a `report.mlflow` config (mapping or MlflowConfig), with its S3
    endpoint and password variable applied to the environment, checked reachable (PostgreSQL,
    a tracking server, the S3 bucket) in seconds, before any work."""
    from collections.abc import Mapping

    from ragrig.tracking.stores import apply_environment, preflight

    get = mlflow_cfg.get if isinstance(mlflow_cfg, Mapping) else lambda k: getattr(mlflow_cfg, k)
    apply_environment(mlflow_cfg)
    uri = tracking_uri(get("tracking_uri"), cwd)
    preflight(uri, get("artifact_location"), int(get("connect_timeout_s") or 5))
    return uri


@contextlib.contextmanager
def store_lock(uri: str, timeout_s: float | None = None) -> Iterator[None]:
    """Serialise store creation between processes: two processes opening a not-yet-created
    sqlite store race on its schema (`table ... already exists`); on PostgreSQL the same
    holds for MLflow's schema migrations and for creating the experiment (an advisory lock).
    The sqlite lock file is waited for `timeout_s` at most (default LOCK_TIMEOUT_S), then
    ServiceError: a process stuck while holding it never hangs the next one."""
    import time

    from ragrig.core.errors import ServiceError
    from ragrig.tracking.stores import LOCK_TIMEOUT_S, is_postgres, pg_advisory_lock, redact

    if is_postgres(uri):
        with pg_advisory_lock(uri, "ragrig-mlflow-store"):
            yield
        return
    db = sqlite_path(uri)
    if db is None:
        yield
        return
    import fcntl

    lock = db.with_name(db.name + ".lock")
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
        fh = open(lock, "a")  # noqa: SIM115 (closed below, after the lock is released)
    except OSError as exc:
        raise ServiceError(
            f"MLflow tracking store {redact(uri)}: cannot create {lock} ({exc.strerror}): the "
            "store's folder is not writable"
        ) from None
    with fh:
        bound = LOCK_TIMEOUT_S if timeout_s is None else timeout_s
        deadline, pause = time.monotonic() + bound, 0.05
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ServiceError(
                        f"MLflow tracking store {redact(uri)}: another process held {lock} for "
                        f"{bound:g} s (report.mlflow.lock_timeout_s)"
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 1.0)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def preload() -> threading.Thread:
    """Import MLflow's client and its sqlite store in a background thread, so that the import
    (most of the logging's cost: about 2-3 s) overlaps the report's own reading and computing.
    Whatever fails here fails again, with its error, when the run is logged."""

    def work() -> None:
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
        with contextlib.suppress(Exception):
            import mlflow.store.tracking.sqlalchemy_store  # noqa: F401
            from mlflow.tracking import MlflowClient  # noqa: F401

    thread = threading.Thread(target=work, name="mlflow-preload", daemon=True)
    thread.start()
    return thread


# MLflow 3 opens an experiment in its GenAI view unless it is tagged for model development
# (the UI's "Machine learning" kind): ragrig's runs are compared in the runs table.
TAG_EXPERIMENT_KIND = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"


def ensure_experiment(
    uri: str,
    experiment: str,
    client: Any = None,
    artifacts: str | None = None,
    lock_timeout_s: float | None = None,
) -> str:
    """Create the store (schema) and the experiment once, with an absolute artifact location
    (`artifacts`, e.g. s3://bucket/prefix, when configured) and the model-development kind
    (also set on an existing experiment that lacks it); return the experiment id. Safe to call
    from parallel processes."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow.tracking import MlflowClient

    from ragrig.tracking.stores import sqlalchemy_uri, store_errors

    uri = sqlalchemy_uri(uri)
    with store_errors(uri), store_lock(uri, lock_timeout_s):
        client = client or MlflowClient(tracking_uri=uri)
        found = client.get_experiment_by_name(experiment)
        if found is None:
            try:
                return client.create_experiment(
                    experiment,
                    artifact_location=artifact_location(uri, artifacts),
                    tags={TAG_EXPERIMENT_KIND: EXPERIMENT_KIND},
                )
            except Exception:
                # through a tracking server no lock spans processes: another one created it
                # between the lookup and the creation (the server answers with its error)
                found = client.get_experiment_by_name(experiment)
                if found is None:
                    raise
        if found.tags.get(TAG_EXPERIMENT_KIND) != EXPERIMENT_KIND:
            client.set_experiment_tag(found.experiment_id, TAG_EXPERIMENT_KIND, EXPERIMENT_KIND)
        return found.experiment_id


def fail_abandoned_runs(uri: str, experiment_id: str, client: Any = None) -> list[str]:
    """Mark FAILED every RUNNING run of this experiment that a process on this host started and
    that process is gone (killed while logging); return their run ids."""
    from mlflow.tracking import MlflowClient

    client = client or MlflowClient(tracking_uri=uri)
    host = socket.gethostname()
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"attributes.status = 'RUNNING' and tags.`{TAG_HOST}` = '{host}'",
        max_results=1000,
    )
    failed = []
    for run in runs:
        pid = run.data.tags.get(TAG_PID, "")
        if pid.isdigit() and not pid_alive(int(pid)):
            client.set_tag(
                run.info.run_id, TAG_FAILURE, f"process {pid} ended before the run was complete"
            )
            client.set_terminated(run.info.run_id, status="FAILED")
            failed.append(run.info.run_id)
    return failed


def update_view(client: Any, experiment_id: str, contents: RunContents) -> None:
    """Write the runs-table views this run belongs to (default columns: headline metrics and the
    swept or changed params), keeping the param columns earlier runs added; a tag is written
    only when it changes. Through a tracking server (no lock across processes) two runs writing
    the same tag at once can collide (the store inserts it twice): read again and retry."""
    import time

    for attempt in range(VIEW_ATTEMPTS):
        try:
            with store_lock(client.tracking_uri):
                _write_views(client, experiment_id, contents)
            return
        except Exception:
            if attempt == VIEW_ATTEMPTS - 1:
                raise
            time.sleep(0.2 * (attempt + 1))


VIEW_ATTEMPTS = 5


def _write_views(client: Any, experiment_id: str, contents: RunContents) -> None:
    tags = client.get_experiment(experiment_id).tags
    for key in contents.view_keys:
        tag = VIEW_TAG_PREFIX + key
        current = tags.get(tag)
        try:
            previous = json.loads(current) if current else None
        except json.JSONDecodeError:
            previous = None
        value = json.dumps(view_state(list(contents.metrics), contents.view_params, previous))
        if value != current:
            client.set_experiment_tag(experiment_id, tag, value)


def runs_table_url(base_url: str, experiment_id: str, view_key: str = DEFAULT_VIEW) -> str:
    """The MLflow UI's runs table of an experiment in its model-development view, opened on a
    view (default columns). The workflowType parameter is what MLflow 3.17's UI reads to leave
    its GenAI view; the experiment tag alone is not."""
    return (
        f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs"
        f"?workflowType=machine_learning&viewStateShareKey={view_key}"
    )


def _write_tables(tables: dict[str, Any], folder: Path) -> None:
    """Tables in the JSON layout `mlflow.log_table` writes (pandas orient=split), which the UI
    renders as a table and `mlflow.load_table` reads back."""
    for name, frame in tables.items():
        frame.to_json(folder / name, orient="split", index=False, date_format="iso")


def log_run(
    uri: str,
    experiment: str,
    params: dict[str, Any],
    metrics: dict[str, Any],
    artifacts: list[Path],
    cwd: Path,
    *,
    answers: Any = None,
    environ: dict[str, str] | None = None,
    artifacts_location: str | None = None,
    tags: dict[str, str] | None = None,
    traces: list[dict[str, Any]] | None = None,
    lock_timeout_s: float | None = None,
) -> str:
    """Log one run; return its run id. The run ends FINISHED only when params, metrics and
    artifacts are all logged; an exception or SIGINT/SIGTERM on the way ends it FAILED.
    A sweep point ($RAGRIG_SWEEP_PARENT_RUN_ID, $RAGRIG_SWEEP_POINT) is a child run."""
    contents = build_contents(
        params,
        metrics,
        cwd,
        artifacts=artifacts,
        answers=answers,
        environ=environ,
        tags=tags,
        traces=traces,
    )
    return log_contents(uri, experiment, contents, artifacts_location, lock_timeout_s)


def log_contents(
    uri: str,
    experiment: str,
    contents: RunContents,
    artifacts_location: str | None = None,
    lock_timeout_s: float | None = None,
) -> str:
    """One run in few store calls: create (name and tags), one batch of params and metrics,
    one folder of artifacts, end. A store that fails (read-only, not a database, locked past
    `lock_timeout_s`, unreachable) raises ServiceError with one line naming it."""
    from ragrig.tracking.stores import (
        LOCK_TIMEOUT_S,
        check_file_store,
        sqlalchemy_uri,
        store_errors,
        wait_for_sqlite,
    )

    uri = sqlalchemy_uri(uri)
    bound = LOCK_TIMEOUT_S if lock_timeout_s is None else lock_timeout_s
    # a locked sqlite store is waited for here, within the bound; MLflow's own wait is 20 s a
    # statement, each, and ends in a traceback
    check_file_store(uri)
    wait_for_sqlite(uri, bound)
    with store_errors(uri):
        return _log_contents(uri, experiment, contents, artifacts_location, bound)


def _log_contents(
    uri: str, experiment: str, contents: RunContents, artifacts_location: str | None, bound: float
) -> str:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    import tempfile
    import time

    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    with store_lock(uri, bound):  # opening a store that does not exist yet creates its schema
        client = MlflowClient(tracking_uri=uri)
    experiment_id = ensure_experiment(uri, experiment, client, artifacts_location, bound)
    fail_abandoned_runs(uri, experiment_id, client)
    tags = {**contents.tags, TAG_PID: str(os.getpid()), TAG_HOST: socket.gethostname()}
    run_id = None
    with sigterm_raises():
        try:
            run = client.create_run(experiment_id, run_name=contents.name, tags=tags)
            run_id = run.info.run_id
            now = int(time.time() * 1000)
            client.log_batch(
                run_id,
                metrics=[Metric(k, v, now, 0) for k, v in contents.metrics.items()],
                params=[Param(k, v) for k, v in sorted(contents.params.items())],
                synchronous=True,
            )
            with tempfile.TemporaryDirectory(prefix="ragrig-mlflow-") as tmp:
                folder = Path(tmp)
                for path in contents.artifacts:
                    if path.exists():
                        _stage(path, folder / path.name)
                _write_tables(contents.tables, folder)
                client.log_artifacts(run_id, str(folder))
            update_view(client, experiment_id, contents)
            log_traces(uri, experiment_id, run_id, contents.traces, client)
        except BaseException as exc:
            if run_id is not None:
                error = f"{type(exc).__name__}: {exc}"[-4000:]
                with contextlib.suppress(Exception):
                    client.set_tag(run_id, TAG_ERROR, error)
                client.set_terminated(run_id, status="FAILED")
            raise
        client.set_terminated(run_id, status="FINISHED")
    return run_id


def log_traces(
    uri: str, experiment_id: str, run_id: str, traces: list[dict[str, Any]], client: Any
) -> None:
    """Each answer as an MLflow trace of the run (ragrig.tracking.contents.answer_traces),
    written before the next, with the judge's decision as feedback named `faithful`: the
    MLflow UI shows them under the run's traces, where a person can add their own."""
    if not traces:
        return
    # written as they end: MLflow's background exporter polls its queue each second, and each
    # flush (ours, and the one when the tracking URI is set back) waited out a poll (2-3 s of
    # a report's 13 s on the fixture)
    os.environ.setdefault("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")
    import mlflow

    # the tracer exports to the process's tracking URI, not the client's
    before = mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else None
    mlflow.set_tracking_uri(uri)
    try:
        _log_traces(uri, experiment_id, run_id, traces, client)
    finally:
        mlflow.set_tracking_uri(before)


def _log_traces(uri: str, experiment_id: str, run_id: str, traces: list, client: Any) -> None:
    import mlflow
    from mlflow.entities import AssessmentSource, Feedback
    from mlflow.tracing.client import TracingClient

    from ragrig.tracking.contents import FEEDBACK_NAME

    ids = []
    for t in traces:
        span = client.start_trace(
            "answer",
            span_type="CHAIN",
            inputs=t["inputs"],
            tags=t["tags"],
            experiment_id=experiment_id,
            run_id=run_id,
        )
        client.end_trace(
            span.trace_id, outputs=t["outputs"], status="OK" if t["status"] == "ok" else "ERROR"
        )
        ids.append(span.trace_id)
    # traces may be exported in the background: every one stored before its feedback
    mlflow.flush_trace_async_logging()
    tracing = TracingClient(tracking_uri=uri)
    judge = AssessmentSource(source_type="LLM_JUDGE", source_id="ragrig judge")
    for trace_id, t in zip(ids, traces, strict=True):
        if t["judged_faithful"] is not None:
            tracing.log_assessment(
                trace_id,
                Feedback(
                    name=FEEDBACK_NAME,
                    value=t["judged_faithful"],
                    source=judge,
                    rationale=t["rationale"] or None,
                    # the deciding claim, verdict, evidence and failure mode, field by field
                    metadata=t.get("metadata") or None,
                ),
            )


_HUMAN_VALUES = {
    True: "faithful",
    False: "unfaithful",
    "faithful": "faithful",
    "unfaithful": "unfaithful",
    "yes": "faithful",
    "no": "unfaithful",
}


def human_feedback(uri: str, experiment: str, run_id: str | None = None) -> dict[str, Any]:
    """People's `faithful` feedback on the answer traces of one run (the experiment's latest
    finished run unless `run_id`), as labels-file lines (ragrig.dataset.labels): the latest human
    feedback per trace. A value that is not yes/no or faithful/unfaithful raises, naming it."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow.tracking import MlflowClient

    from ragrig.core.errors import DataValidationError
    from ragrig.tracking.contents import FEEDBACK_NAME, TAG_ANSWER_SHA, TAG_QID
    from ragrig.tracking.stores import sqlalchemy_uri

    uri = sqlalchemy_uri(uri)
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        raise DataValidationError(f"{uri}: no experiment {experiment!r}")
    if run_id is None:
        runs = client.search_runs(
            [exp.experiment_id],
            "attributes.status = 'FINISHED'",
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
        if not runs:
            raise DataValidationError(f"{uri}: experiment {experiment!r} has no finished run")
        run_id = runs[0].info.run_id
    lines, traces, token = [], 0, None
    while True:
        page = client.search_traces(
            locations=[exp.experiment_id],
            run_id=run_id,
            include_spans=False,
            max_results=500,
            page_token=token,
        )
        for t in page:
            traces += 1
            human = [
                a
                for a in t.info.assessments or []
                if a.name == FEEDBACK_NAME
                and str(a.source.source_type) == "HUMAN"
                and a.valid is not False
            ]
            if not human:
                continue
            last = max(human, key=lambda a: a.last_update_time_ms or a.create_time_ms or 0)
            value = last.value.lower() if isinstance(last.value, str) else last.value
            if value not in _HUMAN_VALUES:
                raise DataValidationError(
                    f"trace {t.info.trace_id} (question {t.info.tags.get(TAG_QID)!r}): feedback "
                    f"{FEEDBACK_NAME!r} is {last.value!r}, not yes/no or faithful/unfaithful"
                )
            lines.append(
                {
                    "qid": t.info.tags.get(TAG_QID),
                    "answer_sha256": t.info.tags.get(TAG_ANSWER_SHA),
                    "rating": _HUMAN_VALUES[value],
                    "note": last.rationale or "",
                }
            )
        token = page.token
        if not token:
            break
    lines.sort(key=lambda x: str(x["qid"]))
    return {"run_id": run_id, "traces": traces, "labels": lines}


def _stage(src: Path, dest: Path) -> None:
    """Hard link (no copy) where the file system allows it, else copy."""
    try:
        os.link(src, dest)
    except OSError:
        shutil.copy2(src, dest)
