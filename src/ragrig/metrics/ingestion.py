"""Ingestion metrics: does the index preserve the source? (METRICS.md "Ingestion")

Each metric reports its value with its own denominator and counts. An empty denominator gives
`value: null` (absent) with the count 0, never 0 or NaN.

- text fidelity: CER and WER (jiwer) of a conversion against a reference text, per document
  type; both sides normalised by `normalise_markdown` first.
- attribution fidelity: chunks whose pointer resolves to the same text / chunks.
- boundary violations: chunks that split a table, a list or a numbered section / chunks.
- chunk coherence: mean within-chunk adjacent-sentence cosine − mean across-boundary cosine.
- near-duplicates: MinHash over character shingles, LSH banding (datasketch), with false and
  missed merges on a labelled sample of pairs.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import pandas as pd


class Unit(Protocol):
    """A span no chunk may split (ragrig.chunk.structure.Unit)."""

    doc_id: str
    kind: str  # table | list | numbered_section
    start: int
    end: int


# (doc_id, offset) -> (page, section) of the element holding the offset
Pointer = Callable[[str, int], tuple[int, str]]


def _share(num: int, den: int) -> float | None:
    return num / den if den else None


# -- text fidelity ------------------------------------------------------------------------------
_MD_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"<!--.*?-->", re.S), " "),  # comments (docling's <!-- image -->)
    (re.compile(r"<[^>\n]+>"), " "),  # HTML tags
    (re.compile(r"!\[([^\]]*)\]\([^)]*\)"), r"\1"),  # images: their alt text
    (re.compile(r"\[([^\]]*)\]\([^)]*\)"), r"\1"),  # links: their text
    (re.compile(r"^\s*```[^\n]*$", re.M), " "),  # code fences
    (re.compile(r"^(?=[^\n]*\|)(?=[^\n]*-)[ \t|:-]+$", re.M), " "),  # table rules |---|:-:|
    (re.compile(r"^\s*([-*_])(\s*\1){2,}\s*$", re.M), " "),  # horizontal rules
    (re.compile(r"^\s{0,3}#{1,6}\s+", re.M), ""),  # heading marks
    (re.compile(r"^\s*>\s?", re.M), ""),  # block quotes
    (re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+", re.M), ""),  # list markers
    (re.compile(r"\|"), " "),  # table cell separators
    (re.compile(r"(\*\*|__|\*|`|~~)"), ""),  # emphasis, inline code, strike-through
    (re.compile(r"(?<!\w)_(?=\w)|(?<=\w)_(?!\w)"), ""),  # _emphasis_ (not snake_case)
]
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|>~])")  # a Markdown escape: \_ \* \# ...
_HIDE = 0xF0000  # escaped characters wait in a private-use plane while the rules run


def normalise_markdown(text: str) -> str:
    """Plain text of Markdown, the same for the reference and the conversion: Unicode NFKC;
    comments and HTML tags dropped; images and links replaced by their text; code fences,
    table rules and horizontal rules dropped; heading, quote and list markers (at line start),
    table pipes, emphasis, inline-code and strike-through marks removed; Markdown escapes
    (`\\_`, `\\*`) kept as their literal character; HTML entities (`&lt;`) unescaped last;
    every run of whitespace one space; ends stripped. Case and punctuation are kept.
    """
    text = unicodedata.normalize("NFKC", text)
    text = _ESCAPE.sub(lambda m: chr(_HIDE + ord(m.group(1))), text)
    for pattern, repl in _MD_RULES:
        text = pattern.sub(repl, text)
    text = re.sub("[\U000f0000-\U000f00ff]", lambda m: chr(ord(m.group(0)) - _HIDE), text)
    return " ".join(html.unescape(text).split())


def cer_wer(references: Sequence[str], hypotheses: Sequence[str]) -> dict[str, Any]:
    """Corpus CER and WER (errors summed over the pairs / reference characters or words), the
    error counts, and the pairs scored. A pair whose reference is empty is not scored but
    counted (`empty_references`)."""
    import jiwer

    pairs = [(r, h) for r, h in zip(references, hypotheses, strict=True) if r.strip()]
    out: dict[str, Any] = {
        "documents": len(pairs),
        "empty_references": len(references) - len(pairs),
    }
    if not pairs:
        return {**out, "cer": None, "wer": None, "ref_chars": 0, "ref_words": 0}
    refs, hyps = [r for r, _ in pairs], [h for _, h in pairs]
    c = jiwer.process_characters(refs, hyps)
    w = jiwer.process_words(refs, hyps)
    n_chars = c.hits + c.substitutions + c.deletions
    n_words = w.hits + w.substitutions + w.deletions
    return {
        **out,
        "cer": float(c.cer),
        "wer": float(w.wer),
        "ref_chars": int(n_chars),
        "char_errors": int(c.substitutions + c.deletions + c.insertions),
        "ref_words": int(n_words),
        "word_errors": int(w.substitutions + w.deletions + w.insertions),
    }


def text_fidelity(records: Iterable[Mapping[str, str]]) -> dict[str, Any]:
    """CER/WER per document type and over all; records: {type, reference, hypothesis}
    (already normalised)."""
    by_type: dict[str, list[tuple[str, str]]] = {}
    for r in records:
        by_type.setdefault(str(r["type"]), []).append((r["reference"], r["hypothesis"]))
    out = {t: cer_wer([a for a, _ in v], [b for _, b in v]) for t, v in sorted(by_type.items())}
    every = [p for v in by_type.values() for p in v]
    return {"by_type": out, "all": cer_wer([a for a, _ in every], [b for _, b in every])}


# -- attribution ---------------------------------------------------------------------------------
def attribution(
    chunks: pd.DataFrame, documents: pd.DataFrame, pointer: Pointer | None = None
) -> dict[str, Any]:
    """Chunks whose pointer resolves to the same text / chunks.

    A pointer (doc_id, start, end, and with elements page and section) resolves when its
    doc_id is a documents row, 0 <= start <= end <= len(content), content[start:end] equals
    the chunk's text, and (with `pointer`, the corpus's elements, and when the chunk carries
    page/section) the element holding `start` has that page and section. Failures are counted by reason;
    empty chunks (an empty document's) are counted apart (`empty_chunks`), not as failures.
    """
    contents = dict(zip(documents["doc_id"], documents["content"], strict=True))
    check_struct = pointer is not None and {"page", "section"} <= set(chunks.columns)
    failures: Counter[str] = Counter()
    for row in chunks.itertuples(index=False):
        content = contents.get(row.doc_id)
        start, end = int(row.start), int(row.end)
        if content is None:
            failures["unknown_document"] += 1
        elif not 0 <= start <= end <= len(content):
            failures["span_out_of_range"] += 1
        elif content[start:end] != row.text:
            failures["text_mismatch"] += 1
        elif check_struct:
            page, section = pointer(row.doc_id, start)
            if int(row.page) != page:
                failures["page_mismatch"] += 1
            elif str(row.section) != section:
                failures["section_mismatch"] += 1
    n = len(chunks)
    bad = sum(failures.values())
    return {
        "value": _share(n - bad, n),
        "verified": n - bad,
        "chunks": n,
        "empty_chunks": int((chunks["start"] == chunks["end"]).sum()) if n else 0,
        "checked_page_section": check_struct,
        "failures": dict(sorted(failures.items())),
    }


# -- boundary violations -------------------------------------------------------------------------
def boundary_violations(
    chunks: pd.DataFrame,
    documents: pd.DataFrame,
    units: Iterable[Unit],
    max_tokens: int | None,
    count_tokens: Callable[[str], int],
) -> dict[str, Any]:
    """Chunks that split a table, a list or a numbered section / chunks.

    A chunk [cs, ce) *splits* a unit [us, ue) of its documents row when it holds part but not
    all of it (cs < ue and us < ce, and not cs <= us and ue <= ce) and the unit would have
    fitted in one chunk: its text has at most `max_tokens` tokens (always, when the chunker has
    no limit). A unit is a table element, a list (a run of consecutive list items), or the body
    of a numbered section (after its heading, which the chunk's `section` carries, up to the
    next heading of the same or a higher level, within the row). A chunk splitting several
    units counts once; `by_kind` counts (chunk, unit kind) pairs.
    """
    contents = dict(zip(documents["doc_id"], documents["content"], strict=True))
    fits: dict[Unit, bool] = {}
    per_doc: dict[str, list[Unit]] = {}
    for u in units:
        per_doc.setdefault(u.doc_id, []).append(u)
    kinds_total: Counter[str] = Counter(u.kind for us in per_doc.values() for u in us)
    by_kind: Counter[str] = Counter()
    violating = 0
    for row in chunks.itertuples(index=False):
        cs, ce = int(row.start), int(row.end)
        hit = set()
        for u in per_doc.get(row.doc_id, ()):
            if not (cs < u.end and u.start < ce) or (cs <= u.start and u.end <= ce):
                continue
            if u not in fits:
                text = contents.get(u.doc_id, "")[u.start : u.end]
                fits[u] = max_tokens is None or count_tokens(text) <= max_tokens
            if fits[u]:
                hit.add(u.kind)
        violating += bool(hit)
        by_kind.update(hit)
    n = len(chunks)
    return {
        "value": _share(violating, n),
        "violating_chunks": violating,
        "chunks": n,
        "by_kind": {k: by_kind.get(k, 0) for k in ("table", "list", "numbered_section")},
        "units": {k: kinds_total.get(k, 0) for k in ("table", "list", "numbered_section")},
        "max_tokens": max_tokens,
    }


# -- coherence -----------------------------------------------------------------------------------
def coherence(documents: Iterable[Sequence[np.ndarray]]) -> dict[str, Any]:
    """Mean cosine of adjacent sentences inside a chunk − mean cosine across a chunk boundary
    (the last sentence of a chunk and the first of the next chunk of the same document).

    `documents`: per document its chunks in order, each an array of its sentences' normalised
    embeddings (rows). Both means have their pair counts; the difference is absent when either
    has no pair."""
    within: list[float] = []
    across: list[float] = []
    n_docs = 0
    for chunks in documents:
        n_docs += 1
        for vecs in chunks:
            v = np.asarray(vecs, dtype=np.float64)
            if len(v) > 1:
                within.extend(np.sum(v[:-1] * v[1:], axis=1).tolist())
        for a, b in zip(chunks, chunks[1:], strict=False):
            if len(a) and len(b):
                across.append(float(np.dot(np.asarray(a[-1]), np.asarray(b[0]))))
    w = float(np.mean(within)) if within else None
    x = float(np.mean(across)) if across else None
    return {
        "value": w - x if w is not None and x is not None else None,
        "within": w,
        "within_pairs": len(within),
        "across": x,
        "across_pairs": len(across),
        "documents": n_docs,
    }


# -- near-duplicates -----------------------------------------------------------------------------
SHINGLE_CHARS = 5
NUM_PERM = 128
THRESHOLD = 0.8
MINHASH_SEED = 1


def shingles(text: str, k: int = SHINGLE_CHARS) -> set[str]:
    """Character k-shingles of the text with its whitespace runs made one space (a text
    shorter than k is one shingle; an empty text has none)."""
    return _windows(" ".join(text.split()), k)


def _windows(t: Any, k: int) -> set[Any]:
    """The k-long slices of a str or bytes `t` (one when shorter than k, none when empty)."""
    return {t[i : i + k] for i in range(max(len(t) - k + 1, 1))} if t else set()


@functools.lru_cache(maxsize=4)
def _template(num_perm: int) -> Any:
    """An empty MinHash whose permutations every MinHash of `num_perm` shares (drawing them
    is a third of the cost of hashing a short text)."""
    import zlib

    from datasketch import MinHash

    return MinHash(num_perm=num_perm, seed=MINHASH_SEED, hashfunc=zlib.crc32)


def minhash(text: str, k: int = SHINGLE_CHARS, num_perm: int = NUM_PERM) -> Any:
    """datasketch MinHash of the text's shingles, each hashed by CRC-32 of its UTF-8 bytes
    (deterministic, about twice as fast as datasketch's default SHA-1). A minimum does not
    depend on order, so the shingles are hashed as the set holds them."""
    template = _template(num_perm)
    m = type(template)(
        seed=MINHASH_SEED,
        hashfunc=template.hashfunc,
        hashvalues=template.hashvalues,
        permutations=template.permutations,
        scheme=template.scheme,
    )
    t = " ".join(text.split())
    if t.isascii():  # one byte a character: the shingles of the bytes are the same bytes
        m.update_batch(_windows(t.encode("ascii"), k))
    else:
        m.update_batch([s.encode("utf-8") for s in _windows(t, k)])
    return m


def lsh_index(
    texts: Mapping[str, str],
    k: int = SHINGLE_CHARS,
    num_perm: int = NUM_PERM,
    threshold: float = THRESHOLD,
    cache: dict[str, Any] | None = None,
) -> tuple[Any, dict[str, Any], list[str]]:
    """(MinHashLSH over the non-empty texts, their MinHashes, the ids of empty texts).
    `cache` (text -> MinHash, same k and num_perm) saves hashing a text twice."""
    from datasketch import MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    cache = {} if cache is None else cache
    hashes, empty = {}, []
    for key, text in texts.items():
        if not text.strip():
            empty.append(key)
            continue
        if text not in cache:
            cache[text] = minhash(text, k, num_perm)
        hashes[key] = cache[text]
        lsh.insert(key, hashes[key])
    return lsh, hashes, empty


def near_duplicates(texts: Mapping[str, str], **kw: Any) -> dict[str, Any]:
    """Groups of near-duplicate texts: every LSH candidate pair joined (connected components).
    `value` = texts in a group of two or more / non-empty texts."""
    lsh, hashes, empty = lsh_index(texts, **kw)
    parent = {key: key for key in hashes}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for key, m in hashes.items():
        for other in lsh.query(m):
            a, b = find(key), find(other)
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[str, list[str]] = {}
    for key in hashes:
        groups.setdefault(find(key), []).append(key)
    multi = sorted(sorted(g) for g in groups.values() if len(g) > 1)
    in_groups = sum(len(g) for g in multi)
    return {
        "value": _share(in_groups, len(hashes)),
        "items": len(hashes),
        "empty": len(empty),
        "groups": len(multi),
        "items_in_groups": in_groups,
        "largest_group": max((len(g) for g in multi), default=0),
        "examples": [g[:5] for g in multi[:5]],
    }


def merge_errors(pairs: Sequence[Mapping[str, Any]], **kw: Any) -> dict[str, Any]:
    """False and missed merges on labelled pairs {a, b, duplicate}: a pair is merged when LSH
    returns b for a. false_merge_rate = merged distinct pairs / distinct pairs;
    missed_merge_rate = unmerged duplicate pairs / duplicate pairs."""
    texts = {}
    for i, p in enumerate(pairs):
        texts[f"{i}:a"], texts[f"{i}:b"] = str(p["a"]), str(p["b"])
    lsh, hashes, _ = lsh_index(texts, **kw)
    false_merges = missed = dups = 0
    for i, p in enumerate(pairs):
        a = f"{i}:a"
        merged = a in hashes and f"{i}:b" in lsh.query(hashes[a])
        if bool(p["duplicate"]):
            dups += 1
            missed += not merged
        else:
            false_merges += merged
    distinct = len(pairs) - dups
    return {
        "pairs": len(pairs),
        "duplicates": dups,
        "distinct": distinct,
        "false_merges": false_merges,
        "missed_merges": missed,
        "false_merge_rate": _share(false_merges, distinct),
        "missed_merge_rate": _share(missed, dups),
    }
