"""What every judge backend shares: its types, protocol and backend registry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ragrig.core.text import counted


class InvalidVerdict(ValueError):
    """A verdict whose supported/unsupported claims do not partition the extracted claims."""


@dataclass(frozen=True)
class Verdict:
    """Claim-level verdict. Valid only if supported and unsupported partition `extracted`
    completely and disjointly, with no blank claim; no claims means outcome `no_claims`."""

    extracted: list[str]
    supported: list[str]
    unsupported: list[str]
    reason: str = ""
    # answer / partial_refusal / refusal (ragrig.judge.refusal): a refusal has no claims and is
    # kept apart so that refusal correctness can be scored on its own
    kind: str = "answer"
    # share of the answer's names and numbers found in the context (None: it has none)
    entity_overlap: float | None = None
    unseen_entities: tuple[str, ...] = ()
    # per extracted claim, its support probability in [0, 1] (verifier judge; None: not given)
    claim_scores: tuple[float, ...] | None = None
    # answer-level P(faithful) of a calibrated answer model (ragrig.judge.extractive; None: none)
    answer_score: float | None = None
    # hard checks that contradict a claim, (claim, kind, detail): a negation conflict, a number
    # or a name absent from the context (ragrig.judge.overlap). Each such claim is unsupported,
    # and the answer is unfaithful whatever its soft score (judge_all's `judged_faithful`).
    contradictions: tuple[tuple[str, str, str], ...] = ()

    def __post_init__(self) -> None:
        from ragrig.judge.refusal import ANSWER_KINDS, REFUSAL

        if self.kind not in ANSWER_KINDS:
            raise InvalidVerdict(f"unknown answer kind {self.kind!r}; expected {ANSWER_KINDS}")
        if self.kind == REFUSAL and self.extracted:
            raise InvalidVerdict("a refusal has no claims; claims make it a partial_refusal")
        blank = [c for c in self.extracted + self.supported + self.unsupported if not c.strip()]
        if blank:
            raise InvalidVerdict(counted(blank, "blank claim", form=repr))
        if len(set(self.extracted)) != len(self.extracted):
            raise InvalidVerdict("duplicate extracted claims")
        overlap = set(self.supported) & set(self.unsupported)
        if overlap:
            both = counted(sorted(overlap), "claim", form=repr)
            raise InvalidVerdict(f"{both} both supported and unsupported")
        union = set(self.supported) | set(self.unsupported)
        if union != set(self.extracted) or len(self.supported) + len(self.unsupported) != len(
            self.extracted
        ):
            raise InvalidVerdict(
                "supported and unsupported do not cover the extracted claims exactly"
            )
        if self.claim_scores is not None and (
            len(self.claim_scores) != len(self.extracted)
            or not all(0.0 <= s <= 1.0 for s in self.claim_scores)
        ):
            raise InvalidVerdict("claim_scores must give one probability in [0, 1] per claim")
        wrong = {c for c, _, _ in self.contradictions} - set(self.unsupported)
        if wrong:
            wrong_ones = counted(sorted(wrong), "claim", form=repr)
            raise InvalidVerdict(f"contradicted claims must be unsupported: {wrong_ones}")
        if self.answer_score is not None and not (
            self.extracted and 0.0 <= self.answer_score <= 1.0
        ):
            raise InvalidVerdict("answer_score must be a probability in [0, 1] of a scored answer")

    @property
    def outcome(self) -> str:
        return "scored" if self.extracted else "no_claims"

    @property
    def score(self) -> float | None:
        """supported / extracted; None (not 0, not NaN) when there are no claims."""
        if not self.extracted:
            return None
        return len(self.supported) / len(self.extracted)

    @property
    def soft_score(self) -> float | None:
        """Answer-level continuous score: the calibrated answer model's P(faithful) when the
        judge has one, else the mean claim score when the judge gives claim scores, else
        `score`; None when there are no claims."""
        if self.extracted and self.answer_score is not None:
            return self.answer_score
        if not self.extracted or self.claim_scores is None:
            return self.score
        return sum(self.claim_scores) / len(self.claim_scores)


def unclaimed(answer: str, kind: str) -> Verdict:
    """The verdict of an answer with no checkable claim, its reason said: an empty answer, a
    refusal, or nothing to check (every claim checker's)."""
    from ragrig.judge.refusal import REFUSAL

    if not answer.strip():
        reason = "empty answer"
    else:
        reason = "refusal" if kind == REFUSAL else "no checkable claim"
    return Verdict([], [], [], reason=reason, kind=kind)


class Judge(Protocol):
    def judge(
        self, question: str, answer: str, contexts: list[str], reference: str | None = None
    ) -> Verdict: ...


JUDGES = {
    "overlap": "ragrig.judge.overlap:OverlapJudge",
    "verifier": "ragrig.judge.verifier:VerifierJudge",
    "llm_claims": "ragrig.judge.llm_claims:LLMClaimJudge",
}


def make_judge(cfg: Any) -> Judge:
    from ragrig.core.registry import resolve

    return resolve(JUDGES, cfg.method, "judge").from_config(cfg)
