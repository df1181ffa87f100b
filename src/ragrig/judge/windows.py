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
