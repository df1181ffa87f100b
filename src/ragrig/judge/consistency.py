"""Self-consistency read by meaning: an answer and its samples clustered by mutual entailment.

Two texts are in one cluster when each supports the other (bidirectional entailment, as semantic
entropy does: Kuhn et al., 2023), read by the claim verifier: P(support) of one as the claim with
the other as the evidence >= `threshold`, both ways. Clusters are built greedily in order (the
answer first, then its samples), each text compared with the first member of every cluster so
far; texts equal after whitespace and case folding share a cluster without a reading.

Per answer: `agreement`, the share of its valid samples in the answer's cluster; `clusters`, the
number of clusters over the answer and its samples; `entropy`, the discrete semantic entropy in
nats over those cluster sizes. A failed (None) or blank sample is left out and counted; an answer
without a valid sample has no agreement (None), never 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

# (claim, evidence) pairs -> (P(support), P(contradict)) per pair (ragrig.judge.verifier_model)
Readings = Callable[[list[tuple[str, str]]], list[tuple[float, float]]]


@dataclass(frozen=True)
class Consistency:
    agreement: float | None  # share of the valid samples in the answer's cluster
    clusters: int  # over the answer and its valid samples; 0 without a valid sample
    entropy: float | None  # semantic entropy (nats) over the cluster sizes
    samples: int  # valid samples
    failed: int  # failed or blank samples
    identical: bool  # every valid sample is the answer's text (sampling gave no variety)
    labels: tuple[int, ...] = ()  # cluster of the answer, then of each valid sample


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def _valid(answer: str, samples: Sequence[str | None]) -> tuple[list[str], int]:
    drawn = [s for s in samples if s is not None and str(s).strip()]
    return [answer, *drawn], len(samples) - len(drawn)


def pairs_for(answer: str, samples: Sequence[str | None]) -> list[tuple[str, str]]:
    """Every (claim, evidence) pair the clustering may read: each ordered pair of distinct
    texts (after folding) among the answer and its valid samples."""
    texts, _ = _valid(answer, samples)
    if len(texts) < 2:
        return []
    distinct = list({_key(t): t for t in reversed(texts)}.values())[::-1]
    return [(b, a) for a in distinct for b in distinct if _key(a) != _key(b)]


def cluster(
    texts: Sequence[str], read: Mapping[tuple[str, str], tuple[float, float]], threshold: float
) -> list[int]:
    """The cluster of each text (greedy, in order; module doc)."""

    def entails(a: str, b: str) -> bool:  # a, as evidence, supports b
        return read[(b, a)][0] >= threshold

    firsts: list[str] = []
    labels = []
    for t in texts:
        for c, first in enumerate(firsts):
            if _key(t) == _key(first) or (entails(first, t) and entails(t, first)):
                labels.append(c)
                break
        else:
            firsts.append(t)
            labels.append(len(firsts) - 1)
    return labels


def semantic_consistency(
    answer: str,
    samples: Sequence[str | None],
    read: Mapping[tuple[str, str], tuple[float, float]],
    threshold: float,
) -> Consistency:
    """One answer's agreement, clusters and entropy from the readings of `pairs_for`."""
    texts, failed = _valid(answer, samples)
    if len(texts) < 2:
        return Consistency(None, 0, None, 0, failed, False)
    labels = cluster(texts, read, threshold)
    n = len(texts)
    sizes = [labels.count(c) for c in range(max(labels) + 1)]
    entropy = -sum(s / n * math.log(s / n) for s in sizes) + 0.0  # +0.0: never -0.0
    return Consistency(
        agreement=(sizes[labels[0]] - 1) / (n - 1),
        clusters=len(sizes),
        entropy=entropy,
        samples=n - 1,
        failed=failed,
        identical=all(_key(t) == _key(answer) for t in texts[1:]),
        labels=tuple(labels),
    )


def consistency_all(
    items: Sequence[tuple[str, Sequence[str | None]]], readings: Readings, threshold: float
) -> list[Consistency]:
    """`semantic_consistency` of every (answer, samples), all pairs read in one call (none when
    no answer has two distinct texts, so the verifier is then never loaded)."""
    pairs = list(dict.fromkeys(p for a, s in items for p in pairs_for(a, s)))
    read = dict(zip(pairs, readings(pairs), strict=True)) if pairs else {}
    return [semantic_consistency(a, s, read, threshold) for a, s in items]
