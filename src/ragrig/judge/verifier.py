"""Faithfulness read by a trained verifier: each claim against a few pre-selected evidence windows.

Claims come exactly as for the overlap judge (`OverlapJudge.claim_set`: a segmenter that knows
abbreviations and citations, refusals and partial refusals, short answers checked with their
question). For each claim, evidence is pre-selected cheaply: every window of 1..`window` adjacent
sentences of one passage is ranked by the share of the claim's content words it holds, and the
top `windows_per_claim` are kept, plus, when the best two come from different passages and
together hold more of the claim than either, their concatenation (a claim drawing on two
passages). The verifier (`ragrig.train_verifier`, trained by the train_verifier stage) reads those
pairs, all claims of an answer in one batch, or, after `prefetch(items)` (the judge stage calls
it with every answer), the pairs of all answers in one length-sorted run, so that batches hold
pairs of similar length; a claim's P(support) is the maximum over its windows. A claim none of
whose content words occurs in the context gets P(support) 0 without a model call, and so does a
claim a hard check contradicts (its score is 0 whatever the model says).

A claim is supported when P(support) >= `support_threshold`, no negation conflict with the
context holds (OverlapJudge.negation_conflict) and (with `entity_check`) every name and number of
it occurs in the context; its claim score is P(support), or 0 when a hard check contradicts it
(Verdict.contradictions). The verdict's score is the supported share (the partition rule); the
answer-level continuous score used for calibration (`Verdict.soft_score`) is the mean claim
score.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragrig.core.text import split_sentences
from ragrig.judge import entities as ent
from ragrig.judge.base import Verdict, unclaimed
from ragrig.judge.overlap import OverlapJudge
from ragrig.judge.refusal import answer_kind
from ragrig.judge.windows import best_per_claim, claim_pairs
from ragrig.weights.precision import resolve_precision

DEFAULT_MODEL = Path("data") / "train_verifier"


class VerifierJudge:
    def __init__(
        self,
        model: str | Path | None = None,
        support_threshold: float = 0.5,
        windows_per_claim: int = 2,
        window: int = 2,
        entity_check: bool = True,
        min_content_words: int = 2,
        max_length: int = 128,
        batch_size: int = 32,
        threads: int = 2,
        verifier: Any = None,
        quantize: str = "none",
        contradict_threshold: float | None = None,
        aggregate: str = "mean",
    ):
        if window < 1 or windows_per_claim < 1:
            raise ValueError("window and windows_per_claim must be >= 1")
        if aggregate not in ("mean", "min"):
            raise ValueError(f"aggregate {aggregate!r}: choose mean or min")
        self.threshold = support_threshold
        self.contradict_threshold = contradict_threshold
        self.aggregate = aggregate
        self.k = windows_per_claim
        self.window = window
        self.entity_check = entity_check
        self.claims = OverlapJudge(min_content_words=min_content_words)
        if verifier is None:
            from ragrig.judge.verifier_model import Verifier

            verifier = Verifier(
                model if model is not None else DEFAULT_MODEL,
                max_length,
                batch_size,
                threads,
                quantize,
            )
        self.verifier = verifier
        # (claim, evidence) -> (P(support), P(contradict)), filled by prefetch()
        self._scored: dict[tuple[str, str], tuple[float, float]] = {}

    @classmethod
    def from_config(cls, cfg: Any) -> VerifierJudge:
        return cls(
            cfg.model,
            cfg.support_threshold,
            cfg.windows_per_claim,
            cfg.window,
            cfg.entity_check,
            cfg.min_content_words,
            cfg.max_length,
            cfg.batch_size,
            cfg.threads,
            quantize=resolve_precision(cfg.quantize, fp32="none"),
            contradict_threshold=cfg.contradict_threshold,
            aggregate=cfg.aggregate,
        )

    def _read(self, pairs: list[tuple[str, str]]) -> list[tuple[float, float]]:
        """(P(support), P(contradict)) per pair; P(contradict) is read only when
        `contradict_threshold` is set (and the verifier gives it), else 0."""
        if not pairs:
            return []
        if self.contradict_threshold is not None and hasattr(self.verifier, "readings"):
            return list(self.verifier.readings(pairs))
        return [(s, 0.0) for s in self.verifier.support(pairs)]

    def hard_checks(self, cs: Any, contexts: list[str]) -> tuple[tuple[str, str, str], ...]:
        """The claims' contradictions (ragrig.judge.overlap.OverlapJudge.contradictions): a
        negation conflict with the context, and with `entity_check` a name or number absent from
        it. Such a claim scores 0 whatever the model says, so the model never reads it."""
        return self.claims.contradictions(cs, contexts, self.entity_check)

    def rejected(self, cs: Any, contexts: list[str], hard: tuple) -> set[str]:
        """The claims scored 0 without the model: those a hard check contradicts and, with
        `entity_check`, those with any name or number absent from the context."""
        out = {c for c, _, _ in hard}
        if self.entity_check:
            out |= {c for c in cs.claims if ent.check(cs.surface[c], contexts).flag}
        return out

    def _pairs(
        self,
        claims: list[str],
        words: dict[str, set[str]],
        contexts: list[str],
        skip: set[str] = frozenset(),
    ) -> tuple[list[tuple[str, str]], list[int]]:
        """The (claim, window) pairs the verifier reads for these claims (none for a claim in
        `skip`), with each pair's claim index."""
        return claim_pairs(claims, words, contexts, self.window, self.k, skip)

    def prefetch(self, items: list[tuple[str, str, list[str]]]) -> int:
        """Score the pairs of every (question, answer, contexts) in one run (length-sorted
        batches across answers); judge() then reads them instead of calling the model. The
        scores of earlier prefetches are dropped. Returns the number of pairs."""
        pairs: list[tuple[str, str]] = []
        for question, answer, contexts in items:
            cs = self.claims.claim_set(question, answer)
            if cs.claims:
                skip = self.rejected(cs, contexts, self.hard_checks(cs, contexts))
                pairs += self._pairs(cs.claims, cs.words, contexts, skip)[0]
        self._scored = dict(zip(pairs, self._read(pairs), strict=True))
        return len(pairs)

    def claim_probabilities(
        self,
        claims: list[str],
        words: dict[str, set[str]],
        contexts: list[str],
        skip: set[str] = frozenset(),
    ) -> list[float]:
        """Max P(support) over each claim's pre-selected windows (0 when none, or when the claim
        is in `skip`): prefetched scores, the others in one batch."""
        return [r[0] for r in self.claim_readings(claims, words, contexts, skip)]

    def claim_readings(
        self,
        claims: list[str],
        words: dict[str, set[str]],
        contexts: list[str],
        skip: set[str] = frozenset(),
    ) -> list[tuple[float, float, str, str]]:
        """Per claim: (max P(support), max P(contradict)) over its windows, and the window each
        came from ("" when the claim has none)."""
        pairs, owner = self._pairs(claims, words, contexts, skip)
        missing = list(dict.fromkeys(pair for pair in pairs if pair not in self._scored))
        read = {**dict(zip(missing, self._read(missing), strict=True)), **self._scored}
        return best_per_claim(len(claims), pairs, owner, read)

    def judge(
        self, question: str, answer: str, contexts: list[str], reference: str | None = None
    ) -> Verdict:
        cs = self.claims.claim_set(question, answer)
        kind = answer_kind(len(cs.claims), cs.declined)
        if not cs.claims:
            return unclaimed(answer, kind)
        has_sentences = any(split_sentences(c) for c in contexts)
        hard = self.hard_checks(cs, contexts)
        rejected = self.rejected(cs, contexts, hard)
        readings = self.claim_readings(cs.claims, cs.words, contexts, rejected)
        scores = [r[0] for r in readings]
        sup = [c for c, s in zip(cs.claims, scores, strict=True) if s >= self.threshold]
        uns = [c for c in cs.claims if c not in sup]
        if self.contradict_threshold is not None:
            found = {c for c, _, _ in hard}
            read = tuple(
                (c, "contradicted", f"P(contradict) {pc:.2f} against: {ev[:200]}")
                for c, (ps, pc, _, ev) in zip(cs.claims, readings, strict=True)
                if c not in found and ps < self.threshold and pc >= self.contradict_threshold
            )
            hard = tuple(hard) + read
        answer_score = min(scores) if self.aggregate == "min" else None
        found = ent.check(" ".join(cs.surface[c] + "." for c in cs.claims), contexts)
        return Verdict(
            cs.claims,
            sup,
            uns,
            reason="" if has_sentences else "context has no sentences: no claim can be supported",
            kind=kind,
            entity_overlap=found.overlap,
            unseen_entities=found.unseen_names + found.unseen_numbers,
            claim_scores=tuple(scores),
            contradictions=hard,
            answer_score=answer_score,
        )
