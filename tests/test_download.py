"""ensure_dataset's 'no local copy' path against a real local HTTP server (zip and tar.gz,
slow, truncated, corrupt and hostile archives, interrupted downloads), each bounded in time."""

from __future__ import annotations

import functools
import hashlib
import io
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
import yaml

from ragrig.core.errors import DataValidationError
from ragrig.dataset.beir import load_beir
from ragrig.dataset.config import Checksum, Download
from ragrig.dataset.download import ensure_dataset

from ._http import Route, serve

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
    with pytest.raises(DataValidationError) as exc:
        ensure_dataset(root, _spec(served, archive_root="scifact"))
    assert str(exc.value) == (
        f"archive from {served.url} has no folder 'scifact' (top level: ['tinyset'])"
    )
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
    cmd = [sys.executable, "-m", "ragrig", "data", "ensure", "--params", str(params_path)]
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


# --- deadline, truncation, corrupt and hostile archives, cleanup on every exit -----------------


def _zip_of_fixture(prefix: str = "tinyset") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(FIXTURE.rglob("*")):
            if path.is_file():
                zf.write(path, f"{prefix}/{path.relative_to(FIXTURE).as_posix()}")
    return buf.getvalue()


def _targz_of_fixture(prefix: str = "tinyset", extra=None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        tf.add(FIXTURE, arcname=prefix, filter=_plain)
        for member, data in extra or []:
            tf.addfile(member, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _plain(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _spec_for(url: str, blob: bytes, deadline_s: float = 60.0, read_timeout_s: float = 10.0):
    return Download(
        url=url,
        checksum=Checksum(algo="sha256", value=hashlib.sha256(blob).hexdigest()),
        archive_root="tinyset",
        deadline_s=deadline_s,
        read_timeout_s=read_timeout_s,
    )


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir()) if parent.exists() else []


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


def test_tar_gz_archive_downloads_and_unpacks(tmp_path: Path, no_proxy: None) -> None:
    blob = _targz_of_fixture()
    root = tmp_path / "datasets" / "tiny"
    with serve({"/tinyset.tar.gz": Route(blob)}) as base:
        assert ensure_dataset(root, _spec_for(f"{base}/tinyset.tar.gz", blob)) == "downloaded"
    data = load_beir(root, "test")
    assert len(data.corpus) == 20 and len(data.queries) == 9
    assert _leftovers(root.parent) == ["tiny"]


def test_trickling_server_hits_the_overall_deadline(tmp_path: Path, no_proxy: None) -> None:
    blob = _zip_of_fixture()
    root = tmp_path / "datasets" / "tiny"
    with serve({"/slow.zip": Route(blob, mode="trickle", interval=0.1)}) as base:
        url = f"{base}/slow.zip"
        t0 = time.monotonic()
        with pytest.raises(DataValidationError) as exc:
            ensure_dataset(root, _spec_for(url, blob, deadline_s=1.5, read_timeout_s=10))
        elapsed = time.monotonic() - t0
    msg = str(exc.value)
    assert msg.startswith(f"download of {url} failed: not finished within the 1.5 s deadline (")
    assert 1.4 < elapsed < 4.0  # each byte arrives well within the 10 s read timeout
    assert _leftovers(root.parent) == []


def test_deadline_holds_off_the_main_thread(tmp_path: Path, no_proxy: None) -> None:
    """No SIGALRM in a worker thread: the deadline is checked between reads instead."""
    blob = _zip_of_fixture()
    root = tmp_path / "datasets" / "tiny"
    outcome: dict[str, object] = {}

    def worker(url: str) -> None:
        t0 = time.monotonic()
        try:
            ensure_dataset(root, _spec_for(url, blob, deadline_s=1.0, read_timeout_s=10))
        except DataValidationError as exc:
            outcome["error"] = str(exc)
        outcome["elapsed"] = time.monotonic() - t0

    with serve({"/slow.zip": Route(blob, mode="trickle", interval=0.1)}) as base:
        thread = threading.Thread(target=worker, args=(f"{base}/slow.zip",))
        thread.start()
        thread.join(timeout=15)
    assert not thread.is_alive()
    assert "not finished within the 1 s deadline" in str(outcome["error"])
    assert 0.9 < float(outcome["elapsed"]) < 3.0  # type: ignore[arg-type]
    assert _leftovers(root.parent) == []


def test_trickled_headers_hit_the_deadline(tmp_path: Path, no_proxy: None) -> None:
    root = tmp_path / "datasets" / "tiny"
    with serve({"/x.zip": Route(b"", mode="stall_headers", interval=0.1)}) as base:
        url = f"{base}/x.zip"
        t0 = time.monotonic()
        with pytest.raises(DataValidationError, match="deadline"):
            ensure_dataset(root, _spec_for(url, b"x", deadline_s=1.0, read_timeout_s=10))
        assert time.monotonic() - t0 < 3.0
    assert _leftovers(root.parent) == []


def test_truncated_transfer_names_url_and_bytes(tmp_path: Path, no_proxy: None) -> None:
    blob = _zip_of_fixture()
    root = tmp_path / "datasets" / "tiny"
    with serve({"/cut.zip": Route(blob, mode="truncate")}) as base:
        url = f"{base}/cut.zip"
        with pytest.raises(DataValidationError) as exc:
            ensure_dataset(root, _spec_for(url, blob))
    msg = str(exc.value)
    assert msg.startswith(f"download of {url} failed: ")
    assert f"truncated transfer: received {len(blob) // 5} of {len(blob)} bytes" in msg
    assert "\n" not in msg
    assert _leftovers(root.parent) == []


def test_corrupt_zip_with_matching_checksum(tmp_path: Path, no_proxy: None) -> None:
    good = _zip_of_fixture()
    blob = good[:200] + bytes(len(good) - 200)  # local headers intact, the rest zeroed
    root = tmp_path / "datasets" / "tiny"
    with serve({"/bad.zip": Route(blob)}) as base:
        url = f"{base}/bad.zip"
        with pytest.raises(DataValidationError) as exc:
            ensure_dataset(root, _spec_for(url, blob))
    assert str(exc.value).startswith(f"archive from {url} is corrupt: BadZipFile")
    assert _leftovers(root.parent) == []


@pytest.mark.parametrize(
    ("member", "expected"),
    [
        (("tinyset/../../escaped.txt", tarfile.REGTYPE, ""), "escapes the folder"),
        (("/tmp/ragrig-abs-escape.txt", tarfile.REGTYPE, ""), "escapes the folder"),
        (
            ("tinyset/link", tarfile.SYMTYPE, "../../.."),
            "is a symbolic link to '../../..' outside the folder",
        ),
        (("tinyset/etc", tarfile.SYMTYPE, "/etc"), "is a symbolic link to '/etc' outside"),
        (
            ("tinyset/hard", tarfile.LNKTYPE, "../outside.txt"),
            "is a hard link to '../outside.txt' outside the folder",
        ),
        (("tinyset/fifo", tarfile.FIFOTYPE, ""), "is not a regular file or folder"),
    ],
)
def test_hostile_tar_members_are_refused(
    tmp_path: Path, no_proxy: None, member: tuple[str, bytes, str], expected: str
) -> None:
    name, kind, linkname = member
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    data = b"owned\n" if kind == tarfile.REGTYPE else None
    info.size = len(data) if data else 0
    blob = _targz_of_fixture(extra=[(info, data)])
    root = tmp_path / "sub" / "datasets" / "tiny"
    with serve({"/evil.tar.gz": Route(blob)}) as base:
        url = f"{base}/evil.tar.gz"
        with pytest.raises(DataValidationError) as exc:
            ensure_dataset(root, _spec_for(url, blob))
    assert str(exc.value).startswith(f"archive from {url}: member {name!r} ")
    assert expected in str(exc.value)
    assert _leftovers(root.parent) == []
    assert not (tmp_path / "escaped.txt").exists()
    assert not Path("/tmp/ragrig-abs-escape.txt").exists()


def test_zip_slip_is_refused(tmp_path: Path, no_proxy: None) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("tinyset/corpus.jsonl", "{}\n")
        zf.writestr("tinyset/../../slipped.txt", "owned\n")
    blob = buf.getvalue()
    root = tmp_path / "sub" / "datasets" / "tiny"
    with serve({"/slip.zip": Route(blob)}) as base:
        url = f"{base}/slip.zip"
        with pytest.raises(DataValidationError) as exc:
            ensure_dataset(root, _spec_for(url, blob))
    assert str(exc.value) == (
        f"archive from {url}: member 'tinyset/../../slipped.txt' escapes the folder"
    )
    assert not (tmp_path / "slipped.txt").exists()
    assert _leftovers(root.parent) == []


_DOWNLOAD_SCRIPT = """
import sys
from pathlib import Path
from ragrig.dataset.config import Checksum, Download
from ragrig.dataset.download import ensure_dataset
spec = Download(url=sys.argv[2], checksum=Checksum(algo="sha256", value="0" * 64),
                archive_root="tinyset", deadline_s=60, read_timeout_s=30)
ensure_dataset(Path(sys.argv[1]), spec)
"""


def _start_download(root: Path, url: str) -> subprocess.Popen[str]:
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "PYTHONPATH": str(PROJECT / "src")}
    return subprocess.Popen(
        [sys.executable, "-c", _DOWNLOAD_SCRIPT, str(root), url],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # SIGINT as a terminal sends it: a suite started in the background by a shell without
        # job control inherits SIGINT ignored, and Python then never turns it into
        # KeyboardInterrupt
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _wait_for_temp(root: Path, proc: subprocess.Popen[str]) -> Path:
    t0 = time.monotonic()
    while time.monotonic() - t0 < 30:
        found = list(root.parent.glob(f".{root.name}.dl-*"))
        if found and (found[0] / "archive").exists():
            return found[0]
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the download never started")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_interrupted_download_leaves_nothing(tmp_path: Path, sig: signal.Signals) -> None:
    blob = _zip_of_fixture()
    root = tmp_path / "datasets" / "tiny"
    root.parent.mkdir(parents=True)
    with serve({"/slow.zip": Route(blob, mode="trickle", interval=0.05)}) as base:
        proc = _start_download(root, f"{base}/slow.zip")
        _wait_for_temp(root, proc)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode != 0
    if sig == signal.SIGTERM:
        assert proc.returncode == -signal.SIGTERM  # cleaned up, then died of the signal
    assert _leftovers(root.parent) == []


def test_stale_temp_of_a_killed_run_is_removed_next_time(
    tmp_path: Path, served: Served, no_proxy: None
) -> None:
    blob = _zip_of_fixture()
    root = tmp_path / "datasets" / "tiny"
    root.parent.mkdir(parents=True)
    with serve({"/slow.zip": Route(blob, mode="trickle", interval=0.05)}) as base:
        proc = _start_download(root, f"{base}/slow.zip")
        stale = _wait_for_temp(root, proc)
        proc.kill()  # SIGKILL: no cleanup possible
        proc.communicate(timeout=20)
    assert stale.exists()
    # a concurrent download's folder (its owner alive) is left alone
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = root.parent / f".{root.name}.dl-live"
        live.mkdir()
        (live / "owner.pid").write_text(str(sleeper.pid), encoding="utf-8")
        assert ensure_dataset(root, _spec(served)) == "downloaded"
        assert _leftovers(root.parent) == [live.name, "tiny"]
    finally:
        sleeper.kill()
        sleeper.wait(timeout=10)
    assert len(load_beir(root, "test").corpus) == 20


def _cli_ensure(tmp_path: Path, download: dict) -> subprocess.CompletedProcess[str]:
    params = yaml.safe_load((PROJECT / "params.yaml").read_text(encoding="utf-8"))
    params["dataset"] = {
        "name": "tiny",
        "root": str(tmp_path / "datasets" / "tiny"),
        "split": "test",
        "download": download,
        "claims": None,
    }
    params_path = tmp_path / "params.yaml"
    params_path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    cmd = [sys.executable, "-m", "ragrig", "data", "ensure", "--params", str(params_path)]
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "PYTHONPATH": str(PROJECT / "src")}
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("route", "expected"),
    [
        (Route(b"", mode="status", status=404), "failed: 404 Client Error"),
        ("truncate", "failed: truncated transfer: received "),
        ("trickle", "failed: not finished within the 1 s deadline"),
    ],
)
def test_cli_prints_one_line_naming_the_url(
    tmp_path: Path, route: Route | str, expected: str
) -> None:
    blob = _zip_of_fixture()
    if isinstance(route, str):
        route = Route(blob, mode=route, interval=0.1)
    with serve({"/set.zip": route}) as base:
        url = f"{base}/set.zip"
        proc = _cli_ensure(
            tmp_path,
            {
                "url": url,
                "checksum": {"algo": "sha256", "value": hashlib.sha256(blob).hexdigest()},
                "archive_root": "tinyset",
                "deadline_s": 1,
                "read_timeout_s": 10,
            },
        )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"ragrig: error: download of {url} ")
    assert expected in lines[0]
    assert _leftovers(tmp_path / "datasets") == []


def test_deadline_alarm_gives_back_an_outer_timer(tmp_path: Path, served: Served) -> None:
    def outer_handler(signum, frame):
        raise AssertionError("the outer timer fired during the test")

    previous = signal.signal(signal.SIGALRM, outer_handler)
    signal.setitimer(signal.ITIMER_REAL, 30)
    try:
        assert ensure_dataset(tmp_path / "datasets" / "tiny", _spec(served)) == "downloaded"
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 20 < left <= 30
        assert signal.getsignal(signal.SIGALRM) is outer_handler
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
