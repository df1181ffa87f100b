"""Atomic file and folder writes, stage outputs sealed with their sha256 and checked on read, table
I/O with schema validation, and reading the lines of an input file with file:line errors."""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import json
import os
import re
import shutil
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ragrig.core.errors import ArtifactError, DataValidationError
from ragrig.core.schemas import validate

BOM = b"\xef\xbb\xbf"
MANIFEST = "manifest.json"
# The manifest key holding {path below the folder: sha256} of every other file of a stage output.
DIGESTS = "sha256"
# How far above a file its stage folder's manifest is looked for (data/index/sparse/params.json,
# data/train_embed/model/1_Pooling/config.json).
MANIFEST_DEPTH = 4
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
# Writers that report a full disk without an errno: numpy's `tofile` ("7680 requested and 6112
# written"), faiss's and pyarrow's messages carrying the C library's text.
DISK_FULL_TEXT = re.compile(
    r"\d+ requested and \d+ written|No space left on device|Disk quota exceeded|File too large"
)
_verified: set[tuple[str, int, int, int]] = set()


def is_disk_full(exc: BaseException) -> bool:
    return getattr(exc, "errno", None) in DISK_FULL or bool(DISK_FULL_TEXT.search(str(exc)))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """Turn a failed write of `path` into one line naming it: a full disk (ENOSPC, EDQUOT, a
    short write) or another OS error. The caller removes what it had begun."""
    try:
        yield
    except (OSError, RuntimeError) as exc:
        if is_disk_full(exc):
            raise ArtifactError(f"disk full while writing {path}: {_first_line(exc)}") from None
        if isinstance(exc, OSError):
            raise ArtifactError(f"could not write {path}: {_first_line(exc)}") from None
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write text so that readers see either the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with writing(path), os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically, keys sorted so identical data gives identical bytes."""
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def read_json(path: Path) -> Any:
    """A JSON file; one a stage wrote is first checked against its manifest (verify_artifact)."""
    verify_artifact(path)
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def seal(folder: Path) -> None:
    """Record in `folder`/manifest.json the sha256 of every other file below `folder`.

    A loader then refuses a file changed since (verify_artifact): DVC does not notice a
    workspace file whose bytes changed with its size and modification time kept (its state
    database trusts them), and a stage run outside DVC is checked by nothing else.
    """
    manifest = folder / MANIFEST
    data = read_json(manifest)
    data[DIGESTS] = {
        p.relative_to(folder).as_posix(): file_sha256(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p != manifest
    }
    write_json(manifest, data)


def stage_folder(path: Path) -> Path | None:
    """The stage output folder holding `path`: the nearest one above it with a manifest.json."""
    for parent in list(Path(path).parents)[:MANIFEST_DEPTH]:
        if (parent / MANIFEST).is_file():
            return parent
    return None


def rerun_hint(folder: Path | None) -> str:
    """How to get a stage output back: a stage folder is named after its stage (data/<stage>)."""
    if folder is None:
        return "write it again or restore it"
    return f"rerun the stage that writes it: `dvc repro -f {folder.name}`"


def verify_artifact(path: Path) -> None:
    """Refuse a stage output whose bytes are not those its stage recorded in its manifest.

    A file outside any stage folder, a manifest itself, a missing file (the reader says so) and
    an output written before digests were recorded pass unchecked. Each file is hashed once
    per process while its size, modification time and inode stay the same.
    """
    path = Path(path)
    folder = stage_folder(path)
    if folder is None or path.name == MANIFEST and path.parent == folder:
        return
    try:
        st = path.stat()
    except FileNotFoundError:
        return
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    if key in _verified:
        return
    manifest = folder / MANIFEST
    with loading(manifest, "JSON"), open(manifest, encoding="utf-8") as fh:
        recorded = json.load(fh).get(DIGESTS)
    if recorded is None:
        return
    rel = path.relative_to(folder).as_posix()
    hint = rerun_hint(folder)
    if rel not in recorded:
        raise ArtifactError(
            f"{path} is not among the files its stage recorded in {manifest}; {hint}"
        )
    if file_sha256(path) != recorded[rel]:
        raise ArtifactError(
            f"{path} does not match the sha256 recorded in {manifest} (changed since its stage "
            f"wrote it: a bad copy, a damaged disk or cache, an edit); {hint}"
        )
    _verified.add(key)


def verify_tree(folder: Path) -> None:
    """verify_artifact for every file below `folder` (an index saved as several files)."""
    for p in sorted(Path(folder).rglob("*")):
        if p.is_file():
            verify_artifact(p)


@contextlib.contextmanager
def loading(path: Path, kind: str) -> Iterator[None]:
    """Turn a failure to deserialize `path` into one line naming it and how to get it back."""
    try:
        yield
    except FileNotFoundError:  # the caller's own message for a missing file
        raise
    except (OSError, ValueError, EOFError, RuntimeError, KeyError) as exc:
        hint = rerun_hint(stage_folder(path))
        raise ArtifactError(
            f"{path} is corrupt or not a {kind} file ({_first_line(exc)}); {hint}, "
            f"or `dvc checkout {path}` if only this copy is damaged"
        ) from None


@contextlib.contextmanager
def atomic_dir(path: Path) -> Iterator[Path]:
    """Yield a temporary sibling folder; on success it replaces `path` in one rename.

    A stage killed midway leaves only a hidden `.name.tmp-*` folder, never a partial `path`
    that a later stage could take for valid output; a failed write (a full disk) removes it.
    A folder with a manifest.json is sealed: the manifest records each file's sha256.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{path.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.tmp-"))
    try:
        yield tmp
        if (tmp / MANIFEST).is_file():
            seal(tmp)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, ArtifactError):  # name the file where it was to be, not the temporary
            raise ArtifactError(str(exc).replace(str(tmp), str(path))) from None
        if isinstance(exc, OSError) and is_disk_full(exc):  # a write outside the helpers below
            raise ArtifactError(f"disk full while writing {path}: {_first_line(exc)}") from None
        raise
    if path.exists():
        old = path.with_name(f".{path.name}.old-{os.getpid()}")
        os.replace(path, old)
        os.replace(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)


def write_table(df: pd.DataFrame, path: Path, schema: str) -> None:
    """Validate `df` against its contract and write it as parquet (atomically)."""
    validate(df, schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        with writing(path):
            df.to_parquet(tmp, index=False)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def read_parquet(path: Path, columns: list[str] | None = None) -> pd.DataFrame:
    """A parquet file, checked against its stage's manifest; a corrupt one refused in a line."""
    verify_artifact(path)
    with loading(path, "parquet"):
        return pd.read_parquet(path, columns=columns)


def read_table(path: Path, schema: str) -> pd.DataFrame:
    """Read a parquet table and validate it against its contract."""
    df = read_parquet(path)
    validate(df, schema)
    return df


@dataclass(frozen=True)
class ReadLimits:
    """Bounds on what one input file may make a reader hold.

    `max_record_bytes` bounds one line (a record), so a reader's memory is bounded by it
    whatever the file holds; `max_inflated_bytes` bounds what a `.gz` file inflates to, so a
    small archive cannot make a reader decompress for hours. `setting` names the config section
    that sets them (e.g. "parse"), for the hint in the error."""

    max_record_bytes: int = 64 * 2**20
    max_inflated_bytes: int = 16 * 2**30
    setting: str = ""

    def hint(self, key: str) -> str:
        return f"raise {self.setting}.{key} to read it" if self.setting else f"the {key} limit"


# 64 MiB: a JSONL record is one document, query or judgment; a whole book is a few MB of text,
# and json.loads of a record costs a few times its size. 16 GiB inflated: the largest public BEIR
# corpora (MS MARCO's 8.8M passages, about 3 GB; FEVER's 5.4M abstracts) inflate to well below
# it, and parse holds the whole corpus in memory anyway, so a corpus past it needs a bigger
# machine and a deliberate setting.
DEFAULT_LIMITS = ReadLimits()


def size_text(n: int) -> str:
    """A byte count as people read it: 67108864 is "64 MiB", 1500 is "1500 bytes"."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


def save_array(path: Path, array: Any) -> None:
    """Write a numpy array as .npy; a full disk is refused naming the file."""
    import numpy as np

    with writing(path):
        np.save(path, array)


def load_array(path: Path, mmap_mode: str | None = None) -> Any:
    """A .npy array written by a stage, checked against its manifest; never unpickled."""
    import numpy as np

    verify_artifact(path)
    with loading(path, "numpy .npy"):
        return np.load(path, mmap_mode=mmap_mode, allow_pickle=False)


def write_faiss(index: Any, path: Path) -> None:
    """Write a FAISS index; a full disk is refused naming the file."""
    import faiss

    with writing(path):
        faiss.write_index(index, str(path))


def read_faiss(path: Path) -> Any:
    """A FAISS index written by a stage, checked against its manifest."""
    import faiss

    verify_artifact(path)
    with loading(path, "FAISS index"):
        return faiss.read_index(str(path))


def iter_lines(path: Path, limits: ReadLimits = DEFAULT_LIMITS) -> Iterator[tuple[int, str]]:
    """Yield (line number, text) of a UTF-8 file, `.gz` decompressed on the fly.

    A leading UTF-8 byte-order mark is dropped. A missing file, a byte that is not UTF-8 (named
    with its byte offset), a truncated / corrupt gzip, a line longer than
    `limits.max_record_bytes` or a `.gz` inflating past `limits.max_inflated_bytes` raises
    naming the file and line. Lines are read at most one record's bound at a time, so memory
    stays bounded by it however long a line is.
    """
    path = Path(path)
    if not path.is_file():
        raise DataValidationError(f"file not found: {path}")
    gz = path.suffix == ".gz"
    cap = limits.max_record_bytes
    lineno = 0
    offset = 0  # byte offset of the current line (in the decompressed stream for .gz)
    try:
        with gzip.open(path, "rb") if gz else open(path, "rb") as fh:
            # a cap-byte record, then "\r\n" at most (and a byte-order mark on the first line)
            while raw := fh.readline(cap + 2 + (len(BOM) if lineno == 0 else 0)):
                lineno += 1
                body = raw[len(BOM) :] if lineno == 1 and raw.startswith(BOM) else raw
                if len(body) - _ending(body) > cap:
                    raise DataValidationError(
                        f"{path}:{lineno}: line longer than {size_text(cap)} "
                        f"({limits.hint('max_record_bytes')}); not read further"
                    )
                if gz and offset + len(raw) > limits.max_inflated_bytes:
                    raise DataValidationError(
                        f"{path}:{lineno}: inflates past {size_text(limits.max_inflated_bytes)} "
                        f"({limits.hint('max_inflated_bytes')}); not read further"
                    )
                try:
                    text = body.decode("utf-8")
                except UnicodeDecodeError as exc:
                    at = offset + (len(raw) - len(body)) + exc.start
                    where = "uncompressed byte offset" if gz else "byte offset"
                    raise DataValidationError(
                        f"{path}:{lineno}: not valid UTF-8 "
                        f"(byte 0x{body[exc.start]:02x} at {where} {at})"
                    ) from exc
                offset += len(raw)
                yield lineno, text
    except (EOFError, OSError, zlib.error) as exc:
        what = "truncated or corrupt gzip" if gz else "unreadable"
        raise DataValidationError(f"{path}:{lineno + 1}: {what} ({exc})") from exc


def _ending(raw: bytes) -> int:
    """How many bytes of `raw` are its line ending ("\n" or "\r\n"; 0 for the last line)."""
    if raw.endswith(b"\r\n"):
        return 2
    return 1 if raw.endswith(b"\n") else 0
