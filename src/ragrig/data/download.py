"""Fetch a public BEIR archive when no local copy exists: download, verify checksum, unpack atomically."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import zipfile
from pathlib import Path

from ragrig.data.config import Download
from ragrig.errors import DataValidationError


def file_digest(path: Path, algo: str) -> str:
    h = hashlib.new(algo)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download(url: str, dest: Path, timeout: float = 60.0) -> None:
    """Stream `url` to `dest` with a progress bar."""
    import requests
    from tqdm import tqdm

    try:
        resp = requests.get(url, stream=True, timeout=timeout)
        resp.raise_for_status()
    except requests.RequestException as exc:
        raise DataValidationError(f"download of {url} failed: {exc}") from exc
    with resp:
        total = int(resp.headers.get("content-length") or 0) or None
        with (
            open(dest, "wb") as fh,
            tqdm(
                total=total, unit="B", unit_scale=True, desc=f"download {url.rsplit('/', 1)[-1]}"
            ) as bar,
        ):
            for block in resp.iter_content(1 << 16):
                fh.write(block)
                bar.update(len(block))


def ensure_dataset(root: Path, spec: Download | None) -> str:
    """Return 'present' if `root` exists, else download and unpack it; return 'downloaded'.

    The archive is verified against the configured checksum before anything is unpacked, and
    the folder appears under `root` in one rename, so a failure leaves no partial dataset.
    """
    root = Path(root)
    if root.is_dir():
        return "present"
    if spec is None:
        raise DataValidationError(
            f"dataset root {root} does not exist and no download is configured"
        )
    root.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root.parent, prefix=f".{root.name}.dl-") as tmp:
        archive = Path(tmp) / "archive.zip"
        download(spec.url, archive)
        digest = file_digest(archive, spec.checksum.algo)
        if digest != spec.checksum.value.lower():
            raise DataValidationError(
                f"checksum mismatch for {spec.url}: {spec.checksum.algo} {digest}, "
                f"expected {spec.checksum.value}"
            )
        unpacked = Path(tmp) / "unpacked"
        with zipfile.ZipFile(archive) as zf:
            for member in zf.namelist():
                target = (unpacked / member).resolve()
                if not target.is_relative_to(unpacked.resolve()):
                    raise DataValidationError(f"archive member escapes the folder: {member}")
            zf.extractall(unpacked)
        src = unpacked / spec.archive_root if spec.archive_root else unpacked
        if not src.is_dir():
            raise DataValidationError(f"archive has no folder {spec.archive_root!r}")
        shutil.move(str(src), str(root))
    return "downloaded"
