"""The public claim-verification sets of `datasets/claim_verification/`, read in place into one
table of (claim, evidence, label) examples, with the hard negatives that need no model.

Every source maps its labels to the verifier's three (PROVENANCE.md beside the data):
entailment / Supports / SUPPORTS / complete support -> SUPPORT; contradiction / Refutes / REFUTES /
refute -> CONTRADICT; neutral / Neutral / NOT_ENOUGH_INFO / irrelevant -> NOT_ADDRESSED. The
two-way sources (SciTail, RTE, FEVER-NLI, SummEdits) and the partial-support labels
(Factcheck-GPT's partially-support, WiCE's partially_supported and not_supported) say only
"supported or not": they get `NOT_SUPPORTED`, which the loss reads as "not SUPPORT" without
choosing between CONTRADICT and NOT_ADDRESSED (`ragrig.train_verifier.loss`).

Hard negatives (and positives that must stay positive), built without a model:

* ``removed_support``: the sentences that carry the support deleted from the evidence (WiCE's
  `supporting_sentences`, Climate-FEVER's per-sentence labels): the rest still talks about the
  topic but no longer says it;
* ``other_evidence``: the claim paired with another item's evidence (of the same source, the one
  sharing most content words among a seeded handful): NOT_ADDRESSED;
* ``distractor``: an unrelated passage placed before or after the evidence of a SUPPORT or
  CONTRADICT pair, label kept (extra context must not change a verdict);
* rule edits of a SUPPORT claim (`ragrig.judge.perturb`): ``negation``, ``changed_number``,
  ``reversed_relation`` -> CONTRADICT; ``swapped_entity`` -> NOT_ADDRESSED.

Every example belongs to a split group (its premise, claim or document); a group is in the
validation split of its source when sha256("<seed>:<source>:<group>") falls below the validation
share, so the split is fixed by the seed and a derived example lands where its original is.
Examples are de-duplicated across sources on their case-folded (claim, evidence); the first
source in the configured order keeps a pair, and a pair seen with two labels is dropped and
counted. Deterministic: the same files, sources and seed give the same examples in the same order.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ragrig.core.errors import DataValidationError
from ragrig.judge.verifier_model import CONTRADICT, NOT_ADDRESSED, NOT_SUPPORTED, SUPPORT

TRAIN, VALIDATION = "train", "validation"


@dataclass(frozen=True)
class Example:
    source: str
    group: str
    claim: str
    evidence: str
    label: str
    kind: str = "original"
    split: str = TRAIN


@dataclass(frozen=True)
class Source:
    """One shared set: where it lives under the claim_verification root, its licence tag (as
    PROVENANCE.md states it), and its reader."""

    name: str
    files: tuple[str, ...]
    licence: str
    two_way: bool
    read: Callable[[Path, str, Any], Iterator[Example]]


def _bad(where: str, what: str) -> DataValidationError:
    return DataValidationError(f"{where}: {what}")


def _label(mapping: dict[str, str], value: Any, where: str) -> str:
    key = str(value).strip()
    if key not in mapping:
        raise _bad(where, f"unknown label {key!r} (known: {sorted(mapping)})")
    return mapping[key]


def _jsonl(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    from ragrig.core.io import iter_lines

    # line by line within the default record bound, a byte that is not UTF-8 named by its line
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _bad(where, f"not JSON ({exc.msg})") from None
        if not isinstance(rec, dict):
            raise _bad(where, "a line must be a JSON object")
        yield where, rec


def _field(rec: dict[str, Any], key: str, where: str) -> str:
    value = rec.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _bad(where, f"needs a non-blank string {key!r}")
    return value.strip()


_NLI3 = {"entailment": SUPPORT, "contradiction": CONTRADICT, "neutral": NOT_ADDRESSED}
_NLI2 = {
    "entailment": SUPPORT,
    "entails": SUPPORT,
    "not_entailment": NOT_SUPPORTED,
    "neutral": NOT_SUPPORTED,
}


def _read_nli(mapping: dict[str, str]) -> Callable[[Path, str, Any], Iterator[Example]]:
    def read(root: Path, name: str, cfg: Any) -> Iterator[Example]:
        for rel in SOURCES[name].files:
            for where, rec in _jsonl(root / rel):
                premise = _field(rec, "premise", where)
                yield Example(
                    name,
                    premise,
                    _field(rec, "hypothesis", where),
                    premise,
                    _label(mapping, rec.get("label"), where),
                )

    return read


def _csv_rows(path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    csv.field_size_limit(sys.maxsize)
    with open(path, encoding="utf-8", newline="") as fh:
        for lineno, row in enumerate(csv.DictReader(fh), start=2):
            yield f"{path}:{lineno}", row


def _read_anli(root: Path, name: str, cfg: Any) -> Iterator[Example]:
    mapping = {"e": SUPPORT, "c": CONTRADICT, "n": NOT_ADDRESSED}
    for rel in SOURCES[name].files:
        for where, row in _csv_rows(root / rel):
            context = _field(row, "context", where)
            yield Example(
                name,
                context,
                _field(row, "statement", where),
                context,
                _label(mapping, row.get("gold_label"), where),
            )


def _read_fever(root: Path, name: str, cfg: Any) -> Iterator[Example]:
    for rel in SOURCES[name].files:
        path = root / rel
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                where = f"{path}:{lineno}"
                cells = line.rstrip("\n").split("\t")
                if len(cells) != 3 or not cells[1].strip() or not cells[2].strip():
                    raise _bad(
                        where,
                        f"needs 3 tab-separated cells label, evidence, claim, got {len(cells)}",
                    )
                claim = cells[2].strip()
                yield Example(name, claim, claim, cells[1].strip(), _label(_NLI2, cells[0], where))


def _read_factcheck(root: Path, name: str, cfg: Any) -> Iterator[Example]:
    mapping = {
        "completely-support": SUPPORT,
        "refute": CONTRADICT,
        "irrelevant": NOT_ADDRESSED,
        "partially-support": NOT_SUPPORTED,
    }
    for where, rec in _jsonl(root / SOURCES[name].files[0]):
        claim = _field(rec, "claim", where)
        yield Example(
            name,
            claim,
            claim,
            _field(rec, "evidence", where),
            _label(mapping, rec.get("stance"), where),
        )


def _read_healthver(root: Path, name: str, cfg: Any) -> Iterator[Example]:
    mapping = {"Supports": SUPPORT, "Refutes": CONTRADICT, "Neutral": NOT_ADDRESSED}
    for rel in SOURCES[name].files:
        for where, row in _csv_rows(root / rel):
            claim = _field(row, "claim", where)
            yield Example(
                name,
                claim,
                claim,
                _field(row, "evidence", where),
                _label(mapping, row.get("label"), where),
            )


def _read_climate_fever(root: Path, name: str, cfg: Any) -> Iterator[Example]:
    """Each (claim, evidence sentence) pair with its own label; for a claim with a SUPPORTS or
    REFUTES sentence and two or more NOT_ENOUGH_INFO ones, the NEI sentences alone
    (``removed_support``: NOT_ADDRESSED)."""
    mapping = {"SUPPORTS": SUPPORT, "REFUTES": CONTRADICT, "NOT_ENOUGH_INFO": NOT_ADDRESSED}
    for where, rec in _jsonl(root / SOURCES[name].files[0]):
        claim = _field(rec, "claim", where)
        group = str(rec.get("claim_id", claim))
        evs = rec.get("evidences")
        if not isinstance(evs, list) or not evs:
            raise _bad(where, "needs a non-empty 'evidences' list")
        nei = []
        decisive = False
        for i, ev in enumerate(evs):
            if not isinstance(ev, dict):
                raise _bad(where, f"evidence {i} is not an object")
            text = _field(ev, "evidence", f"{where}: evidence {i}")
            label = _label(mapping, ev.get("evidence_label"), f"{where}: evidence {i}")
            yield Example(name, group, claim, text, label)
            if label == NOT_ADDRESSED:
                nei.append(text)
            else:
                decisive = True
        if cfg.hard_negatives and decisive and len(nei) >= 2:
            yield Example(name, group, claim, " ".join(nei), NOT_ADDRESSED, "removed_support")


def _read_summedits(root: Path, name: str, cfg: Any) -> Iterator[Example]:
    """Whole summary against its document, when the document fits `max_evidence_words` (a
    longer one would be cut by the tokenizer and a consistent summary lose its support)."""
    mapping = {"1": SUPPORT, "0": NOT_SUPPORTED}
    for rel in SOURCES[name].files:
        path = root / rel
        try:
            rows = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise _bad(f"{path}:{exc.lineno}", f"not JSON ({exc.msg})") from None
        if not isinstance(rows, list):
            raise _bad(str(path), "needs a JSON list of items")
        for i, rec in enumerate(rows):
            where = f"{path}: item {i}"
            if not isinstance(rec, dict):
                raise _bad(where, "an item must be an object")
            doc = _field(rec, "doc", where)
            if len(doc.split()) > cfg.max_evidence_words:
                continue
            yield Example(
                name,
                doc,
                _field(rec, "summary", where),
                doc,
                _label(mapping, rec.get("label"), where),
            )


def _wice_window(
    sents: list[str], keep: list[int], budget: int, exclude: frozenset[int] = frozenset()
) -> str:
    """The sentences `keep` (in order), grown by their neighbours not in `exclude` while under
    `budget` words."""
    chosen = set(keep)
    words = sum(len(sents[i].split()) for i in chosen)
    for step in (1, 2):
        for i in sorted(keep):
            for j in (i - step, i + step):
                if 0 <= j < len(sents) and j not in chosen and j not in exclude:
                    n = len(sents[j].split())
                    if words + n <= budget:
                        chosen.add(j)
                        words += n
    return " ".join(sents[i] for i in sorted(chosen))


def _read_wice(root: Path, name: str, cfg: Any) -> Iterator[Example]:
    """A window of the Wikipedia-cited page around the first set of supporting sentences:
    supported -> SUPPORT, partially_supported -> NOT_SUPPORTED; that window less every supporting
    sentence (``removed_support``) -> NOT_SUPPORTED; a not_supported claim against the window of
    the page sharing most of its words -> NOT_SUPPORTED."""
    labels = {
        "supported": SUPPORT,
        "partially_supported": NOT_SUPPORTED,
        "not_supported": NOT_SUPPORTED,
    }
    budget = cfg.max_evidence_words // 2
    for where, rec in _jsonl(root / SOURCES[name].files[0]):
        claim = _field(rec, "claim", where)
        label = _label(labels, rec.get("label"), where)
        sents = rec.get("evidence")
        sets = rec.get("supporting_sentences") or []
        if not isinstance(sents, list) or not sents:
            raise _bad(where, "needs a non-empty 'evidence' list of sentences")
        sents = [str(s).strip() for s in sents]
        every = sorted({i for s in sets for i in s if isinstance(i, int) and 0 <= i < len(sents)})
        if sets and every:
            first = [i for i in sets[0] if isinstance(i, int) and 0 <= i < len(sents)] or every
            yield Example(name, claim, claim, _wice_window(sents, first, budget), label)
            if cfg.hard_negatives and label == SUPPORT:
                rest = [i for i in range(len(sents)) if i not in set(every)]
                near = sorted(rest, key=lambda i: (min(abs(i - j) for j in first), i))[:4]
                if near:
                    text = _wice_window(sents, sorted(near), budget, frozenset(every))
                    yield Example(name, claim, claim, text, NOT_SUPPORTED, "removed_support")
        elif label == NOT_SUPPORTED:
            cw = _words(claim)
            best = max(range(len(sents)), key=lambda i: (len(cw & _words(sents[i])), -i))
            yield Example(name, claim, claim, _wice_window(sents, [best], budget), label)


def _read_scifact(root: Path, name: str, cfg: Any) -> Iterator[Example]:
    """SciFact's *training* claims against their rationale sentences, with the pairs of
    `ragrig.train_verifier.data` (windows of the same abstract, another claim's abstract, rule
    edits); any claim also in SciFact's dev or test files is left out (the pipeline's
    evaluation claims)."""
    from ragrig.train_verifier import data as D
    from ragrig.train_verifier.train import held_out_files

    claims_path, sentences_path = (root / f for f in SOURCES[name].files)
    claims, _ = D.drop_held_out(D.read_claims(claims_path), held_out_files(claims_path))
    pairs = D.build_pairs(claims, D.read_sentences(sentences_path), seed=cfg.seed)
    for p in pairs:
        yield Example(
            name,
            p.claim_id,
            p.claim,
            p.evidence,
            p.label,
            p.kind if p.kind in _SCIFACT_DERIVED else "original",
        )


_SCIFACT_DERIVED = {
    "negation",
    "changed_number",
    "reversed_relation",
    "removed_negation",
    "swapped_entity",
    "dropped_qualifier",
    "other_doc",
    "same_doc",
}
SOURCES: dict[str, Source] = {
    s.name: s
    for s in (
        Source("snli", ("generative_nli/snli/dev.jsonl",), "CC-BY-SA-4.0", False, _read_nli(_NLI3)),
        Source(
            "mnli", ("generative_nli/mnli/dev.jsonl",), "MultiNLI-research", False, _read_nli(_NLI3)
        ),
        Source(
            "bizarro",
            ("generative_nli/bizarro/test.jsonl",),
            "no-licence-file",
            False,
            _read_nli(_NLI3),
        ),
        Source(
            "anli",
            tuple(f"anli_dev/ANLI_analysis_r{r}_dev.csv" for r in (1, 2, 3)),
            "CC-BY-NC-4.0",
            False,
            _read_anli,
        ),
        Source(
            "scitail", ("generative_nli/scitail/test.jsonl",), "Apache-2.0", True, _read_nli(_NLI2)
        ),
        Source(
            "rte", ("generative_nli/rte/test.jsonl",), "no-licence-file", True, _read_nli(_NLI2)
        ),
        Source(
            "fever_nli",
            ("fever_nli/dev.txt", "fever_nli/test.txt"),
            "BSD-3-Clause",
            True,
            _read_fever,
        ),
        Source(
            "factcheck_gpt",
            ("factcheck_gpt/subtask3_claim_evidence_stance.jsonl",),
            "Apache-2.0",
            False,
            _read_factcheck,
        ),
        Source(
            "healthver",
            ("healthver/healthver_dev.csv", "healthver/healthver_test.csv"),
            "no-licence-file",
            False,
            _read_healthver,
        ),
        Source(
            "climate_fever",
            ("climate_fever/climate-fever.jsonl",),
            "no-licence-file",
            False,
            _read_climate_fever,
        ),
        Source(
            "summedits",
            tuple(
                f"summedits/summedits_{d}.json"
                for d in (
                    "ectsum",
                    "news",
                    "podcast",
                    "qmsumm",
                    "sales_call",
                    "sales_email",
                    "samsum",
                    "scitldr",
                )
            ),
            "Apache-2.0",
            True,
            _read_summedits,
        ),
        Source("wice", ("wice_dev/claim_dev.jsonl",), "ODC-BY+CC-BY-SA", True, _read_wice),
        Source(
            "scifact",
            (
                "../scifact/original/claims_train.jsonl",
                "../scifact/original/scifact_hf_export_csv.zip",
            ),
            "CC-BY-NC-2.0",
            False,
            _read_scifact,
        ),
    )
}


def in_validation(seed: int, source: str, group: str, share: float) -> bool:
    digest = hashlib.sha256(f"{seed}:{source}:{group}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def _key(claim: str, evidence: str) -> tuple[str, str]:
    return (" ".join(claim.lower().split()), " ".join(evidence.lower().split()))


_WORD = re.compile(r"[a-z0-9]{4,}")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _hard_negatives(items: list[Example], rng: random.Random, cfg: Any) -> Iterator[Example]:
    """`other_evidence`, `distractor` and the rule edits, for one source's examples."""
    from ragrig.judge import perturb

    if len(items) < 3:
        return
    pool_names: list[str] = []
    for ex in items[:2000]:
        pool_names += perturb.swappable_names(ex.evidence)
    pool_names = sorted(set(pool_names))
    if len(pool_names) > 40:  # swap_entity tests every pool name against the evidence
        pool_names = rng.sample(pool_names, 40)
    edits = {
        "negation": CONTRADICT,
        "changed_number": CONTRADICT,
        "reversed_relation": CONTRADICT,
        "swapped_entity": NOT_ADDRESSED,
    }
    for ex in items:
        if ex.kind != "original":
            continue
        if rng.random() < cfg.other_evidence_rate:
            cw = _words(ex.claim)
            cands = [items[rng.randrange(len(items))] for _ in range(8)]
            cands = [c for c in cands if c.group != ex.group]
            if cands:
                other = max(cands, key=lambda c: len(cw & _words(c.evidence)))
                yield replace(
                    ex, evidence=other.evidence, label=NOT_ADDRESSED, kind="other_evidence"
                )
        if ex.label in (SUPPORT, CONTRADICT) and rng.random() < cfg.distractor_rate:
            other = items[rng.randrange(len(items))]
            if other.group != ex.group and other.evidence != ex.evidence:
                parts = [ex.evidence, other.evidence]
                if rng.random() < 0.5:
                    parts.reverse()
                yield replace(ex, evidence=" ".join(parts), kind="distractor")
        if ex.label == SUPPORT and rng.random() < cfg.edit_rate:
            made = {
                "negation": perturb.negate(ex.claim),
                "changed_number": perturb.change_number(ex.claim, ex.evidence, rng),
                "reversed_relation": perturb.reverse_relation(ex.claim),
                "swapped_entity": perturb.swap_entity(ex.claim, ex.evidence, pool_names, rng),
            }
            kinds = [k for k, v in made.items() if v and v != ex.claim]
            if kinds:
                kind = rng.choice(kinds)
                yield replace(ex, claim=made[kind], label=edits[kind], kind=kind)


def load_sources(root: Path, cfg: Any, stats: dict[str, Any] | None = None) -> list[Example]:
    """Every example of the sources `cfg.sources` names (in that order), with hard negatives,
    split, de-duplicated. `cfg`: sources, seed, validation_share, max_per_source,
    max_evidence_words, hard_negatives, other_evidence_rate, distractor_rate, edit_rate."""
    root = Path(root)
    unknown = [s for s in cfg.sources if s not in SOURCES]
    if unknown:
        raise DataValidationError(
            f"unknown verifier training source(s) {unknown}; known: {sorted(SOURCES)}"
        )
    if not root.is_dir():
        raise DataValidationError(f"claim verification data not found: {root}")
    seen: dict[tuple[str, str], int] = {}
    out: list[Example | None] = []
    dropped_dupes: Counter[str] = Counter()
    conflicts: Counter[str] = Counter()
    for name in cfg.sources:
        src = SOURCES[name]
        for rel in src.files:
            if not (root / rel).is_file():
                raise DataValidationError(f"source {name!r}: file not found: {root / rel}")
        items = list(src.read(root, name, cfg))
        rng = random.Random(f"{cfg.seed}:{name}")
        if cfg.max_per_source is not None:
            groups = sorted(
                {e.group for e in items},
                key=lambda g: hashlib.sha256(f"{cfg.seed}:{g}".encode()).hexdigest(),
            )
            keep = set(groups[: cfg.max_per_source])
            items = [e for e in items if e.group in keep]
        if cfg.hard_negatives:
            items += list(_hard_negatives(items, rng, cfg))
        for ex in items:
            split = (
                VALIDATION
                if in_validation(cfg.seed, name, ex.group, cfg.validation_share)
                else TRAIN
            )
            ex = replace(ex, split=split)
            k = _key(ex.claim, ex.evidence)
            if k in seen:
                first = seen[k]
                prev = out[first]
                if prev is not None and prev.label != ex.label:
                    out[first] = None
                    conflicts[name] += 1
                elif prev is None:
                    conflicts[name] += 1
                else:
                    dropped_dupes[name] += 1
                continue
            seen[k] = len(out)
            out.append(ex)
    examples = [e for e in out if e is not None]
    if stats is not None:
        stats["duplicates_dropped"] = dict(dropped_dupes)
        stats["label_conflicts_dropped"] = dict(conflicts)
        stats["examples"] = summarise(examples)
    return examples


def summarise(examples: list[Example]) -> dict[str, dict[str, Any]]:
    """Per source: examples per split, per label and per kind."""
    out: dict[str, dict[str, Any]] = {}
    for e in examples:
        s = out.setdefault(
            e.source, {"train": 0, "validation": 0, "labels": Counter(), "kinds": Counter()}
        )
        s[e.split] += 1
        s["labels"][e.label] += 1
        s["kinds"][e.kind] += 1
    return {
        k: {
            **v,
            "labels": dict(sorted(v["labels"].items())),
            "kinds": dict(sorted(v["kinds"].items())),
        }
        for k, v in out.items()
    }


def licences(names: list[str]) -> dict[str, str]:
    return {n: SOURCES[n].licence for n in names}


def as_records(examples: list[Example]) -> list[dict[str, str]]:
    return [asdict(e) for e in examples]
