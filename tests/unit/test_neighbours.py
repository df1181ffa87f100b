"""`ragrig neighbours`: probe queries' nearest documents in two versions, compared by the
documents named (overlap, Jaccard, RBO), never by cosine; bad input in one line."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from ragrig.tools.neighbours import Version, rbo, read_probes, stability

from ..conftest import BIN, PROJECT, project_env, write_tiny_stage_inputs


def _version(root, drop: str | None = None):
    """A finished run's files for the tiny fixture (document chunks, the params' embedder, an
    exact index); `drop`: that document's chunk left out of the index."""
    import pandas as pd

    from ragrig.core.config import load_section
    from ragrig.core.io import write_faiss, write_table
    from ragrig.embed import make_embedder
    from ragrig.index.dense import build_flat

    chunks = write_tiny_stage_inputs(root / "data")
    shutil.copy(PROJECT / "params.yaml", root / "params.yaml")
    kept = chunks[chunks["doc_id"] != drop] if drop else chunks
    embedder = make_embedder(load_section("embed", root / "params.yaml"), role="passage")
    vectors = embedder.encode(kept["text"].tolist())
    write_table(pd.DataFrame({"id": kept["chunk_id"].tolist()}),
                root / "data/embed/chunk_ids.parquet", "ids")  # fmt: skip
    (root / "data/index").mkdir(parents=True)
    write_faiss(build_flat(vectors, None), root / "data/index/dense.faiss")
    return root


def test_rbo_and_the_stability_of_two_versions(tmp_path):
    assert rbo(["a", "b"], ["a", "b"], 0.9) == 1.0
    assert rbo(["a", "b"], ["b", "a"], 0.9) == pytest.approx(0.9 / 1.9)  # depth 1 disagrees
    assert rbo(["a", "b"], ["c", "d"], 0.9) == 0.0

    a = Version(_version(tmp_path / "a"))
    b = Version(_version(tmp_path / "b", drop="d01"))
    probes = [("1", "How many moons does Mars have?"), ("2", "Venus atmosphere pressure")]
    same = stability(a, a, probes, k=3, p=0.9)["summary"]
    assert [same[m]["mean"] for m in ("overlap", "jaccard", "rbo")] == [1.0, 1.0, 1.0]
    assert same["same_embedder"] is True and same["unstable"] == []
    got = stability(a, b, probes, k=3, p=0.9, min_overlap=0.9)
    top4 = a.neighbours([t for _, t in probes], 4)
    for row, four in zip(got["probes"], top4, strict=True):
        # B lacks d01: its list is A's without d01, the next document moving up
        assert row["b"] == [d for d in four if d != "d01"][:3]
        assert row["overlap"] == len(set(row["a"]) & set(row["b"])) / 3
    moons = got["probes"][0]
    assert moons["a"][0] == "d01" and moons["overlap"] == pytest.approx(2 / 3)
    assert got["summary"]["unstable"] == ["1"] + (
        ["2"] if got["probes"][1]["overlap"] < 0.9 else []
    )


def test_bad_probes_and_a_folder_that_is_no_run_stop_with_one_line(tmp_path):
    empty = tmp_path / "p.txt"
    empty.write_text("\n  \n")
    with pytest.raises(Exception, match=r"p.txt: no probe queries"):
        read_probes(empty)
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"text": ""}\n')
    with pytest.raises(Exception, match=r"b.jsonl:1: a probe needs a non-empty 'text'"):
        read_probes(bad)
    probes = tmp_path / "probes.txt"
    probes.write_text("a question\n")
    cmd = [str(BIN / "python"), "-m", "ragrig", "neighbours", str(tmp_path), str(tmp_path),
           "--probes", str(probes)]  # fmt: skip
    proc = subprocess.run(cmd, env=project_env(), capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"ragrig neighbours: error: {tmp_path}: not a finished run: missing params.yaml, "
        "data/chunk/chunks.parquet, data/embed/chunk_ids.parquet, data/index/dense.faiss "
        "(run dvc repro there)"
    ]
