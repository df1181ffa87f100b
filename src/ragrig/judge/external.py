"""External consistency: each claim of an answer checked against the whole corpus, not only the
passages the generator saw.

Every claim (split as the overlap judge splits an answer) is retrieved against the corpus with
the pipeline's own index (`search`: claim texts -> chunk rows per claim, best first), its
`windows_per_claim` best evidence windows of up to `window` sentences are chosen among the
retrieved chunks lexically (ragrig.judge.windows), and the claim verifier reads them. A claim is
supported when its max P(support) >= `support_threshold` (the documents of the windows that
support it are kept) and no lexical check of a kind in `checks` fires against the retrieved
chunks; it is contradicted (flagged) when such a check fires (`number` / `entity`: a number or
name of the claim absent from retrieved chunks that hold its other words, as the overlap judge
checks a context; the verifier reads meaning but passes about half of the claims with a swapped
name, docs/benchmarks.md), or when it is not supported and its max P(contradict) >=
`contradict_threshold` (kind `verifier`), with the document and window. The value is the share of an
answer's claims the corpus supports (FActScore-style); an answer without claims has none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragrig.judge.consistency import Readings
from ragrig.judge.windows import evidence_windows, preselect

Search = Callable[[list[str], int], list[list[int]]]


@dataclass(frozen=True)
class ClaimCheck:
    claim: str
    p_support: float
    p_contradict: float
    supported: bool
    contradicted: bool
    doc_ids: tuple[str, ...]  # supporting documents, else the contradicting one's
    evidence: str  # the window that gave the deciding reading
    kind: str = ""  # of a contradiction: `verifier`, or the lexical check's (number, entity...)


@dataclass(frozen=True)
class External:
    value: float | None  # share of the claims the corpus supports; None without claims
    claims: tuple[ClaimCheck, ...] = field(default_factory=tuple)

    @property
    def supported(self) -> int:
        return sum(c.supported for c in self.claims)

    @property
    def contradicted(self) -> int:
        return sum(c.contradicted for c in self.claims)

    def record(self) -> list[dict[str, Any]]:
        """The claims as JSON-ready dicts (the judgments' `external_claims` column)."""
        return [
            {
                "claim": c.claim,
                "supported": c.supported,
                "contradicted": c.contradicted,
                "p_support": round(c.p_support, 4),
                "p_contradict": round(c.p_contradict, 4),
                "doc_ids": list(c.doc_ids),
                "evidence": c.evidence[:300],
                "kind": c.kind,
            }
            for c in self.claims
        ]


class ExternalCheck:
    """Claims against the corpus: `chunk_texts` / `chunk_docs` in the index's row order."""

    def __init__(
        self,
        search: Search,
        chunk_texts: Sequence[str],
        chunk_docs: Sequence[str],
        readings: Readings,
        k: int = 5,
        window: int = 2,
        windows_per_claim: int = 3,
        support_threshold: float = 0.5,
        contradict_threshold: float = 0.5,
        checks: Sequence[str] = ("number", "entity"),
        splitter: Any = None,
    ):
        if len(chunk_texts) != len(chunk_docs):
            raise ValueError(f"{len(chunk_texts)} chunk texts for {len(chunk_docs)} documents")
        self.search = search
        self.texts = list(chunk_texts)
        self.docs = [str(d) for d in chunk_docs]
        self.readings = readings
        self.k = k
        self.window = window
        self.per_claim = windows_per_claim
        self.support_threshold = support_threshold
        self.contradict_threshold = contradict_threshold
        self.checks = tuple(checks)
        if splitter is None:
            from ragrig.judge.overlap import OverlapJudge

            splitter = OverlapJudge()
        self.splitter = splitter  # its lexical checks (OverlapJudge.contradictions)
        self._words: dict[int, set[str]] = {}  # content words per chunk row, as read

    def _windows(self, words: set[str], rows: list[int]) -> list[tuple[str, tuple[str, ...]]]:
        """The claim's chosen windows among the retrieved chunks, each with its documents."""
        wins = evidence_windows([self.texts[r] for r in rows], self.window)
        out = []
        for text in preselect(words, wins, self.per_claim):
            # a chosen window is one window or two joined: its documents are those inside it
            docs = dict.fromkeys(self.docs[rows[p]] for p, t, _ in wins if t in text)
            out.append((text, tuple(docs)))
        return out

    def _chunk_words(self, row: int) -> set[str]:
        if row not in self._words:
            self._words[row] = self.splitter._words(self.texts[row])
        return self._words[row]

    def _holding(self, cs: Any, claim: str, rows: list[int]) -> list[int]:
        """The retrieved chunks that hold the claim's words other than its names and numbers (at
        the splitter's threshold, all of them for a short answer): where a name or a number of
        the claim must be found. A swapped-in name that some other retrieved document mentions
        is no evidence for the claim (the other words are not there)."""
        from ragrig.judge import entities as ent

        named = self.splitter._words(" ".join(ent.names(cs.surface[claim])))
        other = {w for w in cs.words[claim] - named if not any(ch.isdigit() for ch in w)}
        if not other:
            return []
        need = 1.0 if cs.short else self.splitter.threshold
        return [r for r in rows if len(other & self._chunk_words(r)) / len(other) >= need]

    def _lexical(self, cs: Any, claim: str, rows: list[int]) -> tuple[str, str, tuple] | None:
        """The claim's first lexical finding of a kind in `checks` (their documents in the third
        place), else None: a negation conflict against the retrieved chunks, a number or name
        absent from every retrieved chunk holding the claim's other words (none holding them:
        the corpus is silent and the verifier decides)."""
        if not self.checks or not rows:
            return None
        from ragrig.judge import entities as ent
        from ragrig.judge.overlap import ENTITY, NUMBER, ClaimSet

        one = ClaimSet([claim], {claim: cs.words[claim]}, {claim: cs.surface[claim]}, cs.short)
        texts = [self.texts[r] for r in rows]
        for _, kind, detail in self.splitter.contradictions(one, texts, entities=False):
            if kind in self.checks:
                return kind, detail, tuple(dict.fromkeys(self.docs[r] for r in rows))
        if NUMBER not in self.checks and ENTITY not in self.checks:
            return None
        holding = self._holding(cs, claim, rows)
        if not holding:
            return None
        found = ent.check(cs.surface[claim], [self.texts[r] for r in holding])
        unseen = [n for n in found.unseen_names if not ent.opens_clause(n, cs.surface[claim])]
        docs = tuple(dict.fromkeys(self.docs[r] for r in holding))
        for kind, values in ((NUMBER, found.unseen_numbers), (ENTITY, unseen)):
            if kind in self.checks and values:
                return kind, values[0], docs
        return None

    def check_all(self, claim_sets: Sequence[Any]) -> list[External]:
        """External consistency of each answer's claims (a ClaimSet of ragrig.judge.overlap:
        claims, words, surface); every claim retrieved in one search and every pair read in
        one verifier call."""
        claims = [c for cs in claim_sets for c in cs.claims]
        if not self.texts or not claims:
            return [External(None) for _ in claim_sets]
        hits = self.search(claims, min(self.k, len(self.texts)))
        chosen, found, i = [], [], 0
        for cs in claim_sets:
            for c in cs.claims:
                rows = [int(r) for r in hits[i]]
                chosen.append(self._windows(cs.words[c], rows))
                found.append(self._lexical(cs, c, rows))
                i += 1
        pairs = list(
            dict.fromkeys(
                (c, t)
                for c, ws, f in zip(claims, chosen, found, strict=True)
                if f is None  # a lexical finding decides without the model
                for t, _ in ws
            )
        )
        read = dict(zip(pairs, self.readings(pairs), strict=True)) if pairs else {}
        out, i = [], 0
        for cs in claim_sets:
            checks = []
            for c in cs.claims:
                checks.append(self._decide(c, chosen[i], found[i], read))
                i += 1
            value = sum(x.supported for x in checks) / len(checks) if checks else None
            out.append(External(value, tuple(checks)))
        return out

    def _decide(
        self,
        claim: str,
        windows: list[tuple[str, tuple[str, ...]]],
        finding: tuple[str, str, tuple] | None,
        read: dict[tuple[str, str], tuple[float, float]],
    ) -> ClaimCheck:
        if finding is not None:
            kind, detail, docs = finding
            return ClaimCheck(claim, 0.0, 0.0, False, True, docs, f"{kind}: {detail}", kind)
        if not windows:  # no retrieved chunk shares a word with it: the corpus is silent
            return ClaimCheck(claim, 0.0, 0.0, False, False, (), "")
        got = [(read[(claim, t)], t, d) for t, d in windows]
        ps, best_s, docs_s = max(((r[0], t, d) for r, t, d in got), key=lambda x: x[0])
        pc, best_c, docs_c = max(((r[1], t, d) for r, t, d in got), key=lambda x: x[0])
        if ps >= self.support_threshold:
            docs = dict.fromkeys(
                doc for r, _, d in got if r[0] >= self.support_threshold for doc in d
            )
            return ClaimCheck(claim, ps, pc, True, False, tuple(docs), best_s)
        contradicted = pc >= self.contradict_threshold
        return ClaimCheck(
            claim,
            ps,
            pc,
            False,
            contradicted,
            docs_c if contradicted else (),
            best_c if contradicted else best_s,
            "verifier" if contradicted else "",
        )


def index_search(index: Any) -> Search:
    """A `Search` over a sparse index of ragrig.index (its `search(texts, k)` -> scores, rows);
    rows padded with -1 (fewer hits than k) are dropped."""

    def search(texts: list[str], k: int) -> list[list[int]]:
        _, rows = index.search(texts, k)
        return [[int(r) for r in row if r >= 0] for row in rows]

    return search
