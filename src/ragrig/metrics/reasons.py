"""Why the judge decided an answer: each claim's mark and the finding that decided it, read back
from a judgments row (the `claims` and `contradictions` JSON of ragrig.judge.step).

A claim is `supported`, `contradicted` (a finding says the context speaks against it: a negation
conflict, a number or name the context gives otherwise, the verifier's or the LLM claim judge's
`contradicted`) or `not_addressed` (unsupported without such a finding, or with a `fabricated`
one: its names or numbers are absent from a context that does not hold its words either).

The deciding claim of an unfaithful answer follows ragrig.judge.step.decide: the first finding of
a vetoed kind when the judge's `veto` is known, else the first finding whose kind names the
answer's failure mode; without a finding, the unsupported claim with the lowest P(support)
(fabrication) or the weakest claim (overgeneralisation: every claim has support, the answer-level
score is below the threshold). A `contradicted` finding confirmed by the verifier names the
window it read ("... against: <window>"), which is the evidence shown; other findings read none.
No pandas: the tracking layer reads these for the MLflow traces.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

SUPPORTED, CONTRADICTED, NOT_ADDRESSED = "supported", "contradicted", "not_addressed"
MARKS = (SUPPORTED, CONTRADICTED, NOT_ADDRESSED)
# the failure mode each finding kind names, as ragrig.judge.step.decide names it (a unit test
# holds the two equal: the judge package sits above this one and cannot be imported here)
MODE_OF_KIND = {
    "negation": "contradiction",
    "number": "wrong_number",
    "entity": "wrong_entity",
    "fabricated": "fabrication",
    "contradicted": "contradiction",
}
# a fabricated finding says the context does not hold the claim at all: not addressed
_NOT_AGAINST = frozenset({"fabricated"})
_AGAINST = " against: "
NO_EVIDENCE = "no evidence sentence found"


@dataclass(frozen=True)
class Finding:
    """One hard check's finding on a claim: its kind and detail as the judge wrote them."""

    claim: str
    kind: str
    detail: str

    @property
    def evidence(self) -> str | None:
        """The window the verifier read for it, None when the finding names none."""
        _, sep, window = self.detail.partition(_AGAINST)
        return (window.strip() or None) if sep else None

    @property
    def reading(self) -> str:
        """What the finding says, without its evidence window."""
        head = self.detail.partition(_AGAINST)[0].strip()
        if self.kind == "number":
            return f"number finding: {head} is in no passage"
        if self.kind == "entity":
            return f"entity finding: {head} is in no passage"
        if self.kind == "fabricated":
            return f"fabricated finding: {head} is in no passage, nor are the claim's words"
        if self.kind == "contradicted":  # its detail says who read it, bar the verifier's own
            return f"the verifier: {head}" if head.startswith("P(") else head
        return f"{self.kind} finding: {head}" if head else f"{self.kind} finding"


@dataclass(frozen=True)
class ClaimMark:
    claim: str
    mark: str  # one of MARKS
    p_supported: float | None  # the judge's support probability, where it gives one
    findings: tuple[Finding, ...] = ()


@dataclass(frozen=True)
class Reason:
    """Why an answer was judged unfaithful: its failure mode, the deciding claim (None when no
    single claim decided it) with its mark and P(support), and the finding that decided it."""

    failure_mode: str
    claim: str | None = None
    mark: str | None = None
    p_supported: float | None = None
    finding: Finding | None = None

    @property
    def evidence(self) -> str | None:
        return self.finding.evidence if self.finding is not None else None

    def text(self) -> str:
        """One paragraph naming all of it (the MLflow feedback's rationale)."""
        out = f"unfaithful ({self.failure_mode})"
        if self.claim is None:
            if self.failure_mode == "overgeneralisation":
                return (
                    f"{out}: every claim has support, but the answer-level score is below the "
                    f"decision threshold; {NO_EVIDENCE}"
                )
            return f"{out}: no deciding claim recorded; {NO_EVIDENCE}"
        what = [verdict_words(self.mark or "")]
        if self.p_supported is not None:
            what.append(f"P(support) {self.p_supported:.3f}")
        if self.finding is not None:
            what.append(self.finding.reading)
        lead = "weakest claim" if self.failure_mode == "overgeneralisation" else "deciding claim"
        ev = self.evidence
        read = f'evidence read: "{ev}"' if ev else NO_EVIDENCE
        return f'{out}: {lead} "{self.claim}" ({"; ".join(what)}); {read}'

    def metadata(self) -> dict[str, str]:
        """The same as strings (MLflow feedback metadata holds str values only)."""
        return {
            "failure_mode": self.failure_mode,
            "deciding_claim": self.claim or "",
            "verdict": self.mark or "",
            "p_supported": "" if self.p_supported is None else f"{self.p_supported:.4f}",
            "finding": self.finding.reading if self.finding is not None else "",
            "evidence": self.evidence or "",
        }


def verdict_words(mark: str) -> str:
    return mark.replace("_", " ")


def _records(value: Any) -> list[Mapping[str, Any]]:
    if value is None or (isinstance(value, float) and value != value):
        return []
    return json.loads(value) if isinstance(value, str) else list(value)


def findings_of(contradictions: Any) -> list[Finding]:
    """The findings of a `contradictions` cell (JSON text or its records), in the judge's order."""
    return [
        Finding(str(r["claim"]), str(r["kind"]), str(r.get("detail", "")))
        for r in _records(contradictions)
    ]


def claim_marks(claims: Any, contradictions: Any) -> list[ClaimMark]:
    """Each claim of a `claims` cell, in order, marked by its support and findings."""
    found = findings_of(contradictions)
    out = []
    for r in _records(claims):
        claim = str(r["claim"])
        own = tuple(f for f in found if f.claim == claim)
        p = r.get("p_supported")
        if r.get("supported"):
            mark = SUPPORTED
        elif any(f.kind not in _NOT_AGAINST for f in own):
            mark = CONTRADICTED
        else:
            mark = NOT_ADDRESSED
        out.append(ClaimMark(claim, mark, None if p is None else float(p), own))
    return out


def _lowest(marks: Iterable[ClaimMark]) -> ClaimMark | None:
    """The claim with the lowest P(support) (the first on a tie, or without probabilities)."""
    marks = list(marks)
    if not marks:
        return None
    return min(
        enumerate(marks), key=lambda im: (im[1].p_supported is None, im[1].p_supported or 0, im[0])
    )[1]


def deciding(
    claims: Any,
    contradictions: Any,
    failure_mode: str,
    veto: Collection[str] | None = None,
) -> Reason | None:
    """The reason of an answer judged unfaithful with `failure_mode` (None for any other
    answer); `veto` the judge's vetoed kinds, when known (module doc)."""
    if not failure_mode:
        return None
    marks = claim_marks(claims, contradictions)
    by_claim = {m.claim: m for m in marks}
    found = findings_of(contradictions)
    pick = None
    if veto is not None:
        pick = next((f for f in found if f.kind in veto), None)
    if pick is None or MODE_OF_KIND.get(pick.kind, "contradiction") != failure_mode:
        pick = next(
            (f for f in found if MODE_OF_KIND.get(f.kind, "contradiction") == failure_mode), None
        )
    if pick is not None:
        m = by_claim.get(pick.claim)
        return Reason(
            failure_mode,
            pick.claim,
            m.mark if m else CONTRADICTED,
            m.p_supported if m else None,
            pick,
        )
    if failure_mode == "overgeneralisation":
        weakest = _lowest(m for m in marks if m.p_supported is not None)
        if weakest is None:
            return Reason(failure_mode)
        return Reason(failure_mode, weakest.claim, weakest.mark, weakest.p_supported)
    weakest = _lowest(m for m in marks if m.mark != SUPPORTED) or _lowest(marks)
    if weakest is None:
        return Reason(failure_mode)
    return Reason(failure_mode, weakest.claim, weakest.mark, weakest.p_supported)


def rationale(
    judged_faithful: bool | None, reason: Reason | None, n_claims: int = 0, n_supported: int = 0
) -> str:
    """The judge's rationale of one answer: the reason of an unfaithful one, the supported share
    of a faithful one, "" when undecided."""
    if judged_faithful is None:
        return ""
    if judged_faithful:
        return f"faithful: {n_supported} of {n_claims} claims supported" if n_claims else "faithful"
    return reason.text() if reason is not None else "unfaithful"
