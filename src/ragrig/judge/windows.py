"""Evidence for a claim verifier: sentence-aligned windows of the passages, and the few a claim
is read against, chosen lexically (the judge=verifier claim checker and the overlap judge's
confirmation by the verifier share them)."""

from __future__ import annotations

from ragrig.core.text import split_sentences, tokenize


def evidence_windows(contexts: list[str], window: int = 2) -> list[tuple[int, str, set[str]]]:
    """(passage index, text, content words) of every run of 1..`window` adjacent sentences."""
    out = []
    for p, ctx in enumerate(contexts):
        sents = split_sentences(ctx)
        words = tokenize(sents) if sents else []
        for i in range(len(sents)):
            for j in range(i + 1, min(i + window, len(sents)) + 1):
                out.append((p, " ".join(sents[i:j]), set().union(*map(set, words[i:j]))))
    return out


def preselect(
    claim_words: set[str], windows: list[tuple[int, str, set[str]]], k: int = 3
) -> list[str]:
    """The `k` windows holding the largest share of `claim_words` (ties: fewer words first, then
    order), plus the two best windows of different passages joined when that covers more; []
    when no window shares a word with the claim."""
    if not claim_words or not windows:
        return []
    scored = []
    for n, (p, text, words) in enumerate(windows):
        hit = len(claim_words & words)
        if hit:
            scored.append((-hit, len(words), n, p, text, words))
    scored.sort()
    top = [s[4] for s in scored[:k]]
    if scored:
        first = scored[0]
        other = next((s for s in scored if s[3] != first[3]), None)
        if other is not None and len(claim_words & (first[5] | other[5])) > -first[0]:
            joined = f"{first[4]} {other[4]}"
            if joined not in top:
                top.append(joined)
    return top


def claim_pairs(
    claims: list[str],
    words: dict[str, set[str]],
    contexts: list[str],
    window: int,
    k: int,
    skip: set[str] = frozenset(),
) -> tuple[list[tuple[str, str]], list[int]]:
    """The (claim, window) pairs a verifier reads for these claims: each claim's `k`
    pre-selected windows of up to `window` sentences (none for a claim in `skip`), with each
    pair's claim index."""
    windows = evidence_windows(contexts, window)
    pairs: list[tuple[str, str]] = []
    owner: list[int] = []
    for i, c in enumerate(claims):
        if c in skip:
            continue
        for text in preselect(words[c], windows, k):
            pairs.append((c, text))
            owner.append(i)
    return pairs, owner


def best_per_claim(
    n: int,
    pairs: list[tuple[str, str]],
    owner: list[int],
    readings: dict[tuple[str, str], tuple[float, float]],
) -> list[tuple[float, float, str, str]]:
    """Per claim (of `n`): its max P(support) and max P(contradict) over its pairs' readings,
    and the window each came from; (0, 0, "", "") for a claim without pairs."""
    out = [(0.0, 0.0, "", "") for _ in range(n)]
    for i, pair in zip(owner, pairs, strict=True):
        ps, pc = readings[pair]
        s, c, es, ec = out[i]
        if not es or ps > s:
            s, es = ps, pair[1]
        if not ec or pc > c:
            c, ec = pc, pair[1]
        out[i] = (s, c, es, ec)
    return out
