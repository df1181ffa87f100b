"""judge: score answers against their context; answers with no checkable claim are counted apart."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Protocol

import pandas as pd


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

    def __post_init__(self) -> None:
        from ragrig.judge.refusal import ANSWER_KINDS, REFUSAL

        if self.kind not in ANSWER_KINDS:
            raise InvalidVerdict(f"unknown answer kind {self.kind!r}; expected {ANSWER_KINDS}")
        if self.kind == REFUSAL and self.extracted:
            raise InvalidVerdict("a refusal has no claims; claims make it a partial_refusal")
        blank = [c for c in self.extracted + self.supported + self.unsupported if not c.strip()]
        if blank:
            raise InvalidVerdict(f"blank claim(s): {blank!r}")
        if len(set(self.extracted)) != len(self.extracted):
            raise InvalidVerdict("duplicate extracted claims")
        overlap = set(self.supported) & set(self.unsupported)
        if overlap:
            raise InvalidVerdict(f"claims both supported and unsupported: {sorted(overlap)}")
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
        """Answer-level continuous score: the mean claim score when the judge gives claim
        scores, else `score`; None when there are no claims."""
        if not self.extracted or self.claim_scores is None:
            return self.score
        return sum(self.claim_scores) / len(self.claim_scores)


class Judge(Protocol):
    def judge(
        self, question: str, answer: str, contexts: list[str], reference: str | None = None
    ) -> Verdict: ...


JUDGES = {
    "overlap": "ragrig.judge.overlap:OverlapJudge",
    "verifier": "ragrig.judge.verifier:VerifierJudge",
}


def make_judge(cfg: Any) -> Judge:
    from ragrig.registry import resolve

    return resolve(JUDGES, cfg.method, "judge").from_config(cfg)


@dataclass
class _Row:
    qid: str
    status: str
    n_claims: int = 0
    n_supported: int = 0
    faithfulness: float | None = None
    claims: str = "[]"
    latency_ms: float = 0.0
    error: str = ""
    answer_kind: str = ""
    entity_overlap: float | None = None


def judge_all(
    judge: Judge,
    generations: pd.DataFrame,
    queries: dict[str, str],
    progress: bool = True,
) -> pd.DataFrame:
    """One judgment per generation, against the exact passages the generator saw.

    Generation errors are 'skipped'; a judge failure is 'error' (any exception, a timeout
    included, named in `error`) or 'invalid' (a verdict breaking the partition rule); all are
    counted by the report."""
    from tqdm import tqdm

    rows = []
    for g in tqdm(
        generations.itertuples(index=False),
        total=len(generations),
        desc="judge",
        disable=not progress,
    ):
        if g.status == "error":
            rows.append(_Row(g.qid, "skipped", error="generation failed"))
            continue
        contexts = json.loads(g.contexts)
        t0 = time.perf_counter()
        try:
            verdict = judge.judge(queries[g.qid], g.answer, contexts)
        except InvalidVerdict as exc:
            rows.append(
                _Row(g.qid, "invalid", error=str(exc), latency_ms=(time.perf_counter() - t0) * 1e3)
            )
            continue
        except Exception as exc:  # counted as status=error, never dropped
            rows.append(
                _Row(
                    g.qid,
                    "error",
                    error=f"{type(exc).__name__}: {exc}",
                    latency_ms=(time.perf_counter() - t0) * 1e3,
                )
            )
            continue
        claims = [{"claim": c, "supported": c in set(verdict.supported)} for c in verdict.extracted]
        for claim, p in zip(claims, verdict.claim_scores or (), strict=False):
            claim["p_supported"] = round(p, 4)
        rows.append(
            _Row(
                g.qid,
                verdict.outcome,
                n_claims=len(verdict.extracted),
                n_supported=len(verdict.supported),
                faithfulness=verdict.score,
                claims=json.dumps(claims),
                latency_ms=(time.perf_counter() - t0) * 1e3,
                error=verdict.reason,
                answer_kind=verdict.kind,
                entity_overlap=verdict.entity_overlap,
            )
        )
    cols = [
        "qid",
        "status",
        "n_claims",
        "n_supported",
        "faithfulness",
        "claims",
        "latency_ms",
        "error",
        "answer_kind",
        "entity_overlap",
    ]
    df = pd.DataFrame([{c: getattr(r, c) for c in cols} for r in rows], columns=cols)
    df["faithfulness"] = df["faithfulness"].astype("float64")
    df["entity_overlap"] = df["entity_overlap"].astype("float64")
    return df
