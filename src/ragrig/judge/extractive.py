"""Answer-level support: how much of an answer is drawn from its context, and a logistic model
over those measures whose weights are fitted on human ratings.

The measures (all in [0, 1], higher = more of the answer found in the context):

* `coverage_n` (n = 1..4): extractive fragment coverage (Grusky et al., 2018, "Newsroom"): the
  answer's words, lowercased, are matched greedily against the passages, each position taking
  the longest fragment shared with one passage; the share of answer words inside shared
  fragments of at least n words. Short fragments are common words; long ones are copied spans.
* `sentence_mean_n` / `sentence_min_n` (n = 2, 3): the same coverage per answer sentence (of at
  least 3 words), averaged, and of the least covered sentence: one invented sentence among
  copied ones shows in the minimum.
* `content_overlap`: the share of the answer's distinct content words (stemmed, stop words out)
  found anywhere in the passages; `content_bigrams`: the same for adjacent content-word pairs.

`AnswerModel` is P(faithful) = sigmoid(intercept + Σ coef·measure). Its weights are fitted by
`ragrig calibrate` on the calibration half of MTRAG's human ratings only (`fit_answer_model`
receives nothing else) and written into conf/judge/overlap.yaml (`answer_model`), so the judge's
answer score is a calibrated probability rather than a share of claims.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragrig.core.text import split_sentences, strip_citations, tokenize

FEATURES = (
    "coverage_1",
    "coverage_2",
    "coverage_3",
    "coverage_4",
    "sentence_mean_2",
    "sentence_mean_3",
    "sentence_min_2",
    "sentence_min_3",
    "content_overlap",
    "content_bigrams",
)
_WORD = re.compile(r"[a-z0-9]+")
_MIN_SENTENCE_WORDS = 3


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class _Passages:
    """The passages' words, indexed by word, for longest-fragment lookups."""

    def __init__(self, contexts: Sequence[str]):
        self.passages = [words(c) for c in contexts]
        self.index: dict[str, list[tuple[int, int]]] = {}
        for p, toks in enumerate(self.passages):
            for j, w in enumerate(toks):
                self.index.setdefault(w, []).append((p, j))

    def fragments(self, answer: list[str]) -> list[int]:
        """Lengths of the greedy shared fragments of `answer`, left to right: at each position
        the longest run of words equal to a run of one passage; unmatched words are skipped."""
        out, i = [], 0
        while i < len(answer):
            best = 0
            for p, j in self.index.get(answer[i], ()):
                toks, k = self.passages[p], 1
                while i + k < len(answer) and j + k < len(toks) and answer[i + k] == toks[j + k]:
                    k += 1
                best = max(best, k)
            if best:
                out.append(best)
                i += best
            else:
                i += 1
        return out

    def coverage(self, answer: list[str], n: int) -> float:
        frags = self.fragments(answer)
        return sum(f for f in frags if f >= n) / len(answer)


def features(answer: str, contexts: Sequence[str]) -> dict[str, float]:
    """The measures of FEATURES for one answer (citation markers removed) against its
    passages. An answer with no word covers nothing it could invent: every measure is 1.0."""
    text = strip_citations(answer)
    toks = words(text)
    if not toks:
        return dict.fromkeys(FEATURES, 1.0)
    ps = _Passages(contexts)
    out = {f"coverage_{n}": ps.coverage(toks, n) for n in (1, 2, 3, 4)}
    sentences = [w for s in split_sentences(text) if len(w := words(s)) >= _MIN_SENTENCE_WORDS]
    for n in (2, 3):
        per = [ps.coverage(s, n) for s in sentences]
        out[f"sentence_mean_{n}"] = sum(per) / len(per) if per else out[f"coverage_{n}"]
        out[f"sentence_min_{n}"] = min(per) if per else out[f"coverage_{n}"]
    a_content = tokenize([text])[0]
    c_content = [tokenize([c])[0] for c in contexts]
    a_set = set(a_content)
    c_set = set().union(*c_content) if c_content else set()
    out["content_overlap"] = len(a_set & c_set) / len(a_set) if a_set else 1.0
    a_bi = set(zip(a_content, a_content[1:], strict=False))
    c_bi = {b for c in c_content for b in zip(c, c[1:], strict=False)}
    out["content_bigrams"] = len(a_bi & c_bi) / len(a_bi) if a_bi else out["content_overlap"]
    return {k: out[k] for k in FEATURES}


@dataclass(frozen=True)
class AnswerModel:
    """P(faithful) = sigmoid(intercept + Σ coef[i] · measure[features[i]])."""

    features: tuple[str, ...]
    coef: tuple[float, ...]
    intercept: float

    def __post_init__(self) -> None:
        unknown = sorted(set(self.features) - set(FEATURES))
        if unknown:
            raise ValueError(f"unknown answer-model feature(s) {unknown}; known: {list(FEATURES)}")
        if len(self.coef) != len(self.features):
            raise ValueError(
                f"answer model: {len(self.coef)} coefficients for {len(self.features)} features"
            )
        if not all(math.isfinite(c) for c in (*self.coef, self.intercept)):
            raise ValueError("answer model: coefficients and intercept must be finite")

    @classmethod
    def from_config(cls, cfg: object) -> AnswerModel:
        return cls(tuple(cfg.features), tuple(cfg.coef), float(cfg.intercept))  # type: ignore[attr-defined]

    def as_config(self) -> dict:
        return {
            "features": list(self.features),
            "coef": [round(c, 6) for c in self.coef],
            "intercept": round(self.intercept, 6),
        }

    def probability(self, measures: dict[str, float]) -> float:
        z = self.intercept + sum(
            c * measures[f] for f, c in zip(self.features, self.coef, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))

    def score(self, answer: str, contexts: Sequence[str]) -> float:
        return self.probability(features(answer, contexts))


def fit_answer_model(
    rows: Sequence[dict[str, float]], labels: Sequence[int], c: float = 1.0
) -> AnswerModel:
    """A logistic regression (L2, strength 1/c, lbfgs: deterministic) of the human label on the
    measures, fitted on exactly these rows. Rounded to 6 decimals, as written into config."""
    from sklearn.linear_model import LogisticRegression

    if len(rows) != len(labels) or not rows:
        raise ValueError(f"answer model: {len(rows)} rows for {len(labels)} labels")
    if len(set(labels)) < 2:
        raise ValueError("answer model: the fitting rows need both faithful and unfaithful answers")
    x = [[r[f] for f in FEATURES] for r in rows]
    m = LogisticRegression(C=c, max_iter=5000).fit(x, list(labels))
    return AnswerModel(
        FEATURES, tuple(round(float(v), 6) for v in m.coef_[0]), round(float(m.intercept_[0]), 6)
    )
