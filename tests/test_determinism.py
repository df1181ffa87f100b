"""Every stage output is byte-identical across runs, whatever Python's string hash seed.

DVC keys its run-cache on the hashes of a stage's inputs: an output whose bytes change on every
rebuild (a vocabulary numbered in set order, say) makes every downstream stage miss the cache.
Measured latencies are the one, named exception: `LATENCY_FILES` lists every file that holds
them, and those are compared with the latency values taken out.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from .conftest import PROJECT, project_env, sh, warm_server

pytestmark = pytest.mark.full  # make test-all (CI) only

# Files that hold measured latencies (milliseconds, *_ms columns and keys), by nature different
# on every run. Each is compared with those values removed; `latency.png` only plots them.
LATENCY_FILES = {
    "data/embed/latency.parquet",
    "data/retrieve/latency.parquet",
    "data/rerank/latency.parquet",
    "data/generate/generations.parquet",  # latency_ms column
    "data/judge/judgments.parquet",  # latency_ms column
    "data/retrieve/manifest.json",  # approx_ms, exact_ms (ANN against exact search)
    "reports/metrics.json",  # latency_ms quantiles, ann approx_ms / exact_ms
    "reports/run/summary.txt",  # the latency table and the ANN ms/query figures
    "reports/run/plots/latency.png",
    "reports/run/latency.csv",  # p50_ms, p95_ms, p99_ms per stage (DVC plot data)
    "reports/run/headline.json",  # *_p95_ms, cost_usd_per_query
    # cost/ measures: measured CPU seconds and query-stage latency priced per core-hour
    "reports/run/per_query.parquet",
    "reports/run/slices.csv",
    # the HTML scorecard: its latency table and plot, the cost card and the quality-cost plot
    "reports/index.html",
}
# Measured CPU seconds (process time), different on every run like latencies.
MEASURED_COLUMNS = {"cpu_s", "judge_cpu_s"}
# Priced from measured CPU time and latency (ragrig.report.cost).
MEASURED_PREFIX = "cost/"
MEASURED_KEYS = {"cost_usd_per_query"}

# Runs the stages of dvc.yaml (all, or those named, in the order named) through their own
# wrappers (`stages/<name>.py` with the arguments of their dvc.yaml command, paths under `root`),
# in one process so that torch is imported once.
DRIVER = """
import runpy, shlex, sys
from pathlib import Path
import yaml

project, params, root = map(Path, sys.argv[1:4])
sys.path.insert(0, str(project / "stages"))
stages = yaml.safe_load((project / "dvc.yaml").read_text())["stages"]
for name in sys.argv[4:] or list(stages):
    argv = shlex.split(stages[name]["cmd"])[1:]
    argv = [str(root / a) if a.startswith(("data/", "reports/")) else a for a in argv]
    sys.argv = [str(project / argv[0]), *argv[1:], "--params", str(params)]
    runpy.run_path(sys.argv[0], run_name="__main__")
"""

BASE = ["dataset=tiny", "generate=extractive", "report.mlflow.enabled=false"]
# Backends the default run does not use: seeded IVF, rank-bm25, convex fusion, recursive chunks.
VARIANT = [
    "index/dense=ivf",
    "index.dense.nlist=2",
    "index/sparse=rank_bm25",
    "retrieve=hybrid_convex",
    "chunk=recursive",
]


# measured times: milliseconds (`*_ms`) and CPU seconds (`cpu_s`, `judge_cpu_s`)
MEASURED = ("_ms", "cpu_s")


def _without_ms(value):
    """JSON data with every measured-time key (`*_ms`, `*cpu_s`) removed, at any depth."""
    if isinstance(value, dict):
        return {
            k: _without_ms(v)
            for k, v in value.items()
            if not k.endswith(MEASURED) and k not in MEASURED_KEYS
        }
    if isinstance(value, list):
        return [_without_ms(v) for v in value]
    return value


def _summary_without_latency(text: str) -> str:
    """summary.txt without its latency table and ANN timings (the rest must match exactly)."""
    lines, in_latency = [], False
    for line in text.splitlines():
        if line.startswith("latency ms"):
            in_latency = True
            continue
        if in_latency and line.startswith("  "):
            continue
        in_latency = False
        if line.startswith(("cost per query", "  cost note")):
            continue  # priced from measured CPU time and latency
        lines.append(re.sub(r"[\d.]+ ms/query", "<ms> ms/query", line))
    return "\n".join(lines)


def _html_without_measured(text: str) -> str:
    """The page without the blocks it marks as measured (ragrig.report.html._measured)."""
    from ragrig.report.html import MEASURED_END, MEASURED_START

    assert MEASURED_START in text, "the page marks no measured block"
    return re.sub(re.escape(MEASURED_START) + ".*?" + re.escape(MEASURED_END), "", text, flags=re.S)


def _assert_same_apart_from_latency(rel: str, a: Path, b: Path) -> None:
    if rel.endswith(".png"):
        return  # a plot of the latencies
    if rel.endswith((".parquet", ".csv")):
        read = pd.read_parquet if rel.endswith(".parquet") else pd.read_csv
        fa, fb = read(a), read(b)
        if "measure" in fa.columns:  # long tables: the cost/ rows are the measured ones
            assert fa["measure"].str.startswith(MEASURED_PREFIX).any(), f"{rel}: no cost rows"
            fa = fa[~fa["measure"].str.startswith(MEASURED_PREFIX)].reset_index(drop=True)
            fb = fb[~fb["measure"].str.startswith(MEASURED_PREFIX)].reset_index(drop=True)
        measured = [c for c in fa.columns if c.endswith(MEASURED) or c in MEASURED_COLUMNS]
        if rel.endswith(".parquet") and "measure" not in fa.columns:
            assert measured, f"{rel}: no latency column"
        fa, fb = fa.drop(columns=measured), fb.drop(columns=measured)
        pd.testing.assert_frame_equal(fa, fb, check_exact=True, obj=rel)
    elif rel.endswith(".json"):
        assert _without_ms(json.loads(a.read_text())) == _without_ms(json.loads(b.read_text())), rel
    elif rel.endswith(".html"):
        ta, tb = (_html_without_measured(p.read_text(encoding="utf-8")) for p in (a, b))
        assert ta == tb, rel
    elif rel.endswith("summary.txt"):
        assert _summary_without_latency(a.read_text()) == _summary_without_latency(b.read_text()), (
            rel
        )
    else:
        raise AssertionError(f"{rel}: no rule to compare it apart from latency")


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _params(path: Path, overrides: list[str]) -> Path:
    cmd = [sys.executable, "-m", "ragrig", "params", "write", *overrides, "--output", str(path)]
    sh(cmd, PROJECT)
    return path


def _run_twice(params: Path, roots: dict[str, Path], stages: list[str], logs: Path) -> None:
    """Run `stages` into each root at once, under the string hash seed named by its key."""
    procs = {}
    for seed, root in roots.items():
        env = project_env(
            {"PYTHONHASHSEED": seed, "RAGRIG_STAGE_LOG": str(logs / f"log{seed}.jsonl")}
        )
        procs[seed] = subprocess.Popen(
            [sys.executable, "-c", DRIVER, str(PROJECT), str(params), str(root), *stages],
            cwd=PROJECT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    for seed, proc in procs.items():
        out, _ = proc.communicate()
        assert proc.returncode == 0, f"stages under PYTHONHASHSEED={seed} failed:\n{out[-4000:]}"


def _manifest_apart_from_latency(rel: str, path: Path) -> dict:
    """A stage manifest without measured times and without the recorded sha256 of its files
    that hold them (ragrig.core.io.seal): every other digest must match."""
    data = _without_ms(json.loads(path.read_text()))
    folder = rel.rsplit("/", 1)[0]
    digests = data.get("sha256", {})
    data["sha256"] = {f: d for f, d in digests.items() if f"{folder}/{f}" not in LATENCY_FILES}
    return data


def _assert_identical(one: dict[str, bytes], two: dict[str, bytes], a: Path, b: Path) -> None:
    assert sorted(one) == sorted(two)
    differ = sorted(rel for rel in one if one[rel] != two[rel])
    manifests = [rel for rel in differ if rel.startswith("data/") and rel.endswith("manifest.json")]
    for rel in manifests:
        assert _manifest_apart_from_latency(rel, a / rel) == _manifest_apart_from_latency(
            rel, b / rel
        ), rel
    unexplained = [rel for rel in differ if rel not in LATENCY_FILES and rel not in manifests]
    assert not unexplained, f"outputs that differ between two identical runs: {unexplained}"
    for rel in differ:
        if rel not in manifests:
            _assert_same_apart_from_latency(rel, a / rel, b / rel)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """The whole pipeline on the tiny fixture, run twice: under PYTHONHASHSEED 1 and 2."""
    tmp = tmp_path_factory.mktemp("determinism")
    params = _params(tmp / "params.yaml", BASE)
    _run_twice(params, {"1": tmp / "1", "2": tmp / "2"}, [], tmp)
    return tmp


def test_every_stage_output_is_byte_identical_under_different_hash_seeds(runs):
    one, two = _files(runs / "1"), _files(runs / "2")
    for st in yaml.safe_load((PROJECT / "dvc.yaml").read_text())["stages"].values():
        argv = shlex.split(st["cmd"])
        out = argv[argv.index("--out") + 1]
        assert any(rel.startswith(out + "/") for rel in one), f"nothing written to {out}"
    assert "data/index/sparse/vocab.index.json" in one and "data/index/dense.faiss" in one
    assert set(one) >= LATENCY_FILES, sorted(LATENCY_FILES - set(one))
    _assert_identical(one, two, runs / "1", runs / "2")


def test_other_backends_are_byte_identical_under_different_hash_seeds(runs):
    """IVF, rank-bm25 and convex fusion over the first run's chunks and vectors; then the
    recursive chunker (last, so that the index is built from the chunks that were embedded; on
    the fixture's short documents it gives one window per document)."""
    params = _params(runs / "variant.yaml", [*BASE, *VARIANT])
    roots = {}
    for seed in ("3", "4"):
        roots[seed] = runs / f"variant{seed}"
        for stage in ("parse", "chunk", "embed"):
            shutil.copytree(runs / "1" / "data" / stage, roots[seed] / "data" / stage)
    _run_twice(params, roots, ["index", "retrieve", "chunk"], runs)
    one, two = _files(roots["3"]), _files(roots["4"])
    assert "data/index/sparse/tokens.json" in one  # rank-bm25
    assert json.loads(one["data/index/manifest.json"])["dense"]["method"] == "ivf"
    assert json.loads(one["data/retrieve/manifest.json"])["method"] == "hybrid_convex"
    _assert_identical(one, two, roots["3"], roots["4"])


def test_stages_forked_by_a_warm_server_write_the_same_bytes(runs):
    """Each stage in its own wrapper process, as DVC runs them, handed to a warm server
    (ragrig.runtime.warm): the outputs equal the first run's, every stage ran in a fork."""
    import contextlib
    import os

    params = runs / "params.yaml"
    root, log = runs / "warm", runs / "warm.jsonl"
    stages = yaml.safe_load((PROJECT / "dvc.yaml").read_text())["stages"]
    sock = os.environ.get("RAGRIG_WARM_SOCKET")
    with contextlib.ExitStack() as stack:
        if not (sock and Path(sock).exists()):
            sock = str(stack.enter_context(warm_server()))
            for _ in range(1200):
                if Path(sock).exists():
                    break
                __import__("time").sleep(0.1)
        env = project_env({"RAGRIG_WARM_SOCKET": sock, "RAGRIG_STAGE_LOG": str(log)})
        for st in stages.values():
            argv = shlex.split(st["cmd"])[1:]
            argv = [str(root / a) if a.startswith(("data/", "reports/")) else a for a in argv]
            sh([sys.executable, *argv, "--params", str(params)], PROJECT, env=env)
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["stage"] for e in events] == list(stages)
    assert all(e["status"] == "ok" and e.get("warm") is True for e in events), events
    _assert_identical(_files(runs / "1"), _files(root), runs / "1", root)


BM25_SAVE = """
import sys
from pathlib import Path
from ragrig.core.config import validate_section
from ragrig.index.sparse import Bm25sIndex

cfg = validate_section("index", {"dense": {"method": "flat"}, "sparse": {"method": "bm25s"}}).sparse
texts = ["Aspirin reduces fever in adults.", "Dogs and foxes are animals.", "A fox jumps."]
Bm25sIndex.build(texts, cfg).save(Path(sys.argv[1]))
"""


def test_bm25s_index_files_do_not_follow_the_hash_seed(tmp_path):
    for seed in ("1", "2", "3"):
        proc = subprocess.run(
            [sys.executable, "-c", BM25_SAVE, str(tmp_path / seed)],
            env=project_env({"PYTHONHASHSEED": seed}),
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
    files = [_files(tmp_path / s) for s in ("1", "2", "3")]
    assert "vocab.index.json" in files[0] and "data.csc.index.npy" in files[0]
    assert files[0] == files[1] == files[2]
    vocab = json.loads(files[0]["vocab.index.json"])
    words = [w for w in vocab if w]
    assert (
        words
        == sorted(words)
        == ["adult", "anim", "aspirin", "dog", "fever", "fox", "jump", "reduc"]
    )
    assert list(vocab.values()) == list(range(len(vocab)))


def test_bm25s_rejects_a_corpus_without_any_token():
    from ragrig.core.config import validate_section
    from ragrig.core.errors import DataValidationError
    from ragrig.index.sparse import Bm25sIndex

    cfg = validate_section(
        "index", {"dense": {"method": "flat"}, "sparse": {"method": "bm25s"}}
    ).sparse
    with pytest.raises(DataValidationError, match="no chunk has an indexable token"):
        Bm25sIndex.build(["the", "a of"], cfg)
