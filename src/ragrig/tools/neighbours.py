"""`ragrig neighbours A B --probes FILE`: how stable a fixed set of probe queries' nearest
neighbours is across two index or embedder versions.

A version is a project folder after a run (its `params.yaml`, `data/chunk/chunks.parquet`,
`data/embed/chunk_ids.parquet`, `data/index/dense.faiss`). Each probe is embedded by each
version's own query embedder and searched in that version's own dense index (its retrieve
section's efSearch / nprobe); the two top-k lists are compared by the documents they name
(chunkings may differ, documents do not), never by their vectors: two embedders' coordinates are
not comparable, so no cosine across versions is ever taken.

Per probe: overlap@k (the share of version A's top-k documents also in B's), Jaccard of the two
sets, and rank-biased overlap (RBO, persistence `p`, truncated at depth k: the weight of the
first ranks agreeing). Over the probes: each figure's mean with a bootstrap interval, and the
probes whose overlap is below `--min-overlap`, listed worst first.

The probes file holds one query per line (plain text), or JSONL with `text` (and an optional
`id`); a blank line is skipped; a file with no probe, or a version folder missing a file, stops
with one line naming it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ragrig.core.errors import DataValidationError, RagrigError

FILES = ("params.yaml", "data/chunk/chunks.parquet", "data/embed/chunk_ids.parquet",
         "data/index/dense.faiss")  # fmt: skip


def read_probes(path: Path) -> list[tuple[str, str]]:
    """(id, text) of each probe."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataValidationError(f"{path}: cannot read the probes: {exc}") from None
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if line.lstrip().startswith("{"):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataValidationError(f"{path}:{n}: not JSON: {exc.msg}") from None
            text = rec.get("text")
            if not isinstance(text, str) or not text.strip():
                raise DataValidationError(f"{path}:{n}: a probe needs a non-empty 'text'")
            out.append((str(rec.get("id", n)), text))
        else:
            out.append((str(n), line.strip()))
    if not out:
        raise DataValidationError(f"{path}: no probe queries")
    return out


def rbo(a: list[str], b: list[str], p: float) -> float:
    """Rank-biased overlap of two rankings truncated at depth k = max(len): (1 - p) times the
    sum over depths d of p^(d-1) times the overlap share at d, normalised by the weight of the
    first k depths so that identical lists score 1."""
    k = max(len(a), len(b))
    if k == 0:
        return 1.0
    total = weight = 0.0
    for d in range(1, k + 1):
        share = len(set(a[:d]) & set(b[:d])) / d
        total += p ** (d - 1) * share
        weight += p ** (d - 1)
    return total / weight


def compare(a: list[str], b: list[str], p: float) -> dict[str, float]:
    sa, sb = set(a), set(b)
    return {
        "overlap": len(sa & sb) / len(sa) if sa else 1.0,
        "jaccard": len(sa & sb) / len(sa | sb) if sa | sb else 1.0,
        "rbo": rbo(a, b, p),
    }


class Version:
    """One version's query embedder, dense index and row -> document map."""

    def __init__(self, root: Path):
        from ragrig.core.config import load_section
        from ragrig.core.io import read_faiss, read_table
        from ragrig.embed import make_embedder
        from ragrig.index.dense import set_search_params

        missing = [f for f in FILES if not (root / f).exists()]
        if missing:
            raise DataValidationError(
                f"{root}: not a finished run: missing {', '.join(missing)} (run dvc repro there)"
            )
        params = root / "params.yaml"
        cfg = load_section("embed", params)
        self.embedder = make_embedder(cfg, role="query")
        self.fingerprint = (
            self.embedder.fingerprint() if hasattr(self.embedder, "fingerprint") else {}
        )
        self.index = read_faiss(root / "data/index/dense.faiss")
        rcfg = load_section("retrieve", params)
        set_search_params(self.index, rcfg.ef_search, rcfg.nprobe)
        chunks = read_table(root / "data/chunk/chunks.parquet", "chunks")
        ids = read_table(root / "data/embed/chunk_ids.parquet", "ids")["id"].tolist()
        doc_of = dict(zip(chunks["chunk_id"], chunks["doc_id"], strict=True))
        self.docs = [doc_of[i] for i in ids]

    def neighbours(self, texts: list[str], k: int) -> list[list[str]]:
        """Each text's top-k distinct documents, best first (a document's best chunk)."""
        from ragrig.index.dense import search

        vectors = np.asarray(self.embedder.encode(texts), dtype=np.float32)
        _, rows = search(self.index, vectors, min(self.index.ntotal, 4 * k))
        out = []
        for row in rows:
            seen: list[str] = []
            for r in row:
                if r < 0:
                    continue
                d = self.docs[int(r)]
                if d not in seen:
                    seen.append(d)
                if len(seen) == k:
                    break
            out.append(seen)
        return out


def stability(a: Version, b: Version, probes: list[tuple[str, str]], k: int, p: float,
              seed: int = 13, resamples: int = 1000, min_overlap: float = 0.5) -> dict[str, Any]:  # fmt: skip
    """Per probe and overall (module doc)."""
    from ragrig.metrics.bootstrap import bootstrap_ci

    texts = [t for _, t in probes]
    na, nb = a.neighbours(texts, k), b.neighbours(texts, k)
    rows = [
        {"id": pid, "text": t, **compare(x, y, p), "a": x, "b": y}
        for (pid, t), x, y in zip(probes, na, nb, strict=True)
    ]
    summary: dict[str, Any] = {"probes": len(rows), "k": k, "rbo_p": p}
    for name in ("overlap", "jaccard", "rbo"):
        values = [r[name] for r in rows]
        low, high = bootstrap_ci(values, seed, resamples, 0.05)
        summary[name] = {"mean": float(np.mean(values)), "low": low, "high": high}
    summary["same_embedder"] = a.fingerprint == b.fingerprint and bool(a.fingerprint)
    summary["unstable"] = [
        r["id"]
        for r in sorted(rows, key=lambda r: (r["overlap"], r["id"]))
        if r["overlap"] < min_overlap
    ]
    return {"summary": summary, "probes": rows}


def cmd_neighbours(args: argparse.Namespace) -> int:
    from ragrig.core.io import atomic_write_text

    try:
        if args.k < 1 or not 0 < args.rbo_p < 1 or not 0 <= args.min_overlap <= 1:
            raise DataValidationError(
                f"--k {args.k} must be at least 1, --rbo-p {args.rbo_p:g} within (0, 1), "
                f"--min-overlap {args.min_overlap:g} within [0, 1]"
            )
        probes = read_probes(Path(args.probes))
        a, b = Version(Path(args.a)), Version(Path(args.b))
        got = stability(a, b, probes, args.k, args.rbo_p, min_overlap=args.min_overlap)
    except RagrigError as exc:
        print(f"ragrig neighbours: error: {exc}", file=sys.stderr)
        return 2
    s = got["summary"]
    print(
        f"ragrig neighbours: {s['probes']} probes, top {s['k']} documents, {args.a} against "
        f"{args.b} ({'the same' if s['same_embedder'] else 'another'} embedder; compared by "
        "the documents named, never by cosine)"
    )
    for name in ("overlap", "jaccard", "rbo"):
        f = s[name]
        print(f"  {name:<8} {f['mean']:.4f} [{f['low']:.4f}, {f['high']:.4f}]")
    print(f"  {len(s['unstable'])} probes below overlap {args.min_overlap:g}"
          + (f": {', '.join(s['unstable'][:10])}" if s["unstable"] else ""))  # fmt: skip
    out = Path(args.out)
    atomic_write_text(out, json.dumps(got, indent=2) + "\n")
    print(f"ragrig neighbours: wrote {out}")
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "neighbours",
        help="stability of probe queries' nearest documents across two index or embedder "
        "versions (never compared by cosine)",
    )
    p.add_argument("a", help="the first version: a project folder after a run")
    p.add_argument("b", help="the second version")
    p.add_argument("--probes", required=True, help="one query per line, or JSONL with text")
    p.add_argument("--k", type=int, default=10, help="documents compared per probe")
    p.add_argument("--rbo-p", type=float, default=0.9, help="RBO persistence")
    p.add_argument("--min-overlap", type=float, default=0.5, help="probes below it are listed")
    p.add_argument("--out", default="reports/neighbours.json")
    p.set_defaults(func=cmd_neighbours)
