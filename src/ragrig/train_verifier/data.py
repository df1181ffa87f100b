"""Training pairs (claim, evidence window, label) for the verifier, from SciFact *train* only.

From each training claim with rationales (`evidence[doc] = [{"sentences": [i, ...], "label"}]`,
indices into the abstract's original sentence list):

* ``rationale``: the claim with its rationale sentences (joined in order), labelled as annotated
  (SUPPORT / CONTRADICT);
* ``rationale_window``: the rationale with one adjacent non-rationale sentence beside it (the
  evidence windows the judge reads hold 1-2 sentences), same label;
* ``rationale_split``: a one-sentence rationale cut at a clause boundary into two adjacent
  sentences (`ragrig.judge.perturb.split_evidence`), same label: a claim drawn from two adjacent
  sentences stays supported;
* ``same_doc``: windows of 1-2 non-rationale sentences of the same abstract, NOT_ADDRESSED;
* ``other_doc``: a window of another claim's abstract, NOT_ADDRESSED;
* ``no_evidence``: a claim without rationale (not enough info) with a window of its cited
  abstract, NOT_ADDRESSED;
* perturbations of a SUPPORT claim, paired with its rationale (`ragrig.judge.perturb`):
  ``negation``, ``changed_number``, ``reversed_relation`` and ``removed_negation`` are
  CONTRADICT; ``swapped_entity`` (a name from another document) and ``dropped_qualifier``
  (an overgeneralisation) are NOT_ADDRESSED.

Deterministic: the same files and seed give the same pairs in the same order.
"""

from __future__ import annotations

import ast
import csv
import io
import random
import sys
import tokenize
import zipfile
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragrig.core.errors import DataValidationError
from ragrig.train_verifier import CONTRADICT, LABELS, NOT_ADDRESSED, SUPPORT

PERTURBATION_LABELS = {
    "negation": CONTRADICT,
    "changed_number": CONTRADICT,
    "reversed_relation": CONTRADICT,
    "removed_negation": CONTRADICT,
    "swapped_entity": NOT_ADDRESSED,
    "dropped_qualifier": NOT_ADDRESSED,
}
SCIFACT_ZIP_MEMBER = "corpus_train.csv"


@dataclass(frozen=True)
class Pair:
    claim_id: str
    doc_id: str
    kind: str
    claim: str
    evidence: str
    label: str


def _sentence_list(cell: str, where: str) -> list[str]:
    """A numpy-repr list of strings ("['a.'\\n 'b.']") -> its strings (SciFact's HF export)."""
    try:
        toks = tokenize.generate_tokens(io.StringIO(cell).readline)
        return [ast.literal_eval(t.string).strip() for t in toks if t.type == tokenize.STRING]
    except (tokenize.TokenError, SyntaxError, ValueError) as exc:
        raise DataValidationError(f"{where}: unreadable sentence list ({exc})") from exc


def read_sentences(path: Path) -> dict[str, list[str]]:
    """doc id -> the abstract's sentences, indexed as the rationale annotations are.

    `path` is SciFact's HF export zip (``corpus_train.csv`` with a numpy-repr sentence list per
    abstract) or a JSONL file of ``{"doc_id", "sentences": [...]}``."""
    path = Path(path)
    if not path.exists():
        raise DataValidationError(f"verifier sentence source not found: {path}")
    out: dict[str, list[str]] = {}
    if path.suffix == ".zip":
        csv.field_size_limit(sys.maxsize)
        with zipfile.ZipFile(path) as z:
            if SCIFACT_ZIP_MEMBER not in z.namelist():
                raise DataValidationError(f"{path}: no {SCIFACT_ZIP_MEMBER} inside")
            with z.open(SCIFACT_ZIP_MEMBER) as raw:
                reader = csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8"))
                for lineno, row in enumerate(reader, start=2):
                    where = f"{path}:{SCIFACT_ZIP_MEMBER}:{lineno}"
                    if "doc_id" not in row or "abstract" not in row:
                        raise DataValidationError(f"{where}: needs doc_id and abstract columns")
                    out[str(row["doc_id"])] = _sentence_list(row["abstract"], where)
        return out
    from ragrig.dataset.beir import iter_jsonl

    for lineno, rec in iter_jsonl(path):
        sents = rec.get("sentences")
        if "doc_id" not in rec or not isinstance(sents, list):
            raise DataValidationError(f"{path}:{lineno}: needs 'doc_id' and a 'sentences' list")
        out[str(rec["doc_id"])] = [str(s).strip() for s in sents]
    return out


def read_claims(path: Path) -> list[dict[str, Any]]:
    """Training claims in SciFact's original schema {id, claim, evidence, cited_doc_ids}."""
    from ragrig.dataset.beir import iter_jsonl

    path = Path(path)
    if not path.exists():
        raise DataValidationError(f"verifier training claims not found: {path}")
    out = []
    for lineno, rec in iter_jsonl(path):
        if "id" not in rec or not str(rec.get("claim", "")).strip():
            raise DataValidationError(
                f"{path}:{lineno}: a claim needs 'id' and a non-blank 'claim'"
            )
        evidence = rec.get("evidence") or {}
        for doc, rationales in evidence.items():
            for r in rationales:
                if r.get("label") not in (SUPPORT, CONTRADICT) or not r.get("sentences"):
                    raise DataValidationError(
                        f"{path}:{lineno}: rationale of document {doc} needs 'sentences' and a "
                        f"label SUPPORT or CONTRADICT, got {r!r}"
                    )
        out.append(
            {
                "id": str(rec["id"]),
                "claim": str(rec["claim"]).strip(),
                "evidence": {str(k): v for k, v in evidence.items()},
                "cited": [str(d) for d in rec.get("cited_doc_ids") or []],
                "where": f"{path}:{lineno}",
            }
        )
    return out


def drop_held_out(
    claims: list[dict[str, Any]], held_out: list[Path]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The claims less those whose id or case-folded text appears in a held-out claim file
    (read leniently: only ids and texts), and the dropped ids."""
    from ragrig.dataset.beir import iter_jsonl

    ids: set[str] = set()
    texts: set[str] = set()
    for path in held_out:
        for _, rec in iter_jsonl(Path(path)):
            ids.add(str(rec.get("id")))
            texts.add(str(rec.get("claim", "")).strip().lower())
    keep, dropped = [], []
    for c in claims:
        if c["id"] in ids or c["claim"].lower() in texts:
            dropped.append(c["id"])
        else:
            keep.append(c)
    return keep, dropped


def _windows(n: int, exclude: set[int], longest: int = 2) -> list[tuple[int, int]]:
    """[start, end) runs of 1..longest adjacent sentence indices avoiding `exclude`."""
    out = []
    for i in range(n):
        for j in range(i + 1, min(i + longest, n) + 1):
            if not exclude & set(range(i, j)):
                out.append((i, j))
    return out


def _unnegate(claim: str) -> str | None:
    """ "X does not cause Y" -> "X does cause Y", "is not" -> "is": the opposite of a negation."""
    import re

    m = re.search(
        r"\b(is|are|was|were|do|does|did|can|could|may|will|would|has|have)\s+not\b", claim
    )
    if not m:
        return None
    return claim[: m.start()] + m.group(1) + claim[m.end() :]


def build_pairs(
    claims: list[dict[str, Any]],
    sentences: dict[str, list[str]],
    negatives_per_claim: int = 3,
    other_doc_negatives: int = 1,
    perturbations: bool = True,
    seed: int = 13,
) -> list[Pair]:
    """Every training pair of the claims (see the module docstring), deterministic in `seed`."""
    from ragrig.judge import perturb

    pool = sorted({n for c in claims for n in perturb.swappable_names(c["claim"])})
    doc_ids = sorted({d for c in claims for d in [*c["evidence"], *c["cited"]] if d in sentences})
    pairs: list[Pair] = []
    for c in claims:
        rng = random.Random(f"{seed}:{c['id']}")
        cid, claim = c["id"], c["claim"]
        for doc in sorted(c["evidence"]):
            sents = sentences.get(doc)
            if sents is None:
                raise DataValidationError(f"{c['where']}: evidence names unknown document {doc}")
            used: set[int] = set()
            for r in c["evidence"][doc]:
                idx = sorted(r["sentences"])
                if max(idx) >= len(sents):
                    raise DataValidationError(
                        f"{c['where']}: rationale sentences {idx} outside document {doc} "
                        f"({len(sents)} sentences)"
                    )
                used |= set(idx)
                label = r["label"]
                evidence = " ".join(sents[i] for i in idx)
                pairs.append(Pair(cid, doc, "rationale", claim, evidence, label))
                lo, hi = idx[0], idx[-1]
                beside = [i for i in (lo - 1, hi + 1) if 0 <= i < len(sents) and i not in idx]
                if beside:
                    k = rng.choice(beside)
                    window = [*idx, k] if k > hi else [k, *idx]
                    text = " ".join(sents[i] for i in window)
                    pairs.append(Pair(cid, doc, "rationale_window", claim, text, label))
                if len(idx) == 1:
                    cut = perturb.split_evidence(sents[idx[0]])
                    if cut is not None:
                        pairs.append(Pair(cid, doc, "rationale_split", claim, " ".join(cut), label))
                if label != SUPPORT:
                    continue
                if perturbations:
                    made = {
                        "negation": perturb.negate(claim),
                        "changed_number": perturb.change_number(claim, " ".join(sents), rng),
                        "reversed_relation": perturb.reverse_relation(claim),
                        "removed_negation": _unnegate(claim),
                        "swapped_entity": perturb.swap_entity(claim, " ".join(sents), pool, rng),
                        "dropped_qualifier": perturb.drop_qualifier(claim),
                    }
                    for kind, text in made.items():
                        if text and text != claim:
                            pairs.append(
                                Pair(cid, doc, kind, text, evidence, PERTURBATION_LABELS[kind])
                            )
            wins = _windows(len(sents), used)
            for i, j in rng.sample(wins, min(negatives_per_claim, len(wins))):
                pairs.append(Pair(cid, doc, "same_doc", claim, " ".join(sents[i:j]), NOT_ADDRESSED))
        if not c["evidence"]:
            for doc in sorted(c["cited"]):
                sents = sentences.get(doc)
                if sents is None:
                    raise DataValidationError(f"{c['where']}: cites unknown document {doc}")
                wins = _windows(len(sents), set())
                for i, j in rng.sample(wins, min(1, len(wins))):
                    pairs.append(
                        Pair(cid, doc, "no_evidence", claim, " ".join(sents[i:j]), NOT_ADDRESSED)
                    )
        own = set(c["evidence"]) | set(c["cited"])
        others = [d for d in doc_ids if d not in own]
        for _ in range(other_doc_negatives if others else 0):
            doc = rng.choice(others)
            wins = _windows(len(sentences[doc]), set())
            if wins:
                i, j = rng.choice(wins)
                text = " ".join(sentences[doc][i:j])
                pairs.append(Pair(cid, doc, "other_doc", claim, text, NOT_ADDRESSED))
    return [p for p in pairs if p.claim.strip() and p.evidence.strip()]


def cap_pairs(
    pairs: list[Pair], max_pairs: int | None, seed: int, balance: bool = False
) -> list[Pair]:
    """A seeded sample of at most `max_pairs` pairs, order shuffled.

    Without `balance`, a plain shuffle (labels and kinds in the proportions they are built in:
    SciFact's ~25% SUPPORT / 27% CONTRADICT / 47% NOT_ADDRESSED). With `balance`, the labels
    take turns (as equal as their pools allow) and, within a label, its kinds take turns, so
    that rare kinds (a changed number, a swapped name) are not drowned by the common ones."""
    out = list(pairs)
    rng = random.Random(f"{seed}:shuffle")
    rng.shuffle(out)
    if max_pairs is None or len(out) <= max_pairs:
        return out
    if not balance:
        return out[:max_pairs]
    queues: dict[str, dict[str, list[Pair]]] = {}
    for p in out:  # shuffled order kept inside each (label, kind) queue
        queues.setdefault(p.label, {}).setdefault(p.kind, []).append(p)
    turn = {label: 0 for label in queues}
    picked: list[Pair] = []
    while len(picked) < max_pairs:
        for label in sorted(queues):
            kinds = [k for k in sorted(queues[label]) if queues[label][k]]
            if not kinds or len(picked) == max_pairs:
                continue
            kind = kinds[turn[label] % len(kinds)]
            turn[label] += 1
            picked.append(queues[label][kind].pop(0))
    rng.shuffle(picked)
    return picked


def label_counts(pairs: list[Pair]) -> dict[str, int]:
    counts = Counter(p.label for p in pairs)
    return {label: counts.get(label, 0) for label in LABELS}


def kind_counts(pairs: list[Pair]) -> dict[str, int]:
    return dict(sorted(Counter(p.kind for p in pairs).items()))


def as_records(pairs: list[Pair]) -> list[dict[str, str]]:
    return [asdict(p) for p in pairs]
