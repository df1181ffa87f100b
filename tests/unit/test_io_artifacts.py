"""Stage outputs sealed with their sha256 and refused when changed or corrupt; a full disk named."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ragrig.core import io
from ragrig.core.errors import ArtifactError
from ragrig.core.io import (
    atomic_dir,
    atomic_write_text,
    load_array,
    read_faiss,
    read_table,
    save_array,
    write_faiss,
    write_json,
    write_table,
)
from ragrig.runtime import stage

IDS = pd.DataFrame({"id": ["c1", "c2", "c3"]})


def _embed_output(folder: Path) -> None:
    """A small embed-like output: ids, vectors, a file below a subfolder, the manifest."""
    with atomic_dir(folder) as out:
        write_table(IDS, out / "chunk_ids.parquet", "ids")
        save_array(out / "chunks.npy", np.eye(3, dtype=np.float32))
        atomic_write_text(out / "sub" / "note.txt", "kept\n")
        write_json(out / "manifest.json", {"chunks": 3})


def _flip_keeping_mtime(path: Path, offset: int) -> None:
    """Change one byte in place, size and modification time kept (bit rot, a bad copy)."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    io._verified.clear()  # a new process: nothing hashed yet


def test_a_sealed_folder_records_each_files_sha256(tmp_path: Path) -> None:
    folder = tmp_path / "data" / "embed"
    _embed_output(folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["chunks"] == 3
    assert sorted(manifest["sha256"]) == ["chunk_ids.parquet", "chunks.npy", "sub/note.txt"]
    assert manifest["sha256"]["sub/note.txt"] == hashlib.sha256(b"kept\n").hexdigest()
    for rel, digest in manifest["sha256"].items():
        assert hashlib.sha256((folder / rel).read_bytes()).hexdigest() == digest
    assert read_table(folder / "chunk_ids.parquet", "ids")["id"].tolist() == ["c1", "c2", "c3"]
    assert load_array(folder / "chunks.npy", mmap_mode="r").shape == (3, 3)


def test_a_changed_file_with_size_and_mtime_kept_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "data" / "embed"
    _embed_output(folder)
    path = folder / "chunks.npy"
    _flip_keeping_mtime(path, path.stat().st_size - 1)  # a vector's byte: np.load would not see
    with pytest.raises(ArtifactError) as exc:
        load_array(path)
    assert str(exc.value) == (
        f"{path} does not match the sha256 recorded in {folder / 'manifest.json'} (changed since "
        "its stage wrote it: a bad copy, a damaged disk or cache, an edit); rerun the stage that "
        "writes it: `dvc repro -f embed`"
    )


def test_a_file_its_stage_did_not_write_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "data" / "embed"
    _embed_output(folder)
    IDS.to_parquet(folder / "query_ids.parquet")
    with pytest.raises(ArtifactError, match=r"query_ids.parquet is not among the files its stage"):
        read_table(folder / "query_ids.parquet", "ids")


def test_a_corrupt_faiss_index_is_refused(tmp_path: Path) -> None:
    import faiss

    index = faiss.IndexFlatIP(4)
    index.add(np.eye(4, dtype=np.float32))
    folder = tmp_path / "data" / "index"
    with atomic_dir(folder) as out:
        write_faiss(index, out / "dense.faiss")
        write_json(out / "manifest.json", {})
    assert read_faiss(folder / "dense.faiss").ntotal == 4
    _flip_keeping_mtime(folder / "dense.faiss", 60)
    with pytest.raises(ArtifactError, match=r"dense.faiss does not match the sha256 recorded in"):
        read_faiss(folder / "dense.faiss")


@pytest.mark.parametrize(
    ("name", "read", "kind"),
    [
        ("chunks.parquet", lambda p: read_table(p, "ids"), "parquet"),
        ("chunks.npy", load_array, "numpy .npy"),
        ("dense.faiss", read_faiss, "FAISS index"),
    ],
)
def test_an_undeserializable_artifact_is_one_line(tmp_path: Path, name, read, kind) -> None:
    """A stage folder from before digests were recorded (no `sha256` in its manifest), its
    file garbage: the reader's own error becomes one line naming the file and the way back."""
    folder = tmp_path / "data" / "chunk"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text("{}")
    path = folder / name
    path.write_bytes(b"PAR1" + b"\x00" * 64 + b"PAR1")
    with pytest.raises(ArtifactError) as exc:
        read(path)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path} is corrupt or not a {kind} file (")
    assert msg.endswith(
        f"); rerun the stage that writes it: `dvc repro -f chunk`, or `dvc checkout {path}` if "
        "only this copy is damaged"
    )


def test_a_full_disk_while_saving_vectors_names_the_file_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def short_write(path, array):
        Path(path).write_bytes(b"\x93NUMPY partial")
        raise OSError("7680 requested and 6112 written")  # numpy's tofile: no errno

    monkeypatch.setattr(np, "save", short_write)
    folder = tmp_path / "data" / "embed"
    with pytest.raises(ArtifactError) as exc, atomic_dir(folder) as out:
        save_array(out / "chunks.npy", np.eye(3))
    assert str(exc.value) == (
        f"disk full while writing {folder / 'chunks.npy'}: 7680 requested and 6112 written"
    )
    assert list((tmp_path / "data").iterdir()) == []


def test_a_full_disk_while_writing_a_table_or_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def enospc(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", enospc)
    with pytest.raises(ArtifactError) as exc:
        write_table(IDS, tmp_path / "ids.parquet", "ids")
    assert str(exc.value) == (
        f"disk full while writing {tmp_path / 'ids.parquet'}: [Errno 28] No space left on device"
    )
    monkeypatch.setattr(os, "fsync", enospc)
    with pytest.raises(ArtifactError, match=r"^disk full while writing .*manifest.json: \[Errno"):
        write_json(tmp_path / "manifest.json", {})
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


def test_the_stage_runner_reports_an_unnamed_full_disk_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(stage.ENV_STAGE_LOG, str(tmp_path / "log.jsonl"))

    def body() -> None:
        raise OSError(errno.EDQUOT, "Disk quota exceeded", "reports/run/slices.csv")

    with pytest.raises(SystemExit) as exc:
        stage.run("report", body)
    assert exc.value.code == 1
    assert capsys.readouterr().err == (
        "ragrig report: error: disk full while writing reports/run/slices.csv: "
        "[Errno 122] Disk quota exceeded: 'reports/run/slices.csv'\n"
    )


def test_a_trained_model_changed_since_its_stage_wrote_it_is_refused(tmp_path: Path) -> None:
    from ragrig.judge.verifier_model import locate

    folder = tmp_path / "data" / "train_verifier"
    with atomic_dir(folder) as out:
        write_json(out / "model" / "config.json", {"num_labels": 3})
        write_json(out / "manifest.json", {"trained": True})
    assert locate(folder) == folder / "model"
    _flip_keeping_mtime(folder / "model" / "config.json", 5)
    with pytest.raises(ArtifactError, match=r"model/config.json does not match the sha256"):
        locate(folder)
