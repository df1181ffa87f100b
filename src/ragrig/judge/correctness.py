"""Correctness against a reference answer, claim by claim, read by the claim verifier.

Answer and reference are split into claims exactly as the judge splits answers
(`OverlapJudge.claim_set`); a nugget reference (ragrig.metrics.correctness.parse_reference) has
one claim per nugget. Each answer claim is read against the reference's sentence windows and
each reference claim against the answer's, by the verifier (`Verifier.readings`), with the
windows the judge uses (ragrig.judge.windows: `claim_pairs`, `best_per_claim`):

* an answer claim is *supported* when its max P(support) >= `support_threshold` and no lexical
  hard check against the reference fires (OverlapJudge.contradictions: the reference holds the
  claim's words but negates them, or gives another number or name); precision is the supported
  share of the answer's claims;
* an unsupported answer claim is *contradicted* when its max P(contradict) >=
  `contradict_threshold` or such a hard check fires: an error, counted apart
  (`contradictions`);
* a reference claim is *covered* when the answer supports it the same way; recall is the
  covered share, `vital_recall` the covered share of the vital nuggets.

Beside the thresholded shares, a continuous reading: `soft_precision` is the mean over answer
claims of their max P(support), 0 for a claim a hard check contradicts; `soft_recall` the mean
over reference claims of the max P(support) the answer gives them (a contradiction is
precision's error, not counted twice); `soft_f1` their harmonic mean. A paraphrase the verifier
reads at P(support) 0.4 counts 0.4, not 0: the ranking of answers follows people's completeness
ratings more closely than the shares do (docs/benchmarks.md §24).

Refusals (ragrig.judge.refusal) are read by agreement, not claims: when the answer or the
reference declines altogether (status `refusal`), `claim_score` is 1.0 when both decline, 0.5 when
the other declines in part, 0.0 when the other answers. `claim_score` is what the correctness axis
reads: `soft_f1` for a scored answer, the refusal agreement for a refusal.

The failure mode of an answer, first that applies: the kind of its first contradicted claim
(`wrong_number`, `wrong_entity`, `negation`; for a claim only the verifier contradicts, its
first number or name absent from the reference, else `contradiction`),
else `missing_information` (a vital nugget not covered, or without nuggets a recall below
MISSING_RECALL), else none (""); a refusal pair whose other side does not decline altogether is
`refusal_mismatch`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from ragrig.core.schemas import CLAIM_FAILURE_MODES, GENERATION_FAILED
from ragrig.judge.overlap import ENTITY, FABRICATED, NEGATION, NUMBER, ClaimSet, OverlapJudge
from ragrig.judge.refusal import PARTIAL_REFUSAL, REFUSAL, answer_kind
from ragrig.judge.windows import best_per_claim, claim_pairs
from ragrig.metrics.correctness import Nugget, f1, parse_reference, reference_problem

SCORED, REFUSAL_PAIR, NO_CLAIMS, REFERENCE_NO_CLAIMS, SKIPPED = (
    "scored",
    "refusal",
    "no_claims",
    "reference_no_claims",
    "skipped",
)
FAILURE_MODES = CLAIM_FAILURE_MODES
_MODE_OF_KIND = {NUMBER: "wrong_number", ENTITY: "wrong_entity", NEGATION: "negation"}
# Without nuggets, an answer covering less than half of the reference's claims misses required
# information; with nuggets, any vital nugget missing does.
MISSING_RECALL = 0.5
# agreement when the answer or the reference declines altogether, by the other side's kind
REFUSAL_AGREEMENT = {REFUSAL: 1.0, PARTIAL_REFUSAL: 0.5}


@dataclass(frozen=True)
class ClaimCorrectness:
    """One answer read against its reference (status `scored`), or why it was not."""

    status: str
    answer_claims: int = 0
    reference_claims: int = 0
    supported: int = 0
    covered: int = 0
    contradictions: int = 0
    claim_precision: float | None = None
    claim_recall: float | None = None
    claim_f1: float | None = None
    vital_nuggets: int = 0
    vital_recall: float | None = None
    soft_precision: float | None = None
    soft_recall: float | None = None
    soft_f1: float | None = None
    answer_kind: str = ""
    reference_kind: str = ""
    claim_score: float | None = None
    failure_mode: str = ""
    claims: str = "[]"


def _nugget_claims(nuggets: list[Nugget], judge: OverlapJudge) -> ClaimSet:
    out = ClaimSet()
    for n in nuggets:
        words = judge._words(n.text)
        if words and n.text not in out.words:
            out.claims.append(n.text)
            out.words[n.text] = words
            out.surface[n.text] = n.text
    return out


class ReferenceCorrectness:
    """Claim-level precision, recall and F1 of answers against reference answers."""

    def __init__(
        self,
        verifier: Any,
        support_threshold: float = 0.5,
        contradict_threshold: float = 0.5,
        window: int = 2,
        windows_per_claim: int = 2,
        min_content_words: int = 2,
    ):
        self.verifier = verifier
        self.threshold = support_threshold
        self.contradict_threshold = contradict_threshold
        self.window = window
        self.k = windows_per_claim
        self.claims = OverlapJudge(min_content_words=min_content_words, window=window)

    @classmethod
    def from_config(cls, cfg: Any, verifier: Any) -> ReferenceCorrectness:
        return cls(
            verifier,
            cfg.support_threshold,
            cfg.contradict_threshold,
            cfg.window,
            cfg.windows_per_claim,
            cfg.min_content_words,
        )

    def _prepare(self, question: str, answer: str, cell: Any) -> dict[str, Any]:
        text, nuggets = parse_reference(cell)
        problem = reference_problem(answer, text)
        if problem is not None:
            return {"status": problem}
        a = self.claims.claim_set(question, answer)
        r = (
            _nugget_claims(nuggets, self.claims)
            if nuggets
            else self.claims.claim_set(question, text)
        )
        kinds = {
            "answer_kind": answer_kind(len(a.claims), a.declined),
            "reference_kind": answer_kind(len(r.claims), r.declined),
        }
        if REFUSAL in kinds.values():
            other = kinds["reference_kind" if kinds["answer_kind"] == REFUSAL else "answer_kind"]
            return {
                "status": REFUSAL_PAIR,
                **kinds,
                "claim_score": REFUSAL_AGREEMENT.get(other, 0.0),
                "failure_mode": "" if other == REFUSAL else "refusal_mismatch",
            }
        if not a.claims:
            return {"status": NO_CLAIMS, **kinds}
        if not r.claims:
            return {"status": REFERENCE_NO_CLAIMS, **kinds}
        vital = {n.text for n in nuggets or () if n.vital}
        p_pairs, p_owner = claim_pairs(a.claims, a.words, [text], self.window, self.k)
        r_pairs, r_owner = claim_pairs(r.claims, r.words, [answer], self.window, self.k)
        return {
            "status": SCORED,
            "a": a,
            "r": r,
            "text": text,
            "answer": answer,
            "vital": vital,
            "nuggets": bool(nuggets),
            "p": (p_pairs, p_owner),
            "r_pairs": (r_pairs, r_owner),
            **kinds,
        }

    def score_all(self, items: list[tuple[str, str, Any]]) -> list[ClaimCorrectness]:
        """One reading per (question, answer, reference cell); every pair of every answer read
        by the verifier in one run (length-sorted batches)."""
        prepared = [self._prepare(*item) for item in items]
        pairs = list(
            dict.fromkeys(
                pair
                for p in prepared
                if p["status"] == SCORED
                for pair in (*p["p"][0], *p["r_pairs"][0])
            )
        )
        read = dict(zip(pairs, self.verifier.readings(pairs), strict=True)) if pairs else {}
        return [self._finish(p, read) if p["status"] == SCORED else _unscored(p) for p in prepared]

    def score(self, question: str, answer: str, cell: Any) -> ClaimCorrectness:
        return self.score_all([(question, answer, cell)])[0]

    def _finish(self, p: dict[str, Any], read: dict) -> ClaimCorrectness:
        a, r = p["a"], p["r"]
        a_read = best_per_claim(len(a.claims), *p["p"], read)
        r_read = best_per_claim(len(r.claims), *p["r_pairs"], read)
        a_findings = self.claims.contradictions(a, [p["text"]])
        a_kind, a_absent = _first_kind(a_findings), _absent_kind(a_findings)
        r_kind = _first_kind(self.claims.contradictions(r, [p["answer"]]))
        details: dict[str, list] = {"answer": [], "reference": []}
        supported = contradicted = 0
        soft_p = soft_r = 0.0
        mode = ""
        for c, (ps, pc, _, _) in zip(a.claims, a_read, strict=True):
            kind = a_kind.get(c)
            ok = ps >= self.threshold and kind is None
            bad = not ok and (pc >= self.contradict_threshold or kind is not None)
            supported += ok
            contradicted += bad
            soft_p += 0.0 if kind is not None else ps
            if bad and not mode:
                mode = _MODE_OF_KIND.get(kind or a_absent.get(c), "contradiction")
            details["answer"].append(
                {
                    "claim": c,
                    "p_support": round(ps, 4),
                    "p_contradict": round(pc, 4),
                    "supported": ok,
                    "contradicted": bad,
                    **({"kind": kind} if kind else {}),
                }
            )
        covered = vital_covered = 0
        for c, (ps, _, _, _) in zip(r.claims, r_read, strict=True):
            ok = ps >= self.threshold and r_kind.get(c) is None
            covered += ok
            soft_r += ps
            vital_covered += ok and c in p["vital"]
            details["reference"].append(
                {
                    "claim": c,
                    "p_support": round(ps, 4),
                    "covered": ok,
                    **({"vital": c in p["vital"]} if p["nuggets"] else {}),
                }
            )
        precision = supported / len(a.claims)
        recall = covered / len(r.claims)
        soft_p, soft_r = soft_p / len(a.claims), soft_r / len(r.claims)
        soft = f1(soft_p, soft_r)
        n_vital = sum(1 for c in r.claims if c in p["vital"])
        vital_recall = vital_covered / n_vital if n_vital else None
        if not mode and (
            (vital_recall is not None and vital_recall < 1.0)
            or (not p["nuggets"] and recall < MISSING_RECALL)
        ):
            mode = "missing_information"
        return ClaimCorrectness(
            SCORED,
            len(a.claims),
            len(r.claims),
            supported,
            covered,
            contradicted,
            precision,
            recall,
            f1(precision, recall),
            n_vital,
            vital_recall,
            soft_p,
            soft_r,
            soft,
            p["answer_kind"],
            p["reference_kind"],
            soft,
            mode,
            json.dumps(details, ensure_ascii=False),
        )


def _first_kind(findings: tuple[tuple[str, str, str], ...]) -> dict[str, str]:
    """Each claim's first finding of a kind that says the reference states otherwise (a
    `fabricated` finding only says the reference does not hold the claim's words)."""
    out: dict[str, str] = {}
    for c, kind, _ in findings:
        if kind in _MODE_OF_KIND:
            out.setdefault(c, kind)
    return out


def _absent_kind(findings: tuple[tuple[str, str, str], ...]) -> dict[str, str]:
    """Each claim's first number or name absent from the reference, whatever else the
    reference holds: what a claim the verifier contradicts got wrong."""
    from ragrig.judge.entities import numbers

    out: dict[str, str] = {}
    for c, kind, detail in findings:
        if kind in (NUMBER, ENTITY, FABRICATED):
            out.setdefault(c, NUMBER if numbers(detail) else ENTITY)
    return out


def _unscored(p: dict[str, Any]) -> ClaimCorrectness:
    """A refusal pair keeps its agreement `claim_score`; the rest, their status and kinds alone."""
    return ClaimCorrectness(
        p["status"],
        answer_kind=p.get("answer_kind", ""),
        reference_kind=p.get("reference_kind", ""),
        claim_score=p.get("claim_score"),
        failure_mode=p.get("failure_mode", ""),
    )


COLUMNS = ["qid", "reference_column", *ClaimCorrectness.__dataclass_fields__]
FLOAT_COLUMNS = [
    "claim_precision",
    "claim_recall",
    "claim_f1",
    "vital_recall",
    "soft_precision",
    "soft_recall",
    "soft_f1",
    "claim_score",
]
INT_COLUMNS = ["answer_claims", "reference_claims", "supported", "covered", "contradictions"]


def correctness_all(
    scorer: ReferenceCorrectness,
    generations: pd.DataFrame,
    queries: pd.DataFrame,
    reference_column: str,
) -> pd.DataFrame:
    """The `correctness` table: one row per generation, its claim-level reading against the
    query's reference (`reference_column` of `queries`); a failed generation is `skipped`."""
    text = dict(zip(queries["qid"], queries["text"], strict=True))
    cells = dict(zip(queries["qid"], queries[reference_column], strict=True))
    todo = [
        (g.qid, (text[g.qid], g.answer, cells.get(g.qid)))
        for g in generations.itertuples(index=False)
        if g.status not in GENERATION_FAILED
    ]
    read = dict(zip([q for q, _ in todo], scorer.score_all([i for _, i in todo]), strict=True))
    rows = [
        {
            "qid": q,
            "reference_column": reference_column,
            **asdict(read.get(q, ClaimCorrectness(SKIPPED))),
        }
        for q in generations["qid"]
    ]
    df = pd.DataFrame(rows, columns=COLUMNS)
    for col in FLOAT_COLUMNS:
        df[col] = df[col].astype("float64")
    for col in INT_COLUMNS + ["vital_nuggets"]:
        df[col] = df[col].astype("int64")
    return df


def correctness_record(table: pd.DataFrame) -> dict[str, Any]:
    """The judge manifest's `correctness`: answers per status and per failure mode."""
    scored = table[table["status"].isin([SCORED, REFUSAL_PAIR])]
    return {
        "reference_column": str(table["reference_column"].iloc[0]) if len(table) else None,
        "status": table["status"].value_counts().sort_index().to_dict(),
        "failure_modes": {m: int((scored["failure_mode"] == m).sum()) for m in FAILURE_MODES},
    }
