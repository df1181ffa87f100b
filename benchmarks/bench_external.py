"""External consistency (ragrig.judge.external): claims edited to contradict a corpus document,
retrieved against the whole corpus and read by the shipped verifier.

Probes: SciFact's SUPPORT rationale sentences (`<root>/original/claims_dev.jsonl`, the sentence
indices read as build_probes.py reads them), or, for a folder without claim files (the smoke
fixture), sentences of the corpus's documents (>= 6 words). Each sentence is checked as it
stands (`original`: the corpus holds it, expected to pass: supported, not contradicted) and with
each rule edit of ragrig.judge.perturb that applies (`negation`, `number`, `entity`: expected
flagged as contradicted). Every probe is retrieved against every chunk of the corpus (BM25 built
with params.yaml's parse, chunk and index.sparse sections), its evidence windows chosen among the
top `--k` chunks and read by the verifier (judge.external defaults). Reported per kind: the share
flagged (contradicted), passed (supported) and the share whose source document was retrieved,
with the verifier's time per claim.

    python benchmarks/bench_external.py [--dataset-root DIR] [--max-sentences N] [--k 5]
        [--json PATH]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

import _common as C

TARGETS = {"edited_flagged": 0.90, "original_passed": 0.90}
EDITS = ("negation", "number", "entity")
MIN_WORDS = 6


def sentences_of(root: Path, docs: dict[str, str], seed: int, n: int) -> list[tuple[str, str]]:
    """(doc id, sentence) probes: SciFact's SUPPORT rationale sentences, else corpus sentences."""
    from ragrig.core.text import split_sentences

    claims = root / "original" / "claims_dev.jsonl"
    out: list[tuple[str, str]] = []
    if claims.exists():
        sys.path.insert(0, str(Path(__file__).parent))
        import build_probes

        sents = build_probes.scifact_sentences(root)
        seen = set()
        for it in build_probes.scifact_claims(root):
            doc = it["source_id"].split(":")[2]
            s = it["sentences"][it["evidence_idx"]].strip()
            if (doc, s) not in seen and len(s.split()) >= MIN_WORDS and doc in sents:
                seen.add((doc, s))
                out.append((doc, s))
    else:
        for doc, text in sorted(docs.items()):
            out += [(doc, s) for s in split_sentences(text) if len(s.split()) >= MIN_WORDS]
    rng = random.Random(seed)
    return sorted(rng.sample(out, n)) if n < len(out) else out


def probes(items: list[tuple[str, str]], docs: dict[str, str], seed: int) -> list[dict]:
    from ragrig.judge import perturb

    pool = sorted({n for _, s in items for n in perturb.swappable_names(s)})
    rows = []
    for doc, s in items:
        rng = random.Random(f"{seed}:{doc}:{s[:40]}")
        made = {
            "original": s,
            "negation": perturb.negate(s),
            "number": perturb.change_number(s, docs[doc], rng),
            "entity": perturb.swap_entity(s, docs[doc], pool, rng),
        }
        rows += [
            {"doc": doc, "kind": k, "claim": t}
            for k, t in made.items()
            if t is not None and (k == "original" or t != s)
        ]
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    C.add_common_args(p)
    p.add_argument("--max-sentences", type=int, default=200, help="sampled source sentences")
    p.add_argument("--k", type=int, default=None, help="chunks retrieved per claim")
    p.add_argument("--window", type=int, default=None, help="sentences per evidence window")
    p.add_argument("--max-length", type=int, default=None, help="verifier tokens per pair")
    p.add_argument("--contradict-threshold", type=float, default=None)
    p.add_argument("--seed", type=int, default=13)
    args = p.parse_args(argv)
    C.setup_env()
    threads = C.apply_threads(args.params, torch=True)

    from ragrig.core.config import load_section
    from ragrig.core.registry import resolve
    from ragrig.index import SPARSE_INDEXES
    from ragrig.judge.config import ExternalConfig
    from ragrig.judge.confirm import shared_verifier
    from ragrig.judge.external import ExternalCheck, index_search
    from ragrig.judge.overlap import ClaimSet, OverlapJudge
    from ragrig.weights.precision import resolve_precision

    ecfg = ExternalConfig(
        **{
            key: value
            for key, value in (
                ("k", args.k),
                ("window", args.window),
                ("max_length", args.max_length),
                ("contradict_threshold", args.contradict_threshold),
            )
            if value is not None
        }
    )
    ds = C.load_dataset(args.dataset_root, args.params)
    docs = dict(zip(ds.documents["doc_id"], ds.documents["text"], strict=True))
    rows = probes(sentences_of(args.dataset_root, docs, args.seed, args.max_sentences), docs, 13)
    sparse_cfg = load_section("index", args.params).sparse
    t0 = time.perf_counter()
    index = resolve(SPARSE_INDEXES, sparse_cfg.method, "sparse index").build(
        ds.chunks["text"].tolist(), sparse_cfg
    )
    index_s = time.perf_counter() - t0
    quantize = resolve_precision(ecfg.quantize, fp32="none")
    verifier = shared_verifier(ecfg.model, ecfg.max_length, ecfg.batch_size, threads, quantize)
    verifier.readings([("warm up", "warm up")])
    splitter = OverlapJudge(min_content_words=1)
    sets = []
    for r in rows:  # the whole sentence is one claim: its words and surface are the sentence's
        cs = splitter.claim_set("", r["claim"])
        sets.append(
            ClaimSet(
                [r["claim"]],
                {r["claim"]: set().union(*cs.words.values())},
                {r["claim"]: r["claim"]},
            )
        )
    check = ExternalCheck(
        index_search(index),
        ds.chunks["text"].tolist(),
        ds.chunks["doc_id"].tolist(),
        verifier.readings,
        ecfg.k,
        ecfg.window,
        ecfg.windows_per_claim,
        ecfg.support_threshold,
        ecfg.contradict_threshold,
        ecfg.checks,
        splitter,
    )
    t0 = time.perf_counter()
    hits = index_search(index)([r["claim"] for r in rows], min(ecfg.k, len(ds.chunks)))
    search_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    results = check.check_all(sets)
    check_s = time.perf_counter() - t0
    chunk_doc = ds.chunks["doc_id"].tolist()
    by: dict[str, Counter] = {}
    misses: dict[str, list] = {}
    for r, res, hit in zip(rows, results, hits, strict=True):
        c = by.setdefault(r["kind"], Counter())
        one = res.claims[0]
        c["n"] += 1
        c["flagged"] += one.contradicted
        c["passed"] += one.supported and not one.contradicted
        c["source_retrieved"] += r["doc"] in {chunk_doc[i] for i in hit}
        c["source_in_evidence"] += r["doc"] in one.doc_ids
        c[f"flagged_by_{one.kind or 'none'}"] += one.contradicted
        wrong = not one.contradicted if r["kind"] != "original" else one.contradicted
        wrong = wrong or (r["kind"] == "original" and not one.supported)
        if wrong and len(misses.setdefault(r["kind"], [])) < 5:
            misses[r["kind"]].append(
                {
                    "claim": r["claim"],
                    "p_support": round(one.p_support, 3),
                    "p_contradict": round(one.p_contradict, 3),
                    "kind": one.kind,
                    "evidence": one.evidence[:200],
                }
            )
    kinds = {
        k: {
            "n": c["n"],
            "flagged": c["flagged"] / c["n"],
            "passed": c["passed"] / c["n"],
            "source_retrieved": c["source_retrieved"] / c["n"],
            "flagged_by": {
                k.removeprefix("flagged_by_"): v
                for k, v in sorted(c.items())
                if k.startswith("flagged_by_") and v
            },
        }
        for k, c in by.items()
    }
    edited = [by[k] for k in EDITS if k in by]
    n_edit = sum(c["n"] for c in edited)
    figures = {
        "edited_flagged": sum(c["flagged"] for c in edited) / n_edit if n_edit else None,
        "original_passed": kinds.get("original", {}).get("passed"),
    }
    met = None if None in figures.values() else all(figures[k] >= v for k, v in TARGETS.items())
    result = {
        **C.header("external", ["torch", "bm25s"]),
        "config": {
            "dataset": str(args.dataset_root),
            "documents": len(docs),
            "chunks": len(ds.chunks),
            "sentences": len({(r["doc"], r["claim"]) for r in rows if r["kind"] == "original"}),
            "probes": len(rows),
            **ecfg.model_dump(),
            "threads": threads,
            "precision": quantize,
        },
        "kinds": kinds,
        **figures,
        "misses": misses,
        "targets": TARGETS,
        "target_met": met,
        "seconds": {
            "index_build": round(index_s, 3),
            "search": round(search_s, 3),
            "search_and_verify": round(check_s, 3),
            "per_claim_ms": round(check_s / len(rows) * 1e3, 2) if rows else None,
        },
    }
    C.print_table(
        f"external consistency on {args.dataset_root.name}: {len(rows)} probes, k={ecfg.k}",
        ["kind", "n", "flagged", "passed", "source retrieved"],
        [[k, v["n"], v["flagged"], v["passed"], v["source_retrieved"]] for k, v in kinds.items()],
    )
    print(
        f"edited flagged {C.fmt(figures['edited_flagged'])}, original passed "
        f"{C.fmt(figures['original_passed'])} (targets 0.90 / 0.90: met {met}); "
        f"{result['seconds']['per_claim_ms']} ms per claim (search + verifier, {threads} threads)"
    )
    C.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
