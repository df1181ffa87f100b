"""Faithfulness read by an LLM claim by claim (`judge=llm_claims`): claims extracted as for the
overlap judge, then one schema-constrained verdict per claim against the numbered passages.

Claims come from `OverlapJudge.claim_set` (its segmenter, refusals, short answers checked with
their question). Each claim is one call of the LLM judge's machinery (ragrig.judge.llm:
OpenAI-compatible endpoint or the packaged GGUF in process, cached by content hash, retried,
timed out and counted), whose reply must be `{"verdict": "supported" | "contradicted" |
"not_addressed"}`. A claim is supported when the model says so and no lexical hard check
contradicts it (a number or name absent from the passages, `entity_check`; ragrig.judge.overlap);
a `contradicted` verdict is a hard finding of kind `contradicted`, like the lexical ones, so the
answer's decision (ragrig.judge.decide) rejects it when `contradicted` is in `judge.veto`. The
claim scores are 1 (supported) or 0; the soft score is their mean.

A claim whose call fails (timeout, error, a reply breaking the schema) fails the whole answer:
the judge stage counts it as `error` with the claim and the call's status named, never as a
verdict.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ragrig.judge import entities as ent
from ragrig.judge.base import Verdict, unclaimed
from ragrig.judge.overlap import OverlapJudge
from ragrig.judge.refusal import answer_kind

SUPPORTED, CONTRADICTED, NOT_ADDRESSED = "supported", "contradicted", "not_addressed"
CLAIM_VERDICTS = (SUPPORTED, CONTRADICTED, NOT_ADDRESSED)
CLAIM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": list(CLAIM_VERDICTS)}},
    "required": ["verdict"],
    "additionalProperties": False,
}
CLAIM_SYSTEM = (
    "You check one statement against numbered context passages. Reply with one JSON object "
    "and nothing else."
)
CLAIM_TEMPLATE = """Context passages:
{passages}

Statement: {claim}

Does the context support the statement, contradict it, or not address it? Reply with
{{"verdict": "supported"}} when the passages state it, {{"verdict": "contradicted"}} when they
state something incompatible with it, {{"verdict": "not_addressed"}} otherwise."""


class ClaimVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    verdict: Literal["supported", "contradicted", "not_addressed"]


def claim_messages(claim: str, contexts: list[str]) -> list[dict[str, str]]:
    from ragrig.generate.prompt import format_passages

    user = CLAIM_TEMPLATE.format(
        passages=format_passages(contexts) if contexts else "(none)", claim=claim
    )
    return [{"role": "system", "content": CLAIM_SYSTEM}, {"role": "user", "content": user}]


def parse_claim_verdict(content: str) -> tuple[ClaimVerdict, int]:
    text = content.strip()
    if text.startswith("```") and text.endswith("```"):
        text = text[3:-3].removeprefix("json").strip()
    return ClaimVerdict.model_validate(json.loads(text)), 0


class ClaimCallFailed(RuntimeError):
    """A claim's call did not give a verdict: the answer is counted as a judge error."""


class LLMClaimJudge:
    def __init__(self, llm: Any, claims: OverlapJudge, entity_check: bool = True):
        self.llm = llm  # ragrig.judge.llm.LLMJudge
        self.claims = claims
        self.entity_check = entity_check
        self.calls = {s: 0 for s in ("ok", "cached", "failed")}

    @classmethod
    def from_config(cls, cfg: Any) -> LLMClaimJudge:
        from ragrig.judge.llm import make_llm_judge

        claims = OverlapJudge(min_content_words=cfg.min_content_words, entity_check=False)
        return cls(make_llm_judge(cfg.verifier), claims, cfg.entity_check)

    def claim_verdict(self, claim: str, contexts: list[str]) -> str:
        r = self.llm.exchange(
            claim_messages(claim, contexts), CLAIM_SCHEMA, "claim_verdict", parse_claim_verdict
        )
        if r.status != "ok":
            self.calls["failed"] += 1
            raise ClaimCallFailed(f"claim {claim[:80]!r}: LLM call {r.status}: {r.error}")
        self.calls["cached" if r.cached else "ok"] += 1
        return r.verdict.verdict

    def judge(
        self, question: str, answer: str, contexts: list[str], reference: str | None = None
    ) -> Verdict:
        cs = self.claims.claim_set(question, answer)
        kind = answer_kind(len(cs.claims), cs.declined)
        if not cs.claims:
            return unclaimed(answer, kind)
        verdicts = {c: self.claim_verdict(cs.surface[c], contexts) for c in cs.claims}
        hard = list(self.claims.contradictions(cs, contexts, self.entity_check))
        hard += [
            (c, CONTRADICTED, "the LLM judge: the context contradicts it")
            for c in cs.claims
            if verdicts[c] == CONTRADICTED
        ]
        rejected = {c for c, _, _ in hard}
        sup = [c for c in cs.claims if verdicts[c] == SUPPORTED and c not in rejected]
        uns = [c for c in cs.claims if c not in sup]
        found = ent.check(" ".join(cs.surface[c] + "." for c in cs.claims), contexts)
        return Verdict(
            cs.claims,
            sup,
            uns,
            kind=kind,
            entity_overlap=found.overlap,
            unseen_entities=found.unseen_names + found.unseen_numbers,
            claim_scores=[1.0 if c in sup else 0.0 for c in cs.claims],
            contradictions=tuple(hard),
        )
