"""The shipped verifier against the lexical judge, source by source, on the rows it never saw.

Rows: the validation share of every claim_verification source the shipped model was trained on
(`ragrig.train_verifier.sources.load_sources` with the shipped settings: the same seed, split,
hard negatives and de-duplication, so exactly the rows its model card's validation figures
come from), each an (evidence, claim) pair labelled SUPPORT or not. Two readers of each row:

* **verifier**: the shipped model's P(SUPPORT) of (claim, evidence) >= 0.5, read as the judge
  reads a claim against a window (`Verifier.readings`, the default judge's precision);
* **lexical**: the default claim checker without the verifier (`judge=overlap`, its
  confirmation off), judging the claim as a one-sentence answer with the evidence as its one
  passage: SUPPORT when it extracts a claim, every claim is supported and no hard check
  contradicts one.

Balanced accuracy of SUPPORT vs not per source and per kind of row (original, negation,
distractor, ...), overall, and WiCE (claims against web pages, the closest to a RAG answer
against its retrieved passages) apart.

    python benchmarks/bench_verifier_sources.py [--dataset-root DIR] [--max-per-source N]
        [--json PATH]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import _common as C

DEFAULT_DATA_ROOT = (C.PROJECT_ROOT / ".." / "shared" / "datasets" / "claim_verification").resolve()
SUPPORT = "SUPPORT"


def validation_rows(
    root: Path, max_per_source: int | None, share: float | None = None
) -> list[dict[str, str]]:
    """The shipped model's validation rows (its training settings; `max_per_source` and a
    validation `share` other than the shipped one only for a smoke run on a fixture)."""
    from dataclasses import replace

    from ragrig.train_verifier.public import VerifierTraining
    from ragrig.train_verifier.sources import SOURCES, as_records, load_sources

    cfg = VerifierTraining()
    present = [s for s in cfg.sources if all((root / f).is_file() for f in SOURCES[s].files)]
    share = cfg.validation_share if share is None else share
    cfg = replace(cfg, sources=present, max_per_source=max_per_source, validation_share=share)
    return [r for r in as_records(load_sources(root, cfg)) if r["split"] == "validation"]


def verifier_reads(rows: list[dict[str, str]], params: Path, threads: int) -> list[bool]:
    from ragrig.core.config import load_section
    from ragrig.judge.confirm import VerifierConfirm

    cfg = load_section("judge", params).confirm
    if cfg is None:
        raise SystemExit(f"{params}: judge.confirm is off: no verifier settings to read with")
    confirm = VerifierConfirm.from_config(cfg.model_copy(update={"threads": threads}))
    readings = confirm.verifier().readings([(r["claim"], r["evidence"]) for r in rows])
    return [p_support >= 0.5 for p_support, _ in readings]


def lexical_reads(rows: list[dict[str, str]]) -> list[bool]:
    from ragrig.judge.overlap import OverlapJudge

    judge = OverlapJudge()
    out = []
    for r in rows:
        v = judge.judge("", r["claim"], [r["evidence"]])
        out.append(
            bool(v.extracted) and len(v.supported) == len(v.extracted) and not v.contradictions
        )
    return out


def balanced_accuracy(labels: list[bool], predicted: list[bool]) -> float | None:
    pos = [p for y, p in zip(labels, predicted, strict=True) if y]
    neg = [not p for y, p in zip(labels, predicted, strict=True) if not y]
    parts = [sum(x) / len(x) for x in (pos, neg) if x]
    return sum(parts) / len(parts) if parts else None


def figures(rows: list[dict[str, str]], reads: dict[str, list[bool]]) -> dict[str, Any]:
    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        for name in ("all", r["source"], f"{r['source']}/{r['kind']}"):
            groups[name].append(i)
    out = {}
    for name in sorted(groups, key=lambda g: (g != "all", g)):
        idx = groups[name]
        labels = [rows[i]["label"] == SUPPORT for i in idx]
        out[name] = {"n": len(idx), "support": sum(labels)}
        for reader, pred in reads.items():
            ba = balanced_accuracy(labels, [pred[i] for i in idx])
            out[name][reader] = None if ba is None else round(ba, 4)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--dataset-root",
        type=Path,
        default=DEFAULT_DATA_ROOT,
        help="the claim_verification folder (default: ../shared/datasets/claim_verification)",
    )
    p.add_argument(
        "--validation-share", type=float, default=None, help="smoke runs only (default: shipped)"
    )
    p.add_argument("--max-per-source", type=int, default=None, help="first N groups per source")
    p.add_argument("--threads", type=int, default=2)
    C.add_common_args(p, dataset=False)
    args = p.parse_args(argv)
    C.setup_env()

    t0 = time.perf_counter()
    rows = validation_rows(args.dataset_root, args.max_per_source, args.validation_share)
    build_s = time.perf_counter() - t0
    print(f"{len(rows)} validation rows from {args.dataset_root} in {build_s:.1f} s", flush=True)
    t0 = time.perf_counter()
    verifier = verifier_reads(rows, args.params, args.threads)
    verifier_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    lexical = lexical_reads(rows)
    lexical_s = time.perf_counter() - t0
    table = figures(rows, {"verifier": verifier, "lexical": lexical})
    C.print_table(
        "balanced accuracy of SUPPORT vs not, per source (validation rows)",
        ["rows", "n", "SUPPORT", "verifier BA", "lexical BA"],
        [
            [name, v["n"], v["support"], C.fmt(v["verifier"]), C.fmt(v["lexical"])]
            for name, v in table.items()
            if "/" not in name
        ],
    )
    wice = table.get("wice")
    if wice:
        print(
            f"WiCE (claims against web pages): verifier {C.fmt(wice['verifier'])}, "
            f"lexical {C.fmt(wice['lexical'])} balanced accuracy over {wice['n']} rows"
        )
    print(
        f"verifier {len(rows) / max(verifier_s, 1e-9):.1f} rows/s, lexical "
        f"{len(rows) / max(lexical_s, 1e-9):.1f} rows/s"
    )
    C.write_json(
        args.json,
        {
            **C.header("verifier_sources", ["torch", "transformers"]),
            "rows": len(rows),
            "build_s": round(build_s, 2),
            "verifier_s": round(verifier_s, 2),
            "lexical_s": round(lexical_s, 2),
            "balanced_accuracy": table,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
