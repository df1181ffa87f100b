"""ensure_dataset's 'no local copy' path against a real local HTTP server serving a zip."""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
import sys
import threading
import zipfile
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
import yaml

from ragrig.data.beir import load_beir
from ragrig.data.config import Checksum, Download
from ragrig.data.download import ensure_dataset
from ragrig.errors import DataValidationError

PROJECT = Path(__file__).resolve().parents[1]
FIXTURE = PROJECT / "tests" / "fixtures" / "tiny_beir"


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@dataclass
class Served:
    url: str
    sha256: str
    md5: str
    server: ThreadingHTTPServer
    thread: threading.Thread
    stopped: bool = False

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.server.shutdown()
            self.server.server_close()
            self.thread.join(timeout=10)


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """tinyset.zip (folder `tinyset/` holding the tiny fixture) served on 127.0.0.1."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    www = tmp_path / "www"
    www.mkdir()
    archive = www / "tinyset.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(FIXTURE.rglob("*")):
            if path.is_file():
                zf.write(path, f"tinyset/{path.relative_to(FIXTURE).as_posix()}")
    blob = archive.read_bytes()
    handler = functools.partial(_QuietHandler, directory=str(www))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    port = server.server_address[1]
    srv = Served(
        url=f"http://127.0.0.1:{port}/tinyset.zip",
        sha256=hashlib.sha256(blob).hexdigest(),
        md5=hashlib.md5(blob).hexdigest(),
        server=server,
        thread=thread,
    )
    yield srv
    srv.stop()


def _spec(
    served: Served,
    algo: str = "sha256",
    value: str | None = None,
    archive_root: str | None = "tinyset",
) -> Download:
    digest = value if value is not None else getattr(served, algo)
    return Download(
        url=served.url, checksum=Checksum(algo=algo, value=digest), archive_root=archive_root
    )


def test_download_verifies_and_unpacks(tmp_path: Path, served: Served) -> None:
    root = tmp_path / "datasets" / "tiny"
    assert ensure_dataset(root, _spec(served)) == "downloaded"
    data = load_beir(root, "test")
    assert len(data.corpus) == 20
    assert len(data.queries) == 9
    assert (root / "original" / "claims_dev.jsonl").read_bytes() == (
        FIXTURE / "original" / "claims_dev.jsonl"
    ).read_bytes()
    assert sorted(p.name for p in root.parent.iterdir()) == ["tiny"]  # no temp folder left


def test_second_call_is_present_without_network(tmp_path: Path, served: Served) -> None:
    root = tmp_path / "datasets" / "tiny"
    assert ensure_dataset(root, _spec(served)) == "downloaded"
    served.stop()
    with pytest.raises(requests.ConnectionError):
        requests.get(served.url, timeout=2)
    assert ensure_dataset(root, _spec(served)) == "present"
    assert len(load_beir(root, "test").corpus) == 20


@pytest.mark.parametrize("algo", ["sha256", "md5"])
def test_wrong_checksum_leaves_nothing(tmp_path: Path, served: Served, algo: str) -> None:
    root = tmp_path / "datasets" / "tiny"
    wrong = "0" * len(getattr(served, algo))
    with pytest.raises(DataValidationError) as exc:
        ensure_dataset(root, _spec(served, algo=algo, value=wrong))
    msg = str(exc.value)
    assert "checksum mismatch" in msg
    assert f"{algo} {getattr(served, algo)}, expected {wrong}" in msg
    assert not root.exists()
    assert list(root.parent.iterdir()) == []


def test_md5_checksum_is_verified(tmp_path: Path, served: Served) -> None:
    root = tmp_path / "datasets" / "tiny"
    assert ensure_dataset(root, _spec(served, algo="md5")) == "downloaded"
    assert len(load_beir(root, "test").corpus) == 20


def test_checksum_of_the_other_algorithm_is_rejected(tmp_path: Path, served: Served) -> None:
    root = tmp_path / "datasets" / "tiny"
    with pytest.raises(DataValidationError, match="checksum"):
        ensure_dataset(root, _spec(served, algo="md5", value=served.sha256))
    assert not root.exists()


def test_uppercase_checksum_is_accepted(tmp_path: Path, served: Served) -> None:
    root = tmp_path / "datasets" / "tiny"
    assert ensure_dataset(root, _spec(served, value=served.sha256.upper())) == "downloaded"


def test_missing_archive_root(tmp_path: Path, served: Served) -> None:
    root = tmp_path / "datasets" / "tiny"
    with pytest.raises(DataValidationError, match="archive has no folder 'scifact'"):
        ensure_dataset(root, _spec(served, archive_root="scifact"))
    assert not root.exists()
    assert list(root.parent.iterdir()) == []


def test_no_copy_and_no_download_configured(tmp_path: Path) -> None:
    root = tmp_path / "datasets" / "tiny"
    with pytest.raises(DataValidationError, match="no download is configured"):
        ensure_dataset(root, None)
    assert not root.exists()


def test_cli_data_ensure(tmp_path: Path, served: Served) -> None:
    root = tmp_path / "datasets" / "tiny"
    params = yaml.safe_load((PROJECT / "params.yaml").read_text(encoding="utf-8"))
    params["dataset"] = {
        "name": "tiny",
        "root": str(root),
        "split": "test",
        "download": {
            "url": served.url,
            "checksum": {"algo": "sha256", "value": served.sha256},
            "archive_root": "tinyset",
        },
        "claims": {"files": ["original/claims_dev.jsonl"]},
    }
    params_path = tmp_path / "params.yaml"
    params_path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    cmd = [sys.executable, "-m", "ragrig.cli", "data", "ensure", "--params", str(params_path)]
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost"}

    first = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert (
        f"dataset tiny downloaded at {root}: 20 documents, 9 test queries, 11 judgments"
        in first.stdout
    )

    served.stop()
    again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert f"dataset tiny present at {root}: 20 documents" in again.stdout
