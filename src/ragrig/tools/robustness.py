"""Robustness sets: a BEIR folder built from SciFact (and MTRAG's questions) in which each query
belongs to one set, named by its `metadata.robustness_set` (a slice of every report table):

* `original`: sampled SciFact claims, unchanged (the control);
* `counterfactual`: the same claims; the corpus also holds a copy of each gold abstract whose
  rationale sentences say something else (every number changed, or, with none, a negation added
  after the first auxiliary verb): a plausible wrong answer the retriever will put beside the
  gold one. The copy is not relevant; the right behaviour is the original's answer;
* `negation`: the claims negated the same way (a negation after the first auxiliary verb), their
  SUPPORT and CONTRADICT labels swapped (SciFact's own construction of contradicted claims);
* `near_duplicate`: the same claims; the corpus also holds three near-copies (a tenth of the
  words dropped, each its own way) of the non-gold abstract BM25 ranks first for the claim,
  distractors that crowd the context;
* `out_of_scope`: first questions of MTRAG conversations (finance, government, IT forums), which
  nothing in a biomedical corpus answers: the right behaviour is to refuse (NOT_ENOUGH_INFO, one
  judgment of relevance 0 so the queries are kept and counted as having no gold);
* `only`: the supported claims made exclusive ("Only aspirin reduces fever"), labelled
  NOT_ENOUGH_INFO: the rationale that supports "X does Y" does not establish that nothing else
  does. Their gold documents stay relevant (the topic is the same), so retrieval is scored as for
  the original and the answer should no longer be SUPPORTED. The rule's risk: an abstract that
  does state exclusivity would make the label wrong. Claims that negate, or already say only,
  are left out;
* `except`: the same exclusive claims said with an exception ("Nothing except aspirin reduces
  fever"), labelled NOT_ENOUGH_INFO for the same reason: the exclusivity without the word "only",
  so a reader that keys on that word is told apart from one that reads the claim. The same
  claims are left out (and those that already say "except").

Every choice is drawn from `seed`; the same sources and arguments give the same folder byte for
byte. A claim that cannot be transformed (no number and no auxiliary verb) is left out of that
set and counted. Only exclusive exceptions are built: an exception that names another case
("X does Y except in Z") has a label the evidence for "X does Y" does not give.

`ragrig data ensure` builds the folder for `dataset=scifact_robustness` (conf/dataset/, its
`robustness` block: sources, per_set, seed) when it is missing or was built from other arguments:

    make repro ARGS=dataset=scifact_robustness
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragrig.core.errors import DataValidationError

SETS = (
    "original",
    "counterfactual",
    "negation",
    "near_duplicate",
    "out_of_scope",
    "only",
    "except",
)
ID_BASE = {name: i * 1_000_000 for i, name in enumerate(SETS)}  # new claim ids per set
_AUX = re.compile(
    r"\b(is|are|was|were|can|could|does|do|did|has|have|had|will|may|might|should)\b", re.I
)
_NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?![\w.])")


def negate(text: str) -> str | None:
    """`text` with "not" after its first auxiliary verb; None when it has none (or already
    negates right there)."""
    m = _AUX.search(text)
    if m is None or re.match(r"\s+not\b", text[m.end() :]):
        return None
    return f"{text[: m.end()]} not{text[m.end() :]}"


_NEGATING = re.compile(r"\b(not|no|never|none|nothing|cannot|only|except)\b|n't\b", re.I)


def exclusive(text: str, lead: str = "Only") -> str | None:
    """`lead` + " " + `text` (its first letter lowered unless the first word is a name or
    acronym): "Only aspirin reduces fever", or with lead "Nothing except" the same exclusivity
    as an exception; None when the claim negates or already says only or except."""
    if _NEGATING.search(text) or not text.strip():
        return None
    first = text.split()[0]
    keep = any(ch.isupper() for ch in first[1:]) or any(ch.isdigit() for ch in first)
    return f"{lead} " + (text if keep else text[0].lower() + text[1:])


def change_numbers(text: str) -> str | None:
    """Every number in `text` changed (an integer n -> 2n + 1, a decimal x -> x + 1.5); None
    when it holds none."""
    if not _NUMBER.search(text):
        return None

    def repl(m: re.Match[str]) -> str:
        value = m.group(1)
        if "." in value:
            return f"{float(value) + 1.5:g}"
        return str(int(value) * 2 + 1)

    return _NUMBER.sub(repl, text)


def counterfactual(sentences: list[str], rationale: list[int]) -> list[str] | None:
    """The abstract's sentences with each rationale sentence saying something else."""
    out = list(sentences)
    changed = False
    for i in sorted(set(rationale)):
        if not 0 <= i < len(out):
            continue
        new = change_numbers(out[i]) or negate(out[i])
        if new is not None and new != out[i]:
            out[i], changed = new, True
    return out if changed else None


def near_copy(text: str, rng: random.Random, drop: float = 0.1) -> str:
    words = text.split()
    kept = [w for w in words if rng.random() >= drop]
    return " ".join(kept or words)


def _swap(evidence: dict[str, list[dict]]) -> dict[str, list[dict]]:
    flip = {"SUPPORT": "CONTRADICT", "CONTRADICT": "SUPPORT"}
    return {
        d: [{**r, "label": flip.get(r["label"], r["label"])} for r in rs]
        for d, rs in evidence.items()
    }


@dataclass
class Built:
    corpus: list[dict[str, Any]]
    queries: list[dict[str, Any]]
    qrels: list[tuple[str, str, int]]
    claims: list[dict[str, Any]]
    counts: dict[str, dict[str, int]] = field(default_factory=dict)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSONL file (`.gz` or not), read as the dataset readers read theirs:
    bounded per line and inflated size, malformed lines named by file and line."""
    from ragrig.dataset.beir import iter_jsonl

    return [rec for _, rec in iter_jsonl(path)]


def _sentences_of(
    doc_id: str, corpus_doc: dict[str, Any], known: dict[str, list[str]]
) -> list[str]:
    """The abstract's sentences as its rationale indices count them (SciFact's export), else
    the segmenter's."""
    from ragrig.core.text import split_sentences

    return known.get(doc_id) or split_sentences(corpus_doc["text"])


def _mtrag_questions(path: Path) -> list[str]:
    import ast

    seen, out = set(), []
    for rec in _read_jsonl(path):
        conversation = rec.get("conversation_id") or str(rec.get("task_id", "")).split("<::>")[0]
        if conversation in seen:
            continue
        seen.add(conversation)
        turns = ast.literal_eval(rec["input"]) if isinstance(rec["input"], str) else rec["input"]
        first = next((t["text"] for t in turns if t.get("speaker") == "user"), "").strip()
        if first.endswith("?") and 4 <= len(first.split()) <= 30:
            out.append(first)
    return sorted(set(out))


def build(scifact: Path, mtrag_tasks: Path, n: int, seed: int) -> Built:
    """The seven sets from SciFact's dev claims (BEIR's test split) and MTRAG's questions."""
    from rank_bm25 import BM25Okapi

    from ragrig.core.text import tokenize

    corpus = _read_jsonl(
        next(p for p in (scifact / "corpus.jsonl.gz", scifact / "corpus.jsonl") if p.exists())
    )
    by_id = {str(d["_id"]): d for d in corpus}
    claims = _read_jsonl(scifact / "original" / "claims_dev.jsonl")
    usable = [c for c in claims if c["evidence"] and all(str(d) in by_id for d in c["evidence"])]
    known: dict[str, list[str]] = {}
    for name in ("scifact_hf_export_csv.zip", "sentences.jsonl"):  # SciFact's, or a fixture's
        if (scifact / "original" / name).exists():
            from ragrig.train_verifier.data import read_sentences

            known = read_sentences(scifact / "original" / name)
            break
    rng = random.Random(seed)
    sample = sorted(rng.sample(usable, min(n, len(usable))), key=lambda c: c["id"])
    counts = {name: {"built": 0, "left_out": 0} for name in SETS}
    out_corpus = [
        {"_id": str(d["_id"]), "title": d.get("title", ""), "text": d["text"]} for d in corpus
    ]
    queries, qrels, out_claims = [], [], []

    def add(set_name: str, cid: int, text: str, evidence: dict, gold: list[str]) -> None:
        qid = str(ID_BASE[set_name] + cid)
        queries.append({"_id": qid, "text": text, "metadata": {"robustness_set": set_name}})
        out_claims.append({"id": int(qid), "claim": text, "evidence": evidence})
        qrels.extend((qid, d, 1) for d in gold)
        counts[set_name]["built"] += 1

    tokens = tokenize([f"{d.get('title', '')} {d['text']}" for d in corpus])
    bm25 = BM25Okapi(tokens)
    ids = [str(d["_id"]) for d in corpus]
    for c in sample:
        gold = sorted(str(d) for d in c["evidence"])
        add("original", c["id"], c["claim"], c["evidence"], gold)
        # counterfactual: a copy of each gold abstract saying something else where it matters
        copies = []
        for d in gold:
            rationale = [i for r in c["evidence"][d] for i in r["sentences"]]
            changed = counterfactual(_sentences_of(d, by_id[d], known), rationale)
            if changed is not None:
                copies.append(
                    {
                        "_id": f"cf-{c['id']}-{d}",
                        "title": by_id[d].get("title", ""),
                        "text": " ".join(changed),
                    }
                )
        if copies:
            out_corpus.extend(copies)
            add("counterfactual", c["id"], c["claim"], c["evidence"], gold)
        else:
            counts["counterfactual"]["left_out"] += 1
        negated = negate(c["claim"])
        if negated is not None:
            add("negation", c["id"], negated, _swap(c["evidence"]), gold)
        else:
            counts["negation"]["left_out"] += 1
        scores = bm25.get_scores(tokenize([c["claim"]])[0])
        ranked = sorted(range(len(ids)), key=lambda i: (-scores[i], ids[i]))
        top = next(ids[i] for i in ranked if ids[i] not in gold)
        copy_rng = random.Random(f"{seed}:{c['id']}")
        for k in range(3):
            doc = by_id[top]
            out_corpus.append(
                {
                    "_id": f"nd{k}-{c['id']}-{top}",
                    "title": doc.get("title", ""),
                    "text": near_copy(doc["text"], copy_rng),
                }
            )
        add("near_duplicate", c["id"], c["claim"], c["evidence"], gold)
        supported = all(r["label"] == "SUPPORT" for rs in c["evidence"].values() for r in rs)
        only = exclusive(c["claim"]) if supported else None
        if only is not None:
            add("only", c["id"], only, {}, gold)
            add("except", c["id"], exclusive(c["claim"], "Nothing except"), {}, gold)
        else:
            counts["only"]["left_out"] += 1
            counts["except"]["left_out"] += 1
    questions = _mtrag_questions(mtrag_tasks)
    if len(questions) < n:
        raise DataValidationError(f"{mtrag_tasks}: {len(questions)} usable questions, {n} wanted")
    for i, q in enumerate(sorted(rng.sample(questions, n))):
        qid = str(ID_BASE["out_of_scope"] + i)
        queries.append({"_id": qid, "text": q, "metadata": {"robustness_set": "out_of_scope"}})
        out_claims.append({"id": int(qid), "claim": q, "evidence": {}})
        qrels.append((qid, ids[int(rng.random() * len(ids))], 0))
        counts["out_of_scope"]["built"] += 1
    return Built(out_corpus, queries, qrels, out_claims, counts)


def write(built: Built, out: Path, built_from: dict[str, Any] | None = None) -> None:
    """The BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv, original/claims.jsonl,
    manifest.json with the counts and `built_from`), written whole or not at all."""
    from ragrig.core.io import atomic_dir, write_json

    with atomic_dir(out) as tmp:

        def lines(path: Path, rows: list[dict]) -> None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(
                "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows),
                encoding="utf-8",
            )

        lines(tmp / "corpus.jsonl", built.corpus)
        lines(tmp / "queries.jsonl", built.queries)
        lines(tmp / "original" / "claims.jsonl", built.claims)
        (tmp / "qrels").mkdir()
        (tmp / "qrels" / "test.tsv").write_text(
            "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{r}\n" for q, d, r in built.qrels),
            encoding="utf-8",
        )
        write_json(tmp / "manifest.json", {"sets": built.counts, "built_from": built_from})


def is_current(out: Path, built_from: dict[str, Any]) -> bool:
    """Whether the folder at `out` was built from exactly these arguments."""
    try:
        return json.loads((out / "manifest.json").read_text())["built_from"] == built_from
    except (OSError, ValueError, KeyError):
        return False
