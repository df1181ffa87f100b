"""Fetch a public BEIR archive when no local copy exists: download, verify checksum, unpack atomically.

Every failure (network, deadline, truncated transfer, checksum, corrupt or hostile archive)
raises one `DataValidationError` naming the URL. Work happens in a hidden `.<root>.dl-*` sibling
folder that is removed on every exit, SIGTERM and Ctrl-C included; one left by a killed earlier
run (SIGKILL, power loss) is removed by the next call.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import re
import shutil
import signal
import stat
import tarfile
import tempfile
import threading
import time
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from ragrig.core.errors import DataValidationError
from ragrig.dataset.config import Download
from ragrig.runtime.process import pid_alive
from ragrig.runtime.signals import Terminated, sigterm_raises

_DIGITS = re.compile(r"[0-9]+")
OWNER_FILE = "owner.pid"  # inside a temp folder: the pid of the process downloading into it


def file_digest(path: Path, algo: str) -> str:
    h = hashlib.new(algo)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class _DeadlineExceeded(BaseException):  # noqa: N818  (not an Exception: no library may catch it)
    """Raised by the alarm inside whatever read is blocking when the deadline passes."""


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """Interrupt a blocking read (even one stuck in headers) after `seconds`, on the main thread.

    Off the main thread (no signals there) the deadline is still checked between reads, each
    read waiting at most the read timeout.
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "setitimer"
    ):
        yield
        return

    def on_alarm(signum, frame):
        raise _DeadlineExceeded

    previous = signal.signal(signal.SIGALRM, on_alarm)
    t0 = time.monotonic()
    outer, _ = signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:  # someone else's timer was running: give it back what is left of it
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - t0), 0.001))


def download(url: str, dest: Path, deadline_s: float = 3600.0, read_timeout_s: float = 60.0) -> int:
    """Stream `url` to `dest` within `deadline_s` seconds overall; return the bytes received.

    A server that trickles bytes cannot stretch the transfer past the deadline (each read
    returns what has arrived, and the deadline is checked between reads). A transfer that
    ends short of its Content-Length is an error, not a short file.
    """
    import requests
    import urllib3
    from tqdm import tqdm

    received = 0
    deadline = time.monotonic() + deadline_s
    wait = min(read_timeout_s, deadline_s)

    def fail(why: str) -> DataValidationError:
        return DataValidationError(f"download of {url} failed: {why}")

    def truncated() -> str:
        return f"truncated transfer: received {received} of {total} bytes (Content-Length)"

    def late() -> DataValidationError:
        return fail(
            f"not finished within the {deadline_s:g} s deadline ({received} bytes received)"
        )

    try:
        with _alarm(deadline_s):
            try:
                resp = requests.get(url, stream=True, timeout=(wait, wait))
                resp.raise_for_status()
            except requests.RequestException as exc:
                raise fail(str(exc)) from exc
            with resp:
                encoded = resp.headers.get("content-encoding", "identity") != "identity"
                length = resp.headers.get("content-length", "")
                # ASCII digits only: str.isdigit() also takes "²", which int() refuses
                total = int(length) if _DIGITS.fullmatch(length) and not encoded else None
                name = url.rsplit("/", 1)[-1]
                with (
                    open(dest, "wb") as fh,
                    tqdm(total=total, unit="B", unit_scale=True, desc=name, disable=None) as bar,
                ):
                    while True:
                        if time.monotonic() > deadline:
                            raise late()
                        try:
                            block = resp.raw.read1(1 << 16, decode_content=True)
                        except urllib3.exceptions.ProtocolError as exc:
                            if total is not None and received < total:
                                raise fail(truncated()) from exc
                            raise fail(f"connection broken after {received} bytes ({exc})") from exc
                        except (urllib3.exceptions.HTTPError, OSError) as exc:
                            raise fail(
                                f"connection broken after {received} bytes "
                                f"({type(exc).__name__}: {exc})"
                            ) from exc
                        if not block:
                            break
                        fh.write(block)
                        received += len(block)
                        bar.update(len(block))
    except _DeadlineExceeded:
        raise late() from None
    if total is not None and received != total:
        raise fail(truncated())
    if received == 0:
        raise fail("the server sent an empty body")
    return received


def _inside(base: str, name: str) -> bool:
    """Whether archive member `name` stays inside `base` once joined and normalised."""
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return False
    joined = posixpath.normpath(posixpath.join(base, name.replace("\\", "/")))
    return joined == base or joined.startswith(base.rstrip("/") + "/")


def _unzip(archive: Path, dest: Path, url: str) -> None:
    base = dest.resolve().as_posix()
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            if not _inside(base, info.filename):
                raise DataValidationError(
                    f"archive from {url}: member {info.filename!r} escapes the folder"
                )
            if stat.S_ISLNK(info.external_attr >> 16):
                raise DataValidationError(
                    f"archive from {url}: member {info.filename!r} is a symbolic link "
                    "(links are not unpacked)"
                )
        zf.extractall(dest)


def _untar(archive: Path, dest: Path, url: str) -> None:
    base = dest.resolve().as_posix()
    with tarfile.open(archive, "r:*") as tf:
        for m in tf.getmembers():
            if not _inside(base, m.name):
                raise DataValidationError(
                    f"archive from {url}: member {m.name!r} escapes the folder"
                )
            if m.issym() or m.islnk():
                start = posixpath.dirname(m.name) if m.issym() else ""
                out = not _inside(base, posixpath.join(start, m.linkname))
                kind = "symbolic link" if m.issym() else "hard link"
                raise DataValidationError(
                    f"archive from {url}: member {m.name!r} is a {kind} to {m.linkname!r}"
                    + (" outside the folder" if out else "")
                    + " (links are not unpacked)"
                )
            if not (m.isfile() or m.isdir()):
                raise DataValidationError(
                    f"archive from {url}: member {m.name!r} is not a regular file or folder"
                )
        tf.extractall(dest, filter="data")


def unpack(archive: Path, dest: Path, url: str) -> str:
    """Unpack a zip or tar (gz, bz2, xz) archive into `dest` after checking every member stays
    inside it; return the format. A corrupt archive raises naming `url`."""
    with open(archive, "rb") as fh:
        head = fh.read(4)
    try:
        if head[:2] == b"PK":
            _unzip(archive, dest, url)
            return "zip"
        if head[:2] == b"\x1f\x8b" or tarfile.is_tarfile(archive):
            _untar(archive, dest, url)
            return "tar"
    except DataValidationError:
        raise
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise DataValidationError(
            f"archive from {url} is corrupt: {type(exc).__name__}: {exc}"
        ) from exc
    raise DataValidationError(
        f"archive from {url} is neither a zip nor a tar archive (starts with {head!r})"
    )


def remove_stale_temps(root: Path) -> list[Path]:
    """Remove `.<root>.dl-*` folders left by a killed earlier run (owner process gone)."""
    removed = []
    for tmp in sorted(root.parent.glob(f".{root.name}.dl-*")):
        try:
            pid = int((tmp / OWNER_FILE).read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            pid = None
        if pid is not None and pid != os.getpid() and pid_alive(pid):
            continue  # another download of the same dataset is running
        shutil.rmtree(tmp, ignore_errors=True)
        removed.append(tmp)
    return removed


@contextlib.contextmanager
def _sigterm_cleans_up(url: str) -> Iterator[None]:
    """Turn SIGTERM into an exception so the temp folder is removed, then die of the signal."""
    try:
        with sigterm_raises():
            yield
    except Terminated:  # cleanup done, the handler restored: terminate as the signal asked
        os.kill(os.getpid(), signal.SIGTERM)
        raise DataValidationError(f"download of {url} stopped by SIGTERM") from None


def ensure_dataset(root: Path, spec: Download | None) -> str:
    """Return 'present' if `root` exists, else download and unpack it; return 'downloaded'.

    The archive (zip or tar.gz) is verified against the configured checksum before anything is
    unpacked, and the folder appears under `root` in one rename, so a failure leaves no partial
    dataset and no temporary folder.
    """
    root = Path(root)
    if root.is_dir():
        return "present"
    if spec is None:
        raise DataValidationError(
            f"dataset root {root} does not exist and no download is configured"
        )
    root.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(root)
    with (
        _sigterm_cleans_up(spec.url),
        tempfile.TemporaryDirectory(dir=root.parent, prefix=f".{root.name}.dl-") as tmp,
    ):
        (Path(tmp) / OWNER_FILE).write_text(str(os.getpid()), encoding="utf-8")
        archive = Path(tmp) / "archive"
        download(spec.url, archive, spec.deadline_s, spec.read_timeout_s)
        digest = file_digest(archive, spec.checksum.algo)
        if digest != spec.checksum.value.lower():
            raise DataValidationError(
                f"checksum mismatch for {spec.url}: {spec.checksum.algo} {digest}, "
                f"expected {spec.checksum.value}"
            )
        unpacked = Path(tmp) / "unpacked"
        unpacked.mkdir()
        unpack(archive, unpacked, spec.url)
        src = unpacked / spec.archive_root if spec.archive_root else unpacked
        if not src.is_dir() or not _inside(unpacked.resolve().as_posix(), spec.archive_root or ""):
            found = sorted(p.name for p in unpacked.iterdir())[:10]
            raise DataValidationError(
                f"archive from {spec.url} has no folder {spec.archive_root!r} (top level: {found})"
            )
        try:
            os.rename(src, root)
        except OSError as exc:
            if root.is_dir():  # another process unpacked it meanwhile
                return "present"
            raise DataValidationError(f"cannot move the unpacked dataset to {root}: {exc}") from exc
    return "downloaded"
