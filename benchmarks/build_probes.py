"""Build a perturbation probe set from supported claims of SciFact and MTRAG (JSONL).

Sources (none of them is training data for a verifier, which trains on SciFact *train*):

* **SciFact dev/test** claims (`<scifact>/original/claims_dev.jsonl`, `claims_test.jsonl`; the
  test claims carry no labels, so only dev contributes): a claim whose rationale in one abstract
  is labelled SUPPORT, with that abstract as its context. Rationale sentence indices refer to the
  abstract's original sentence list, read from `original/scifact_hf_export_csv.zip` when present
  (SciFact as staged); a BEIR folder without it has its abstract split by `ragrig.core.text`.
* **MTRAG** human ratings (`<mtrag>/reference_subset_with_human_evaluations.json[.gz]`): an
  answer rated faithful (mean human faithfulness rating >= 3 of 4) gives one of its sentences
  (at least 6 words, not a refusal, list marker and bold markup removed; chosen with the seed),
  with the task's passages as context.

From each supported claim: the claim itself (`original`, expected supported), its perturbations
(`negation`, `changed_number`, `swapped_entity` with a name taken from another document,
`dropped_qualifier`, `reversed_relation`; expected not supported), and `split_evidence`: the
claim unchanged, its evidence sentence cut into two adjacent sentences (expected supported).
Kinds that do not apply to a claim (no auxiliary, no number...) are counted as skipped.

Answer level (MTRAG): the same edits made to the claim's sentence inside its whole answer
(`level` "answer", the answer in `answer`, the question in `question`; kind `original`: the
answer with that sentence's markup removed, nothing else changed), for a judge's decision on the
whole answer, which is what the scorecard and the gate read.

One probe a line: id, kind, level ("claim" / "answer"), claim, contexts, expected ("supported" /
"not_supported"), source, source_id, original (answer level: answer, question). Seeded and deterministic: the same inputs and seed give the same bytes.
The output holds dataset text (SciFact: CC BY-NC 2.0): write it outside the repository.

    python benchmarks/build_probes.py --out /tmp/probes.jsonl [--scifact-root DIR]
        [--mtrag-root DIR|none] [--seed 13] [--max-claims N]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from collections import Counter
from pathlib import Path

import _common as C

DEFAULT_MTRAG_ROOT = (C.PROJECT_ROOT / ".." / "shared" / "datasets" / "mtrag_human").resolve()
MTRAG_FILE = "reference_subset_with_human_evaluations.json"
SCIFACT_CLAIM_FILES = ("claims_dev.jsonl", "claims_test.jsonl")
SCIFACT_ZIP = "scifact_hf_export_csv.zip"
FAITHFUL_MIN_MEAN = 3.0
MIN_CLAIM_WORDS = 6
PERTURBATIONS = (
    "negation",
    "changed_number",
    "swapped_entity",
    "dropped_qualifier",
    "reversed_relation",
)
KINDS = ("original", *PERTURBATIONS, "split_evidence")
EXPECTED = {k: "not_supported" for k in PERTURBATIONS} | {
    "original": "supported",
    "split_evidence": "supported",
}


class ProbeError(ValueError):
    """Input the probe builder cannot use, named with its file and line."""


# --- SciFact ----------------------------------------------------------------------------------


def scifact_sentences(root: Path) -> dict[str, list[str]]:
    """doc id -> its abstract's sentences (indices as in the rationale annotations)."""
    zpath = root / "original" / SCIFACT_ZIP
    if zpath.exists():  # read as the verifier's training pairs read it
        from ragrig.core.errors import DataValidationError
        from ragrig.train_verifier.data import read_sentences

        try:
            return read_sentences(zpath)
        except DataValidationError as exc:
            raise ProbeError(str(exc)) from exc
    from ragrig.core.text import split_sentences
    from ragrig.dataset.beir import iter_jsonl

    corpus = root / "corpus.jsonl"
    if not corpus.exists():
        corpus = root / "corpus.jsonl.gz"
    if not corpus.exists():
        raise ProbeError(f"{root}: no corpus.jsonl[.gz] and no original/{SCIFACT_ZIP}")
    return {str(rec["_id"]): split_sentences(rec.get("text", "")) for _, rec in iter_jsonl(corpus)}


def scifact_claims(root: Path) -> list[dict]:
    """Supported claims: {source_id, claim, contexts, evidence (sentence texts)}."""
    from ragrig.dataset.beir import iter_jsonl

    files = [root / "original" / f for f in SCIFACT_CLAIM_FILES]
    if not any(f.exists() for f in files):
        raise ProbeError(f"{root}/original: none of {', '.join(SCIFACT_CLAIM_FILES)}")
    sentences = scifact_sentences(root)
    out = []
    for path in files:
        if not path.exists():
            continue
        for lineno, rec in iter_jsonl(path):
            evidence = rec.get("evidence") or {}
            for doc_id in sorted(evidence, key=str):
                rationales = evidence[doc_id]
                if not rationales or any(r.get("label") != "SUPPORT" for r in rationales):
                    continue
                doc = sentences.get(str(doc_id))
                if doc is None:
                    raise ProbeError(f"{path}:{lineno}: evidence names unknown document {doc_id}")
                idx = rationales[0].get("sentences") or []
                if not idx or max(idx) >= len(doc):
                    raise ProbeError(
                        f"{path}:{lineno}: rationale sentences {idx} outside document {doc_id} "
                        f"({len(doc)} sentences)"
                    )
                out.append(
                    {
                        "source_id": f"scifact:{rec['id']}:{doc_id}",
                        "claim": rec["claim"].strip(),
                        "sentences": doc,
                        "evidence_idx": idx[0],
                    }
                )
                break  # one supporting document per claim
    return out


# --- MTRAG ------------------------------------------------------------------------------------


def _read_mtrag(root: Path) -> dict:
    for path in (root / f"{MTRAG_FILE}.gz", root / MTRAG_FILE):
        if path.exists():
            opener = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rt", encoding="utf-8") as f:
                try:
                    return json.load(f)
                except json.JSONDecodeError as exc:
                    raise ProbeError(f"{path}: not JSON ({exc})") from exc
    raise ProbeError(f"{root}: no {MTRAG_FILE}[.gz]")


def mean_faithfulness(ev: dict, where: str) -> float:
    votes = (ev.get("annotations") or {}).get("faithfulness") or {}
    values = []
    for annotator, vote in votes.items():
        v = str(vote.get("value", ""))
        if v not in {"1", "2", "3", "4"}:
            raise ProbeError(f"{where}: faithfulness rating {v!r} of {annotator} not in 1-4")
        values.append(int(v))
    if not values:
        raise ProbeError(f"{where}: no faithfulness rating")
    return sum(values) / len(values)


def mtrag_claims(root: Path, seed: int) -> list[dict]:
    """One sentence of each answer rated faithful, with its task's passages."""
    from ragrig.core.text import split_sentences, strip_citations
    from ragrig.judge import entities as ent
    from ragrig.judge.refusal import is_refusal

    data = _read_mtrag(root)
    docs = {d["document_id"]: d.get("text", "") for d in data.get("documents", [])}
    tasks = {t["task_id"]: t for t in data.get("tasks", [])}
    out = []
    for i, ev in enumerate(data.get("evaluations", [])):
        where = f"{root / MTRAG_FILE}: evaluations[{i}]"
        task = tasks.get(ev.get("task_id"))
        if task is None:
            raise ProbeError(f"{where}: unknown task_id {ev.get('task_id')!r}")
        if mean_faithfulness(ev, where) < FAITHFUL_MIN_MEAN:
            continue
        ids = [c["document_id"] for c in task.get("contexts", [])]
        missing = [d for d in ids if d not in docs]
        if missing:
            raise ProbeError(f"{where}: task context names unknown documents {missing}")
        contexts = [docs[d] for d in ids]
        if not contexts:
            continue
        answer = ev.get("model_response", "")
        sentences = (
            # no list marker ("3. Click ..."): its number is no claim to change
            (ent._LIST_MARKER.sub("", strip_citations(x)).replace("**", "").strip(), x)
            for x in split_sentences(answer)
        )
        candidates = [
            (s, x)
            for s, x in sentences
            if len(s.split()) >= MIN_CLAIM_WORDS and not is_refusal(s) and x in answer
        ]
        if not candidates:
            continue
        rng = random.Random(f"{seed}:mtrag:{ev['task_id']}:{ev.get('model_id')}")
        claim, raw = rng.choice(candidates)
        question = next(
            (t["text"] for t in reversed(task.get("input", [])) if t.get("speaker") == "user"), ""
        )
        out.append(
            {
                "source_id": f"mtrag:{ev['task_id']}:{ev.get('model_id')}",
                "claim": claim,
                "contexts": contexts,
                # the whole answer, for the answer-level probes: `raw` is the claim's sentence
                # in it as written
                "answer": answer,
                "raw_sentence": raw,
                "question": question,
            }
        )
    return out


# --- probes -----------------------------------------------------------------------------------


def _best_sentence(claim: str, sentences: list[str]) -> int | None:
    """Index of the sentence sharing the largest share of the claim's content words (>= 0.6)."""
    from ragrig.core.text import tokenize

    words = set(tokenize([claim])[0])
    if not words or not sentences:
        return None
    shares = [len(words & set(t)) / len(words) for t in tokenize(sentences)]
    best = max(range(len(sentences)), key=lambda i: (shares[i], -i))
    return best if shares[best] >= 0.6 else None


def probes_for(item: dict, pool: list[str], seed: int, source: str) -> tuple[list[dict], Counter]:
    from ragrig.core.text import split_sentences
    from ragrig.judge import perturb

    claim = item["claim"]
    if "sentences" in item:  # SciFact: one abstract, the rationale sentence known
        sentences = item["sentences"]
        contexts = [" ".join(sentences)]
        evidence = (0, item["evidence_idx"])
        doc_sentences = [sentences]
    else:
        contexts = item["contexts"]
        doc_sentences = [split_sentences(c) for c in contexts]
        evidence = None
        for d, sents in enumerate(doc_sentences):
            i = _best_sentence(claim, sents)
            if i is not None:
                evidence = (d, i)
                break
    context = "\n".join(contexts)
    rng = random.Random(f"{seed}:{item['source_id']}")
    made = {
        "original": claim,
        "negation": perturb.negate(claim),
        "changed_number": perturb.change_number(claim, context, rng),
        "swapped_entity": perturb.swap_entity(claim, context, pool, rng),
        "dropped_qualifier": perturb.drop_qualifier(claim),
        "reversed_relation": perturb.reverse_relation(claim),
    }
    rows = []
    skipped: Counter = Counter()
    for kind, text in made.items():
        if text is None or (kind != "original" and text == claim):
            skipped[kind] += 1
            continue
        rows.append(_row(item, kind, text, contexts, claim, source))
    if "answer" in item:  # the answer-level probes: the claim's sentence edited in its answer
        for kind, text in made.items():
            if text is None or (kind != "original" and text == claim):
                continue
            answer = item["answer"].replace(item["raw_sentence"], text, 1)
            rows.append(_row(item, kind, claim, contexts, claim, source, answer=answer))
    cut = None
    if evidence is not None:
        d, i = evidence
        cut = perturb.split_evidence(doc_sentences[d][i])
    if cut is None:
        skipped["split_evidence"] += 1
    else:
        d, i = evidence
        sents = list(doc_sentences[d])
        sents[i : i + 1] = list(cut)
        split_contexts = list(contexts)
        split_contexts[d] = " ".join(sents)
        rows.append(_row(item, "split_evidence", claim, split_contexts, claim, source))
    return rows, skipped


def _row(item, kind, claim, contexts, original, source, answer: str | None = None) -> dict:
    row = {
        "id": f"{item['source_id']}:{kind}",
        "kind": kind,
        "claim": claim,
        "contexts": contexts,
        "expected": EXPECTED[kind],
        "source": source,
        "source_id": item["source_id"],
        "original": original,
        "level": "claim",
    }
    if answer is not None:
        row.update(
            id=f"{item['source_id']}:answer:{kind}",
            level="answer",
            answer=answer,
            question=item.get("question", ""),
        )
    return row


def _sample(items: list[dict], max_claims: int | None, seed: int, source: str) -> list[dict]:
    items = sorted(items, key=lambda it: it["source_id"])
    if max_claims is not None and len(items) > max_claims:
        items = sorted(
            random.Random(f"{seed}:{source}:sample").sample(items, max_claims),
            key=lambda it: it["source_id"],
        )
    return items


def build(
    scifact_root: Path | None,
    mtrag_root: Path | None,
    seed: int = 13,
    max_claims: int | None = None,
) -> tuple[list[dict], dict]:
    """All probes and their counts: {source: {kind: {"probes": n, "skipped": n}}}."""
    from ragrig.judge.perturb import swappable_names

    sources = {}
    if scifact_root is not None:
        sources["scifact"] = scifact_claims(Path(scifact_root))
    if mtrag_root is not None:
        sources["mtrag"] = mtrag_claims(Path(mtrag_root), seed)
    rows: list[dict] = []
    stats: dict = {}
    for source, items in sources.items():
        items = _sample(items, max_claims, seed, source)
        # names of each document, to swap in a name from another one
        names_by_item = {it["source_id"]: swappable_names(it["claim"]) for it in items}
        skipped: Counter = Counter()
        made: Counter = Counter()
        answers: Counter = Counter()
        for it in items:
            pool = sorted(
                {n for sid, ns in names_by_item.items() if sid != it["source_id"] for n in ns}
            )
            probes, skip = probes_for(it, pool, seed, source)
            rows.extend(probes)
            skipped.update(skip)
            made.update(p["kind"] for p in probes if p["level"] == "claim")
            answers.update(p["kind"] for p in probes if p["level"] == "answer")
        stats[source] = {
            "claims": len(items),
            **{k: {"probes": made[k], "skipped": skipped[k]} for k in KINDS},
        }
        if answers:
            stats[source]["answer_level"] = {k: answers[k] for k in ("original", *PERTURBATIONS)}
    return rows, stats


def write_jsonl(path: Path, rows: list[dict]) -> None:
    """Atomically (ragrig.core.io.atomic_write_text): readers see the old file or the whole new one."""
    from ragrig.core.io import atomic_write_text

    atomic_write_text(
        Path(path),
        "".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows),
    )


def read_jsonl(path: Path) -> list[dict]:
    """Probe rows, through the project's JSONL reader (file and line named on a bad line)."""
    from ragrig.core.errors import DataValidationError
    from ragrig.dataset.beir import iter_jsonl

    rows = []
    try:
        for lineno, row in iter_jsonl(Path(path)):
            missing = {"id", "kind", "claim", "contexts", "expected"} - set(row)
            if missing or row["kind"] not in KINDS:
                raise ProbeError(f"{path}:{lineno}: bad probe (missing {sorted(missing)} or kind)")
            rows.append(row)
    except DataValidationError as exc:
        raise ProbeError(str(exc)) from exc
    return rows


def root_or_none(value: str) -> Path | None:
    return None if value.lower() == "none" else Path(value)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    p.add_argument("--scifact-root", type=root_or_none, default=C.DEFAULT_DATASET_ROOT)
    p.add_argument("--mtrag-root", type=root_or_none, default=DEFAULT_MTRAG_ROOT)
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--max-claims", type=int, default=None, help="per source (seeded sample)")
    args = p.parse_args(argv)
    if args.scifact_root is None and args.mtrag_root is None:
        p.error("no source: give --scifact-root or --mtrag-root")
    try:
        rows, stats = build(args.scifact_root, args.mtrag_root, args.seed, args.max_claims)
    except ProbeError as exc:
        print(f"build_probes: {exc}", file=sys.stderr)
        return 2
    write_jsonl(args.out, rows)
    table = [
        [src, kind, s[kind]["probes"], s[kind]["skipped"]]
        for src, s in stats.items()
        for kind in KINDS
    ]
    C.print_table(f"probes -> {args.out}", ["source", "kind", "probes", "skipped"], table)
    print(f"{len(rows)} probes from {sum(s['claims'] for s in stats.values())} claims")
    return 0


if __name__ == "__main__":
    sys.exit(main())
