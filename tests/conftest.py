"""Shared fixtures: project paths, reference examples, and a throwaway copy of the project."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .schedule import make_scheduler, rank

PROJECT = Path(__file__).resolve().parents[1]
SHARED = PROJECT.parent / "shared"
FIXTURE = PROJECT / "tests" / "fixtures" / "tiny_beir"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def reference() -> dict:
    path = SHARED / "reference_examples.json"
    if not path.exists():
        pytest.skip("../shared/reference_examples.json not present")
    return json.loads(path.read_text())


def project_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        MLFLOW_DISABLE_TELEMETRY="true",
        DO_NOT_TRACK="1",
        DVC_NO_ANALYTICS="1",
        GIT_AUTHOR_NAME="ragrig-test",
        GIT_AUTHOR_EMAIL="test@example.invalid",
        GIT_COMMITTER_NAME="ragrig-test",
        GIT_COMMITTER_EMAIL="test@example.invalid",
    )
    env.pop("RAGRIG_MLFLOW_URI", None)
    env.pop("RAGRIG_STAGE_LOG", None)
    env.update(extra or {})
    return env


def sh(
    cmd: list[str], cwd: Path, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env or project_env(), capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    return proc


@contextlib.contextmanager
def warm_server(modules: tuple[str, ...] | None = None, log: Path | None = None):
    """A warm stage server (ragrig.runtime.warm) in its own process, with project_env()'s
    environment, preloading `modules` (default: its own list), its output (a line per stage it
    refused) in `log`; yields its socket's path, which appears once the libraries are loaded."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="ragrig-warm-"))  # a short path: sockets' limit
    sock = folder / "warm.sock"
    env = project_env()
    env.pop("RAGRIG_WARM_SOCKET", None)
    code = "import sys; from ragrig.runtime.warm import serve; serve(sys.argv[1]"
    code += f", {tuple(modules)!r})" if modules is not None else ")"
    with open(log or folder / "server.log", "w") as log:
        proc = subprocess.Popen(
            [str(BIN / "python"), "-c", code, str(sock)],
            env=env,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    try:
        yield sock
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


# `make test-all` (RAGRIG_TEST_WARM=1): stages run in forks of one warm server per test process,
# which every subprocess finds through RAGRIG_WARM_SOCKET. A stage whose environment or
# interpreter differs from the server's (another PYTHONHASHSEED in tests/test_determinism.py, a
# fresh clone's own .venv path) runs in its own process, as every stage does in `make test`.
@pytest.fixture(scope="session", autouse=True)
def warm_stages(tmp_path_factory):
    if os.environ.get("RAGRIG_TEST_WARM") != "1":
        yield None
        return
    with warm_server(log=tmp_path_factory.getbasetemp() / "warm-server.log") as sock:
        # set at once: a stage that starts before the server listens runs in its own process
        os.environ["RAGRIG_WARM_SOCKET"] = str(sock)
        try:
            yield sock
        finally:
            os.environ.pop("RAGRIG_WARM_SOCKET", None)


def copy_project(dest: Path) -> Path:
    """Copy the git-tracked files (what a fresh clone holds) into `dest` and make it a repo."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for rel in filter(None, files):
        src = PROJECT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    (dest / "dvc.lock").unlink(missing_ok=True)
    sh(["git", "init", "-q", "-b", "main"], dest)
    sh(["git", "add", "-A"], dest)
    sh(["git", "commit", "-qm", "copy"], dest)
    return dest


# The one fixture run of a session: the tiny BEIR fixture with the extractive generator.
TINY = ["dataset=tiny", "generate=extractive"]


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """The project after one cold `dvc repro` of the fixture (TINY), shared by every end-to-end
    test of the session: read it, or work on a copy (copy_run). A test that changes it in place
    (tests/test_e2e.py) puts its params back and reruns, so the next reader finds the default
    outputs, restored from the run-cache."""
    ws = copy_project(tmp_path_factory.mktemp("tiny-run"))
    python = str(BIN / "python")
    sh([python, "-m", "ragrig", "init-dvc"], ws)
    sh([python, "-m", "ragrig", "params", "write", *TINY], ws)
    sh(["git", "add", "-A"], ws)
    sh(["git", "commit", "-qm", "tiny params"], ws)
    sh(["dvc", "repro"], ws)
    return ws


def copy_run(run: Path, dest: Path) -> Path:
    """A copy of a finished project (its outputs, dvc.lock, DVC cache and run-cache, git), so
    that a changed parameter reruns only what depends on it. The MLflow store is left out: its
    experiment's artifact location is the original's absolute path, so the copy starts its own."""
    shutil.copytree(run, dest, symlinks=True)
    for name in ("mlflow.db", "mlflow.db.lock", "mlartifacts", "mlruns"):
        path = dest / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    return dest


def write_tiny_stage_inputs(folder: Path):
    """parse/queries.parquet and chunk/chunks.parquet of the tiny fixture (parse=beir,
    chunk=document) under `folder`, as the embed stage reads them; the chunk table."""
    from ragrig.chunk import chunk_documents, make_chunker
    from ragrig.core.config import validate_section
    from ragrig.core.io import write_table
    from ragrig.parse import make_parser

    ds = validate_section("dataset", {"name": "tiny", "root": str(FIXTURE), "split": "test"})
    parsed = make_parser(validate_section("parse", {"method": "beir"})).parse(ds)
    chunks = chunk_documents(
        parsed.documents, make_chunker(validate_section("chunk", {"method": "document"}))
    )
    write_table(chunks, folder / "chunk" / "chunks.parquet", "chunks")
    write_table(parsed.queries, folder / "parse" / "queries.parquet", "queries")
    return chunks


def pytest_collection_finish(session: pytest.Session) -> None:
    """`make test` (RAGRIG_TIER=default) stops if it collected a test of the full tier: the two
    tiers cannot silently merge again."""
    if os.environ.get("RAGRIG_TIER") != "default":
        return
    full = [item.nodeid for item in session.items if item.get_closest_marker("full")]
    if full:
        raise pytest.UsageError(
            f"the default tier collected {len(full)} test(s) marked full (first: {full[0]}); "
            "run them with make test-all"
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest modules first (tests/schedule.py); a module's tests keep their order."""
    items.sort(key=lambda item: rank(item.nodeid))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist (`make test`, `make test-all`): one module, or the modules sharing
    tiny_run, per unit of work (tests/schedule.py)."""
    return make_scheduler(config, log)
