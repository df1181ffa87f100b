"""Atomic file and folder writes, table I/O with schema validation, and reading the lines of an
input file (UTF-8, gzip, a byte-order mark) with file:line errors."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ragrig.core.errors import DataValidationError
from ragrig.core.schemas import validate

BOM = b"\xef\xbb\xbf"


def atomic_write_text(path: Path, text: str) -> None:
    """Write text so that readers see either the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
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
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


@contextlib.contextmanager
def atomic_dir(path: Path) -> Iterator[Path]:
    """Yield a temporary sibling folder; on success it replaces `path` in one rename.

    A stage killed midway leaves only a hidden `.name.tmp-*` folder, never a partial `path`
    that a later stage could take for valid output.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{path.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.tmp-"))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
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
        df.to_parquet(tmp, index=False)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def read_table(path: Path, schema: str) -> pd.DataFrame:
    """Read a parquet table and validate it against its contract."""
    df = pd.read_parquet(path)
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
