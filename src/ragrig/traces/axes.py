"""Relevance and correctness of judged interactions, computed as the scorecard computes them
offline (ragrig.report.scorecard), from what a log line holds.

* relevance: the scorecard's parts, weighted by report.scorecard.relevance_weights and
  renormalised over the parts a line has: `semantic` (the best cosine of the question's and a
  context's vectors under the embed section's model, mapped by report.scorecard.similarity_range),
  `keyword` (the question's content words found in the contexts) and `context` (ranked context
  precision and recall against the line's `gold` documents, when its contexts carry ids). The
  LLM judge's rating is not a part: `ragrig traces` makes no paid call.
* correctness: the reference-free surrogates, weighted by
  report.scorecard.correctness_surrogate_weights: `self_consistency` (the answer and the line's
  `samples` clustered by mutual entailment under the verifier, ragrig.judge.consistency; only
  when the line holds samples), `coverage` (the share of the question's parts the answer
  addresses; a refusal addresses none) and `clarity` (sentence length, repetition,
  readability). External consistency needs a corpus to retrieve from, which a log does not
  carry: it is never a part here, and each window says so.

User feedback is not correctness: it is a signal beside the axes (ragrig.traces.signals).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragrig.traces.read import Interaction

# what each axis may read here, in the order a window names them
RELEVANCE_PARTS = ("semantic", "keyword", "context")
CORRECTNESS_PARTS = ("self_consistency", "coverage", "clarity")
NOT_ONLINE = {
    "relevance": "llm (no paid call)",
    "correctness": "external_consistency (no corpus in a log)",
}


@dataclass(frozen=True)
class Scored:
    """One interaction's relevance and correctness with the parts each read."""

    relevance: float | None
    relevance_parts: dict[str, float]
    correctness: float | None
    correctness_parts: dict[str, float]


class OnlineAxes:
    """What scores relevance and correctness of a batch (module doc)."""

    def __init__(
        self,
        relevance_weights: dict[str, float],
        correctness_weights: dict[str, float],
        similarity: tuple[float, float],
        embedders: tuple[Any, Any] | None = None,
        readings: Any = None,
        threshold: float = 0.5,
    ):
        self.relevance_weights = relevance_weights
        self.correctness_weights = correctness_weights
        self.similarity = similarity
        self.embedders = embedders  # (questions, passages): one model, two prefixes
        self.readings = readings  # the verifier's (claim, evidence) readings, for samples
        self.threshold = threshold
        self.passages = PassageVectors()

    @classmethod
    def from_params(
        cls,
        params: Path,
        semantic: bool = True,
        runtime: str = "torch",
        embed_batch_size: int | None = None,
    ) -> OnlineAxes:
        """The report's weights and similarity range, the embed section's model (loaded on
        first use) when `semantic`, the judge's consistency settings (or their defaults);
        `runtime="onnx"`: both models through onnxruntime (conf/traces.yaml `runtime`);
        `embed_batch_size`: texts per embedder call (None: the embed section's)."""
        from ragrig.core.config import load_section
        from ragrig.judge.config import ConsistencyConfig, onnx_verifiers
        from ragrig.judge.confirm import LazyVerifier

        rcfg = load_section("report", params).scorecard
        jcfg = load_section("judge", params)
        ccfg = getattr(jcfg, "consistency", None) or ConsistencyConfig()
        if runtime == "onnx":
            ccfg = onnx_verifiers(ccfg)
        sim = rcfg.similarity_range
        return cls(
            {k: float(v) for k, v in rcfg.relevance_weights.items()},
            {k: float(v) for k, v in rcfg.correctness_surrogate_weights.items()},
            (sim.irrelevant, sim.relevant),
            _LazyEmbedders(params, runtime, embed_batch_size) if semantic else None,
            LazyVerifier(ccfg).readings,
            ccfg.threshold,
        )

    def score(self, batch: Sequence[Interaction], refusals: Sequence[bool]) -> list[Scored]:
        """Each interaction's axes; `refusals`: the judge found the answer a refusal."""
        from ragrig.metrics import correctness as corr
        from ragrig.metrics.scorecard import combine

        semantic = self._semantic(batch)
        consistency = self._consistency(batch)
        out = []
        for x, refused, sem, sc in zip(batch, refusals, semantic, consistency, strict=True):
            rel: dict[str, float | None] = {
                "semantic": sem,
                "keyword": _keyword(x.question, x.contexts),
                "context": _context(x),
            }
            coverage = 0.0 if refused else corr.coverage_by_parts(x.question, x.answer)
            cor: dict[str, float | None] = {
                "self_consistency": sc,
                "coverage": coverage,
                "clarity": corr.clarity(x.answer),
            }
            r, r_used = combine(rel, self.relevance_weights)
            c, c_used = combine(cor, self.correctness_weights)
            out.append(
                Scored(
                    r,
                    {k: float(rel[k]) for k in r_used},  # type: ignore[arg-type]
                    c,
                    {k: float(cor[k]) for k in c_used},  # type: ignore[arg-type]
                )
            )
        return out

    def _semantic(self, batch: Sequence[Interaction]) -> list[float | None]:
        from ragrig.metrics.relevance import map_similarity

        if self.embedders is None or self.relevance_weights.get("semantic", 0) <= 0:
            return [None] * len(batch)
        questions, passages = self.embedders.pair()
        qv = _unit(np.asarray(questions.encode([x.question for x in batch]), dtype=np.float64))
        pv = self.passages.vectors(passages, [c for x in batch for c in x.contexts])
        out: list[float | None] = []
        start = 0
        lo, hi = self.similarity
        for i, x in enumerate(batch):
            n = len(x.contexts)
            if n == 0:  # nothing retrieved: the scorecard's empty-context convention
                out.append(0.0)
                continue
            best = float((pv[start : start + n] @ qv[i]).max())
            out.append(map_similarity(best, lo, hi))
            start += n
        return out

    def _consistency(self, batch: Sequence[Interaction]) -> list[float | None]:
        from ragrig.judge.consistency import consistency_all

        if self.readings is None or self.correctness_weights.get("self_consistency", 0) <= 0:
            return [None] * len(batch)
        which = [i for i, x in enumerate(batch) if x.samples and x.answer.strip()]
        out: list[float | None] = [None] * len(batch)
        if which:
            items = [(batch[i].answer, list(batch[i].samples)) for i in which]
            for i, c in zip(
                which, consistency_all(items, self.readings, self.threshold), strict=True
            ):
                out[i] = c.agreement
        return out


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


class PassageVectors:
    """Unit vectors of passages by their text, the least recently used dropped past `size`:
    services retrieve the same passages again and again, and a passage embeds to the same
    vector every time, so each distinct text is embedded once while it stays in the cache."""

    def __init__(self, size: int = 20000):
        from collections import OrderedDict

        self.size = size
        self.cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self.hits = self.misses = 0

    @staticmethod
    def _key(text: str) -> bytes:
        import hashlib

        return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()

    def vectors(self, embedder: Any, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 1))
        keys = [self._key(t) for t in texts]
        missing: dict[bytes, str] = {}
        for k, t in zip(keys, texts, strict=True):
            if k in self.cache:
                self.cache.move_to_end(k)
            elif k not in missing:
                missing[k] = t
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        got = {}
        if missing:
            new = _unit(np.asarray(embedder.encode(list(missing.values())), dtype=np.float64))
            # kept as float32, and read as kept: a cached text scores as a fresh one
            got = dict(zip(missing, new.astype(np.float32), strict=True))
        rows = [got[k] if k in got else self.cache[k] for k in keys]
        self.cache.update(got)
        while len(self.cache) > self.size:
            self.cache.popitem(last=False)
        return np.asarray(rows, dtype=np.float64)


class _LazyEmbedders:
    """The embed section's model for questions and passages, loaded on the first batch."""

    def __init__(self, params: Path, runtime: str = "torch", batch_size: int | None = None):
        self.params = params
        self.runtime = runtime
        self.batch_size = batch_size
        self._pair: tuple[Any, Any] | None = None

    def pair(self) -> tuple[Any, Any]:
        if self._pair is None:
            from ragrig.traces.embedder import embed_section, section_embedder

            cfg = embed_section(self.params, self.batch_size)
            passages = section_embedder(cfg, "passage", self.runtime)
            self._pair = passages.with_prefix(cfg.query_prefix), passages
        return self._pair


def _keyword(question: str, contexts: list[str]) -> float | None:
    from ragrig.core.text import tokenize
    from ragrig.metrics.relevance import keyword_overlap

    q = tokenize([question])[0]
    if not contexts:
        return 0.0 if q else None
    return keyword_overlap(q, [t for toks in tokenize(contexts) for t in toks])


def _context(x: Interaction) -> float | None:
    """The scorecard's context part: (ranked precision + recall) / 2 against the reviewed gold
    documents, when the contexts carry ids; None otherwise."""
    from ragrig.metrics import relevance as rel

    if not x.gold or x.context_ids is None:
        return None
    docs = list(x.context_ids)
    ranked = rel.context_precision_ranked(docs, set(x.gold))
    recall = rel.context_recall(docs, set(x.gold))
    return ((ranked or 0.0) + (recall or 0.0)) / 2
