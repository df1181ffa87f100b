"""Shared helpers for the benchmark scripts: paths, dataset loading, timing and table output.

Every benchmark imports the library's own code paths (``ragrig.*``) and measures on the real
SciFact data by default (any BEIR folder with --dataset-root; the tests run each benchmark on the
tiny fixture); this module only holds the plumbing they share.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import platform
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# This checkout's library first, as the stage wrappers do (stages/_bootstrap.py): an editable
# install may point at another working tree.
if sys.path[:1] != [str(PROJECT_ROOT / "src")]:
    sys.path.insert(0, str(PROJECT_ROOT / "src"))
# Same relative default as conf/dataset/scifact.yaml, resolved against the project root.
DEFAULT_DATASET_ROOT = (PROJECT_ROOT / ".." / "shared" / "datasets" / "scifact").resolve()
DEFAULT_PARAMS = PROJECT_ROOT / "params.yaml"
# Anserini/Pyserini "BM25 flat" regression for BEIR v1.0.0 SciFact (title + text in one field,
# k1=0.9, b=0.4, Lucene analyzer): nDCG@10 0.6789, R@100 0.9253.
PUBLISHED_BM25_FLAT_SCIFACT_NDCG10 = 0.679
PUBLISHED_BM25_FLAT_SCIFACT_R100 = 0.9253
PUBLISHED_BM25_SOURCE = (
    "https://github.com/castorini/anserini/blob/master/docs/regressions/"
    "regressions-beir-v1.0.0-scifact-flat.md"
)

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "1",
    "DVC_NO_ANALYTICS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def pipeline_stages() -> list[str]:
    """The stages of the project's dvc.yaml, in its order."""
    import yaml

    return list(yaml.safe_load((PROJECT_ROOT / "dvc.yaml").read_text())["stages"])


def setup_env() -> None:
    """Offline model loading and no telemetry; the venv's bin first on PATH."""
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    bindir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if path.split(os.pathsep)[:1] != [bindir]:
        os.environ["PATH"] = bindir + os.pathsep + path


def apply_threads(params: Path, torch: bool = False) -> int:
    """Thread count from params.yaml's runtime section, applied as the stage wrappers do."""
    from ragrig.runtime import stage

    threads = stage.read_runtime(params, "threads")
    stage.apply_threads(threads)
    if torch:
        stage.apply_torch_threads(threads)
    return threads


@dataclass(frozen=True)
class Dataset:
    documents: Any  # pandas DataFrame, the parse stage's documents table
    queries: Any  # pandas DataFrame, the parse stage's queries table (sorted by qid)
    chunks: Any  # pandas DataFrame, the chunk stage's chunks table
    query_ids: list[str]
    query_texts: list[str]
    qrels: dict[str, dict[str, int]]


def load_dataset(root: Path, params: Path, split: str = "test") -> Dataset:
    """A BEIR folder's documents, queries, qrels and chunks, built by the parse and chunk stages'
    own library calls with params.yaml's parse and chunk sections (no claim files: the
    benchmarks do not slice by claim label)."""
    from ragrig.chunk import chunk_documents, make_chunker
    from ragrig.core.config import load_section, validate_section
    from ragrig.parse import make_parser

    root = Path(root)
    ds = validate_section("dataset", {"name": root.name, "root": str(root), "split": split})
    parsed = make_parser(load_section("parse", params)).parse(ds)
    chunks = chunk_documents(
        parsed.documents, make_chunker(load_section("chunk", params)), progress=False
    )
    queries = parsed.queries.sort_values("qid", ignore_index=True)
    qrels: dict[str, dict[str, int]] = {}
    for row in parsed.qrels.itertuples(index=False):
        qrels.setdefault(row.qid, {})[row.doc_id] = int(row.relevance)
    return Dataset(
        documents=parsed.documents,
        queries=queries,
        chunks=chunks,
        query_ids=queries["qid"].tolist(),
        query_texts=queries["text"].tolist(),
        qrels=qrels,
    )


def median(values: Iterable[float]) -> float:
    return float(statistics.median(list(values)))


def machine_info() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "cpu_model": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    with contextlib.suppress(OSError):
        info["load_avg_1_5_15"] = [round(x, 2) for x in os.getloadavg()]
    try:
        import psutil

        info["memory_gib"] = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        pass
    return info


def package_versions(names: Sequence[str]) -> dict[str, str]:
    import importlib.metadata

    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "missing"
    return out


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


def header(name: str, versions: Sequence[str] = ()) -> dict[str, Any]:
    """Common metadata of one benchmark's results."""
    return {
        "benchmark": name,
        "date_utc": now_iso(),
        "machine": machine_info(),
        "versions": package_versions(["ragrig", *versions]),
    }


def write_json(path: Path | None, data: dict[str, Any]) -> None:
    if path is None:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")


def fmt(value: Any, digits: int = 4) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        if value != 0 and abs(value) < 10 ** (-digits + 1):
            return f"{value:.2e}"
        if abs(value) >= 100:
            return f"{value:,.1f}"
        return f"{value:.{min(digits, 2)}f}" if abs(value) >= 10 else f"{value:.{digits}f}"
    return str(value)


def print_table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 4
) -> None:
    """A small fixed-width table on stdout."""
    cells = [[fmt(v, digits) for v in row] for row in rows]
    widths = [
        max(len(c), *(len(r[i]) for r in cells)) if cells else len(c) for i, c in enumerate(columns)
    ]
    print(f"\n{title}")
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)))
    sys.stdout.flush()


def add_common_args(parser: Any, dataset: bool = True, params: bool = True) -> None:
    if dataset:
        parser.add_argument(
            "--dataset-root",
            type=Path,
            default=DEFAULT_DATASET_ROOT,
            help="BEIR folder (default: SciFact, ../shared/datasets/scifact from the project root)",
        )
    if params:
        parser.add_argument(
            "--params",
            type=Path,
            default=DEFAULT_PARAMS,
            help="params.yaml whose parse/chunk/embed/index/retrieve/runtime sections are used",
        )
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
