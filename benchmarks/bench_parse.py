"""parse=docling on docling's test documents: speed per format, peak memory, a 100-document folder.

Measured through the parse stage's own code (ragrig.parse.docling, model-free: rule-based
backends, PDFs through docling's native pipeline):

* per format, documents/s and pages/s: every test document converted one at a time by one
  worker (`workers=1`, so a file's time is not shared with another conversion), from the
  conversion seconds the parse report records per file (worker start-up excluded; the wall time
  of the whole run is reported beside it);
* peak memory on the largest test document: a fresh process imports docling, builds the
  converter (baseline resident memory) and converts that one file (peak resident memory, from
  getrusage);
* a 100-document folder built from copies of the test documents that parsed without OCR, each
  copy with distinct content (a numbered line added to HTML, Markdown, JATS and DOCX copies; PDF,
  PPTX and XLSX copies are byte copies under distinct paths, so their ids still differ), parsed by
  `DoclingParser.parse` with `parse.workers` processes, in a fresh process: the wall time of
  the whole parse (worker start-up, i.e. docling's import, included) against the target of one
  minute on 2 cores, and the CPU seconds the workers spent converting.

    python benchmarks/bench_parse.py [--dataset-root ../shared/datasets/docling_test_docs]
        [--copies 100] [--workers N (default: runtime.threads)]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import defaultdict
from pathlib import Path

import _common as C

DEFAULT_ROOT = (C.PROJECT_ROOT / ".." / "shared" / "datasets" / "docling_test_docs").resolve()
EXCLUDE = ["groundtruth/*", "PROVENANCE.md", "README*"]  # references, not documents
TARGET_S = 60.0

PEAK_SCRIPT = """
import json, resource, sys, time
from ragrig.parse import docling_worker as w
conv = w.make_converter()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
out = w.convert(conv, sys.argv[1], sys.argv[2])
sec = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"status": out["status"], "pages": out.get("pages", 0), "seconds": sec,
                  "baseline_rss_mib": base / 1024, "peak_rss_mib": peak / 1024}))
"""


def _parser(workers: int, timeout_s: float, exclude: list[str]):
    from ragrig.parse.docling import DoclingParser

    return DoclingParser(
        workers=workers, timeout_s=timeout_s, max_failure_share=1.0, exclude=tuple(exclude)
    )


def per_format(root: Path, timeout_s: float) -> tuple[dict, list, float]:
    parser = _parser(1, timeout_s, EXCLUDE)
    t0 = time.perf_counter()
    entries = parser.convert([root])
    wall = time.perf_counter() - t0
    rows: dict[str, dict] = defaultdict(
        lambda: {"files": 0, "pages": 0, "seconds": 0.0, "cpu": 0.0}
    )
    for e in entries:
        if e.status != "parsed":
            continue
        r = rows[e.format]
        r["files"] += 1
        r["pages"] += e.pages
        r["seconds"] += e.seconds
        r["cpu"] += e.result.get("cpu_s", 0.0)
    out = {}
    for fmt, r in sorted(rows.items()):
        out[fmt] = {
            "files": r["files"],
            "pages": r["pages"],
            "conversion_s": round(r["seconds"], 3),
            "documents_per_s": round(r["files"] / r["seconds"], 2),
            "pages_per_s": round(r["pages"] / r["seconds"], 2) if r["pages"] else None,
            # the worker's CPU seconds: what the rates would be on an idle core
            "cpu_s": round(r["cpu"], 3),
            "documents_per_cpu_s": round(r["files"] / r["cpu"], 2),
            "pages_per_cpu_s": round(r["pages"] / r["cpu"], 2) if r["pages"] else None,
        }
    files = [e.report() for e in entries]
    return out, files, wall


def peak_memory(path: Path, fmt: str) -> dict:
    import os

    env = {**os.environ, **C.OFFLINE_ENV, "PYTHONPATH": str(C.PROJECT_ROOT / "src")}
    proc = subprocess.run(
        [sys.executable, "-c", PEAK_SCRIPT, str(path), fmt],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result = {k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}
    return {"file": path.name, "format": fmt, "bytes": path.stat().st_size, **result}


def _distinct_copy(src: Path, dst: Path, n: int) -> None:
    """A copy of src whose text differs from every other copy (PDF, PPTX, XLSX: a byte copy)."""
    line = f"Copy number {n} of {src.name} for the parse benchmark."
    suffix = src.suffix.lower()
    if suffix in (".html", ".htm"):
        text = src.read_text(encoding="utf-8", errors="replace")
        text, k = re.subn(r"(<body[^>]*>)", rf"\1<p>{line}</p>", text, count=1, flags=re.I)
        dst.write_text(text if k else f"<p>{line}</p>" + text, encoding="utf-8")
    elif suffix in (".md", ".markdown"):
        dst.write_text(src.read_text(encoding="utf-8") + f"\n\n{line}\n", encoding="utf-8")
    elif suffix in (".nxml", ".xml"):
        text = src.read_text(encoding="utf-8")
        text = re.sub(r"(<body[^>]*>)", rf"\1<p>{line}</p>", text, count=1)
        dst.write_text(text, encoding="utf-8")
    elif suffix == ".docx":
        para = f"<w:p><w:r><w:t>{line}</w:t></w:r></w:p>".encode()
        with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
            for item in zin.infolist():
                data = zin.read(item.filename)
                if item.filename == "word/document.xml":
                    data = re.sub(rb"(<w:body[^>]*>)", lambda m: m.group(1) + para, data, count=1)
                zout.writestr(item, data)
    else:
        shutil.copyfile(src, dst)


def hundred(sources: list[Path], copies: int, workers: int, timeout_s: float) -> dict:
    """Parse a folder of `copies` distinct copies of `sources` (run in a fresh process)."""
    from ragrig.dataset.config import DatasetConfig

    with tempfile.TemporaryDirectory(prefix="ragrig-bench-parse-") as tmp:
        folder = Path(tmp) / "docs"
        folder.mkdir()
        for n in range(copies):
            src = sources[n % len(sources)]
            _distinct_copy(src, folder / f"{n:03d}_{src.name}", n)
        ds = DatasetConfig(name="bench", root=str(folder))
        parser = _parser(workers, timeout_s, [])
        t0 = time.perf_counter()
        entries = parser.convert([folder])  # = parser.parse(ds), timed in two parts
        t1 = time.perf_counter()
        parsed = parser.assemble(entries, ds, [folder])
        wall = time.perf_counter() - t0
        assemble_s = time.perf_counter() - t1
    cpu = sum(e.result.get("cpu_s", 0.0) for e in entries)
    counts = parsed.report["counts"]
    pages = sum(f["pages"] for f in parsed.report["files"])
    by_format = {fmt: b["files"] for fmt, b in parsed.report["by_format"].items()}
    return {
        "files": copies,
        "by_format": by_format,
        "pages": pages,
        "counts": counts,
        "distinct_file_ids": int(parsed.documents["file_id"].nunique()),
        "documents_rows": len(parsed.documents),
        "elements": len(parsed.elements),
        "workers": workers,
        "wall_s": round(wall, 2),
        "convert_wall_s": round(wall - assemble_s, 2),
        "assemble_s": round(assemble_s, 2),
        # CPU seconds the workers spent converting (start-up excluded): on 2 idle cores the
        # conversions need about cpu / 2 of wall time
        "workers_cpu_s": round(cpu, 2),
        "documents_per_s": round(copies / wall, 2),
        "target_s": TARGET_S,
        "target_met": wall < TARGET_S and counts["parsed"] == copies,
    }


def _fresh_hundred(sources: list[Path], copies: int, workers: int, timeout_s: float) -> dict:
    """hundred() in a new process that has not loaded docling: its wall time includes the
    workers' start-up (docling's import), as a parse stage's does."""
    import os

    if not sources:
        raise SystemExit("no test document parsed: nothing to copy")
    with tempfile.TemporaryDirectory(prefix="ragrig-bench-parse-") as tmp:
        io = Path(tmp) / "sources.json"
        io.write_text(json.dumps([str(p) for p in sources]))
        cmd = [sys.executable, __file__, "--copy-run", str(io), "--copies", str(copies)]
        cmd += ["--workers", str(workers), "--timeout-s", str(timeout_s)]
        subprocess.run(cmd, check=True, env={**os.environ, **C.OFFLINE_ENV})
        return json.loads(io.read_text())


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    C.add_common_args(p, dataset=False)
    p.add_argument("--dataset-root", type=Path, default=DEFAULT_ROOT, help="folder of documents")
    p.add_argument("--copies", type=int, default=100, help="documents in the copied folder")
    p.add_argument("--workers", type=int, default=None, help="default: runtime.threads")
    p.add_argument("--timeout-s", type=float, default=120.0)
    p.add_argument("--copy-run", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    C.setup_env()
    workers = args.workers or C.apply_threads(args.params)

    result = C.header("parse", ["docling-slim", "docling-core", "docling-parse"])
    if args.copy_run:  # the 100-document parse, in its own process (see _fresh_hundred)
        sources = [Path(x) for x in json.loads(args.copy_run.read_text())]
        out = hundred(sources, args.copies, workers, args.timeout_s)
        args.copy_run.write_text(json.dumps(out))
        return out

    formats, files, wall = per_format(args.dataset_root, args.timeout_s)
    supported = [f for f in files if f["status"] != "skipped" or "OCR" in f["reason"]]
    largest = max(supported, key=lambda f: (args.dataset_root / f["path"]).stat().st_size)
    memory = peak_memory(args.dataset_root / largest["path"], largest["format"])
    sources = [args.dataset_root / f["path"] for f in files if f["status"] == "parsed"]
    copies = _fresh_hundred(sources, args.copies, workers, args.timeout_s)
    result |= {
        "config": {
            "dataset_root": str(args.dataset_root),
            "exclude": EXCLUDE,
            "timeout_s": args.timeout_s,
        },
        "per_format": formats,
        "per_format_wall_s": round(wall, 2),
        "files": files,
        "needs_ocr": [f["path"] for f in files if "OCR" in f["reason"]],
        "peak_memory": memory,
        "hundred": copies,
        "target_met": copies["target_met"],
    }

    C.print_table(
        f"docling conversion per format, one worker ({args.dataset_root.name}; wall {wall:.1f} s "
        "with worker start-up)",
        [
            "format",
            "files",
            "pages",
            "conversion s",
            "documents/s",
            "pages/s",
            "CPU s",
            "documents/CPU-s",
            "pages/CPU-s",
        ],
        [
            [
                f,
                r["files"],
                r["pages"],
                r["conversion_s"],
                r["documents_per_s"],
                r["pages_per_s"],
                r["cpu_s"],
                r["documents_per_cpu_s"],
                r["pages_per_cpu_s"],
            ]
            for f, r in formats.items()
        ],
    )
    not_parsed = [f for f in files if f["status"] != "parsed"]
    for f in not_parsed:
        print(f"  {f['status']}: {f['path']}: {f['reason']}")
    print(
        f"\npeak memory converting the largest document ({memory['file']}, "
        f"{memory['bytes']:,} bytes, {memory['pages']} pages): {memory['peak_rss_mib']:.0f} MiB "
        f"resident (converter loaded: {memory['baseline_rss_mib']:.0f} MiB), "
        f"{memory['seconds']:.2f} s"
    )
    print(
        f"{copies['files']} documents ({copies['by_format']}, {copies['pages']} pages) with "
        f"{copies['workers']} workers: {copies['wall_s']:.1f} s wall "
        f"({copies['documents_per_s']:.1f} documents/s), {copies['counts']}, "
        f"{copies['distinct_file_ids']} distinct file ids; conversions {copies['convert_wall_s']:.1f} s "
        f"wall, {copies['workers_cpu_s']:.1f} CPU-s in the workers; tables {copies['assemble_s']:.1f} s; "
        f"target < {TARGET_S:.0f} s: "
        f"{'met' if copies['target_met'] else 'NOT met'}"
    )
    C.write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
