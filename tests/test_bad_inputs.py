"""Run every case of the generated bad-input corpus (tests/bad_inputs.py).

Datasets go through the parse stage's own `main` in-process (a few also through the real stage
subprocess, exit code and stderr included); archives are served on 127.0.0.1 to
`ensure_dataset` (one also through `ragrig.cli.app data ensure`). A refused input gives exactly one
error line and leaves no output, no temporary folder and no file outside the dataset; an
accepted one gives the stated counts.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from ragrig.core.errors import DataValidationError
from ragrig.dataset.beir import load_beir
from ragrig.dataset.config import Checksum, Download
from ragrig.dataset.download import ensure_dataset

from . import bad_inputs
from ._http import Route, serve
from .bad_inputs import ARCHIVE_CASES, DATASET_CASES, ESCAPED, ArchiveCase, DatasetCase

PROJECT = Path(__file__).resolve().parents[1]
STAGE = PROJECT / "stages" / "parse.py"


def test_the_corpus_is_large_and_names_are_unique() -> None:
    names = [c.name for c in DATASET_CASES] + [c.name for c in ARCHIVE_CASES]
    assert len(names) == len(set(names))
    refused = [c for c in DATASET_CASES if c.error] + [c for c in ARCHIVE_CASES if c.error]
    assert len(refused) >= 25
    assert all((c.error is None) != (c.counts is None) for c in DATASET_CASES)


def _build(case: DatasetCase, tmp_path: Path) -> tuple[Path, Path]:
    root = bad_inputs.write_base(tmp_path / "case data")  # a space in the path, on purpose
    case.build(root)
    params = yaml.safe_load((PROJECT / "params.yaml").read_text(encoding="utf-8"))
    params["dataset"] = {
        "name": case.name,
        "root": str(root),
        "split": "test",
        "download": None,
        "claims": {"files": [bad_inputs.CLAIMS_FILE]} if case.claims else None,
    }
    params["parse"] = {**params["parse"], "empty_text": case.empty_text, **(case.parse or {})}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return root, path


def _expected_parts(case: DatasetCase, root: Path) -> list[str]:
    parts = [case.error] if isinstance(case.error, str) else list(case.error or ())
    return [p.replace("{root}", str(root)) for p in parts]


def _expected_warnings(case: DatasetCase, root: Path) -> list[str]:
    lines = [case.warned] if isinstance(case.warned, str) else list(case.warned)
    return [line.replace("{root}", str(root)) for line in lines]


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("ragrig: warning: ")]


def _check_accepted(case: DatasetCase, out: Path) -> None:
    """The manifest's counts; no lone surrogate replaced unless the case says so; the U+FFFD
    the case expects in the tables' texts (written as parquet, so valid UTF-8)."""
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert {k: manifest.get(k) for k in case.counts} == case.counts
    if "surrogates_replaced" not in case.counts:
        assert not any(manifest["surrogates_replaced"].values())
    for key, n in (case.fffd or {}).items():
        table, column = key.split(".")
        values = pd.read_parquet(out / f"{table}.parquet")[column]
        assert sum(str(v).count("\ufffd") for v in values) == n, key


@pytest.fixture(scope="module")
def parse_main():
    spec = importlib.util.spec_from_file_location("ragrig_stage_parse", STAGE)
    module = importlib.util.module_from_spec(spec)
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(STAGE.parent))  # the stage imports its sibling _bootstrap
        spec.loader.exec_module(module)
    return module.main


def _no_leftovers(out: Path) -> None:
    assert not out.exists()
    assert not out.parent.exists() or list(out.parent.iterdir()) == []


@pytest.mark.parametrize("case", DATASET_CASES, ids=lambda c: c.name)
def test_dataset_case(
    case: DatasetCase,
    tmp_path: Path,
    parse_main,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root, params = _build(case, tmp_path)
    out = tmp_path / "data" / "parse"
    monkeypatch.setattr(sys, "argv", ["parse.py", "--params", str(params), "--out", str(out)])
    if case.error is not None:
        with pytest.raises(DataValidationError) as exc:
            parse_main()
        msg = str(exc.value)
        assert "\n" not in msg, msg
        for part in _expected_parts(case, root):
            assert part in msg, msg[:2000]
        if case.longest is not None:
            assert len(msg) - len(str(root)) <= case.longest, len(msg)
        _no_leftovers(out)
        return
    parse_main()
    _check_accepted(case, out)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    if "empty_text" not in case.counts:
        assert manifest["empty_text"]["documents"] == 0
    printed = capsys.readouterr()
    if case.printed:
        assert case.printed in printed.out.splitlines()
    assert _warnings(printed.err) == _expected_warnings(case, root)
    assert sorted(p.name for p in out.parent.iterdir()) == ["parse"]


@pytest.mark.parametrize(
    "name",
    [
        "non_utf8_byte_in_corpus",
        "qrels_duplicate_judgment",
        "qrels_full_width_grade",
        "blank_judged_document_skip",
        "lone_surrogate_in_corpus_text",
    ],
)
def test_dataset_case_through_the_stage_process(name: str, tmp_path: Path) -> None:
    case = next(c for c in DATASET_CASES if c.name == name)
    root, params = _build(case, tmp_path)
    out = tmp_path / "data" / "parse"
    proc = subprocess.run(
        [sys.executable, str(STAGE), "--params", str(params), "--out", str(out)],
        cwd=tmp_path,
        env={**os.environ, "RAGRIG_STAGE_LOG": str(tmp_path / "stage_log.jsonl")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    if case.error is not None:
        assert proc.returncode == 1, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert lines[0].startswith("ragrig parse: error: ")
        for part in _expected_parts(case, root):
            assert part in lines[0]
        _no_leftovers(out)
    else:
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
        assert case.printed in proc.stdout.splitlines()
        assert _warnings(proc.stderr) == _expected_warnings(case, root)
        _check_accepted(case, out)


# --- archives -----------------------------------------------------------------------------------


def _spec(case: ArchiveCase, url: str, blob: bytes) -> Download:
    digest = hashlib.sha256(blob).hexdigest() if case.checksum_matches else "0" * 64
    return Download(
        url=url,
        checksum=Checksum(algo="sha256", value=digest),
        archive_root=case.archive_root,
        deadline_s=20,
        read_timeout_s=10,
    )


def _escaped(tmp_path: Path) -> list[Path]:
    found = list(tmp_path.rglob(f"*{ESCAPED}*"))
    found += [p for p in (Path("/tmp") / ESCAPED,) if p.exists()]
    return found


@pytest.mark.parametrize("case", ARCHIVE_CASES, ids=lambda c: c.name)
def test_archive_case(case: ArchiveCase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    blob = case.blob()
    root = tmp_path / "datasets" / "set"
    route = Route(blob, mode=case.mode, status=case.status)
    with serve({f"/{case.name}": route}) as base:
        url = f"{base}/{case.name}"
        if case.error is None:
            assert ensure_dataset(root, _spec(case, url, blob)) == "downloaded"
            data = load_beir(root, "test")
            assert (len(data.corpus), len(data.queries)) == (4, 3)
            assert sorted(p.name for p in root.parent.iterdir()) == ["set"]
            return
        with pytest.raises(DataValidationError) as exc:
            ensure_dataset(root, _spec(case, url, blob))
    msg = str(exc.value)
    assert "\n" not in msg, msg
    assert case.error.replace("{url}", url) in msg
    assert not root.exists()
    assert list(root.parent.iterdir()) == []  # no temporary folder left
    assert _escaped(tmp_path) == []


def test_archive_case_through_the_cli(tmp_path: Path) -> None:
    case = next(c for c in ARCHIVE_CASES if c.name == "tar_symlink_relative_out")
    blob = case.blob()
    root = tmp_path / "datasets" / "set"
    with serve({"/evil.tar.gz": Route(blob)}) as base:
        url = f"{base}/evil.tar.gz"
        params: dict[str, Any] = yaml.safe_load(
            (PROJECT / "params.yaml").read_text(encoding="utf-8")
        )
        params["dataset"] = {
            "name": "set",
            "root": str(root),
            "split": "test",
            "download": _spec(case, url, blob).model_dump(),
            "claims": None,
        }
        path = tmp_path / "params.yaml"
        path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
        proc = subprocess.run(
            [sys.executable, "-m", "ragrig", "data", "ensure", "--params", str(path)],
            cwd=tmp_path,
            env={**os.environ, "NO_PROXY": "127.0.0.1,localhost"},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert (
        lines[0]
        == "ragrig: error: " + case.error.replace("{url}", url) + " (links are not unpacked)"
    )
    assert not root.parent.exists() or list(root.parent.iterdir()) == []
    assert _escaped(tmp_path) == []


def test_generator_script_writes_every_case(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(PROJECT / "tests" / "bad_inputs.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "datasets").iterdir()) == sorted(
        c.name for c in DATASET_CASES if c.name not in {"root_missing"}
    )
    assert len(list((tmp_path / "archives").iterdir())) == len(ARCHIVE_CASES)


# --- documents folders (parse=docling), checked when the folder is listed: no conversion -------


@pytest.mark.parametrize("case", bad_inputs.DOCUMENT_CASES, ids=lambda c: c.name)
def test_documents_case(case: bad_inputs.DocumentsCase, tmp_path: Path) -> None:
    from ragrig.core.io import write_json
    from ragrig.parse.docling import list_files, parse_report, stats_lines

    folder = bad_inputs.write_documents_case(case, tmp_path)
    entries = list_files([folder], [], 1_000_000, case.follow_outside_links)
    assert {e.path: (e.status, e.cause, e.reason) for e in entries} == case.expected
    for e in entries:
        assert os.path.lexists(e.abspath)  # the file is still reached by its real name
    # what is written and printed about them encodes as UTF-8 (no lone surrogate)
    report = parse_report([e for e in entries if e.status])  # the others await conversion
    write_json(tmp_path / "parse_report.json", report)
    "\n".join(stats_lines({"unit": "section"}, report)).encode("utf-8")


def test_a_documents_folder_where_every_file_fails_is_one_error_line(
    tmp_path: Path, parse_main, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every documents case with nothing to convert, side by side in one folder: the stage stops
    before starting a converter, with one line naming the failed files."""
    docs = tmp_path / "docs"
    expected: dict[str, tuple[str, str, str]] = {}
    for case in bad_inputs.DOCUMENT_CASES:
        if case.follow_outside_links or any(s == "" for s, _, _ in case.expected.values()):
            continue
        bad_inputs.write_documents_case(case, tmp_path / "cases" / case.name)
        docs.mkdir(exist_ok=True)
        os.rename(tmp_path / "cases" / case.name / "docs", docs / case.name)
        expected |= {f"{case.name}/{p}": v for p, v in case.expected.items()}
    params = yaml.safe_load((PROJECT / "params.yaml").read_text(encoding="utf-8"))
    params["dataset"] = {"name": "bad-docs", "root": str(docs)}
    params["parse"] = {"method": "docling"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    out = tmp_path / "data" / "parse"
    monkeypatch.setattr(
        sys, "argv", ["parse.py", "--params", str(tmp_path / "params.yaml"), "--out", str(out)]
    )
    with pytest.raises(DataValidationError) as exc:
        parse_main()
    msg = str(exc.value)
    failed = sorted(p for p, (s, _, _) in expected.items() if s == "failed")
    assert len(expected) == 15 and len(failed) == 11
    assert "\n" not in msg
    assert msg.startswith(
        f"parse: 11 of 15 file(s) failed or timed out, more than parse.max_failure_share=0.1: "
        f"{failed[0]}: failed ({expected[failed[0]][2]}); "
    )
    for path in failed:
        assert f"{path}: failed ({expected[path][2]})" in msg
    _no_leftovers(out)
    # with no share limit, the same folder stops with the line that nothing was parsed
    params["parse"]["max_failure_share"] = 1.0
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    with pytest.raises(DataValidationError) as exc:
        parse_main()
    assert str(exc.value).startswith(
        f"parse: no document parsed in {docs} (15 file(s): 0 parsed, 11 failed (broken_link 2, "
        "content_mismatch 8, empty 1), 4 skipped (link_outside 2, link_to_folder 1, "
        "unsupported 1), 0 timed out): "
    )
