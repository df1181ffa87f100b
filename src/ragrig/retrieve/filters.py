"""Metadata filters in retrieval: where documents' metadata and queries' predicates come from,
and how a plan of hard predicates and soft boosts is applied to one query's search.

* Documents' metadata: the corpus's own (`meta_<field>` columns of the parse stage's documents
  table; with parse=docling also each document's `file`, `format`, `section` and `page`); a
  field a document lacks, when `filters.assign` names it, is drawn by the doc id's hash
  from the configured values, so the experiment runs on a corpus with none.
* A query's predicate: its `metadata.filter` object (the parse stage's `filter` column); a
  configured preference it lacks is filled by that preference's rule (`gold`, `hash`) or left out
  (`query`).
* Eligibility (`filters.eligibility`) is the caller's hard invariant: applied before search to
  every query unless `enforce_eligibility` is off, and counted on its own by the report.
* Per preference field, `hard` keeps only matching documents before search (a FAISS IDSelector,
  a BM25 score mask), `soft` adds `boost` to a matching document's final score after the scores
  are min-max scaled to [0, 1] (the same bonus means the same for every retrieval method), `none`
  ignores it. A query field no preference names is applied hard: it is what the caller asked.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ragrig.core.errors import DataValidationError
from ragrig.core.predicates import matches
from ragrig.core.ranking import sort_scores

META_PREFIX = "meta_"
MODES = ("hard", "soft", "none")


def draw(key: str, salt: str) -> float:
    """A uniform number in [0, 1) fixed by (salt, key): the same on every machine and run."""
    digest = hashlib.blake2b(f"{salt}\x1f{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def norm(value: Any) -> Any:
    """Metadata compared as text: a scalar as str, a list as a list of str."""
    return [str(v) for v in value] if isinstance(value, list | tuple) else str(value)


def pick(values: list[Any], key: str, salt: str) -> Any:
    return values[int(draw(key, salt) * len(values))]


# parse=docling's own columns of a documents row, as metadata fields
DOCLING_FIELDS = {"path": "file", "format": "format", "section": "section", "page_start": "page"}


def document_metadata(documents: pd.DataFrame, cfg: Any) -> dict[str, dict[str, Any]]:
    """doc_id -> {field: value}: docling's file, format, section and page when the documents
    came through parse=docling, the corpus's `meta_` columns, then `cfg.assign`'s fields drawn
    by hash for the documents that lack them."""
    cols = [c for c in documents.columns if c.startswith(META_PREFIX)]
    names = [c[len(META_PREFIX) :] for c in cols]
    for col, name in DOCLING_FIELDS.items():
        if col in documents.columns:
            cols.append(col)
            names.append(name)
    meta: dict[str, dict[str, Any]] = {}
    for row in documents[["doc_id", *cols]].itertuples(index=False):
        values = {
            name: norm(v)
            for name, v in zip(names, row[1:], strict=True)
            if v is not None and not (isinstance(v, float) and np.isnan(v)) and v != ""
        }
        meta[str(row[0])] = values
    for name, values in sorted(cfg.assign.items()):
        if not values:
            raise DataValidationError(f"filters.assign.{name}: no value to assign")
        for doc_id, fields in meta.items():
            if name not in fields:
                fields[name] = str(pick(values, doc_id, f"doc:{name}"))
    return meta


def query_predicates(
    queries: pd.DataFrame,
    gold: Mapping[str, list[str]],
    metadata: Mapping[str, Mapping[str, Any]],
    cfg: Any,
) -> dict[str, dict[str, Any]]:
    """qid -> {field: value or values}: each query's own `metadata.filter`, plus every configured
    preference it lacks, filled by the preference's rule. A query with nothing: {}."""
    explicit = queries["filter"].tolist() if "filter" in queries.columns else [""] * len(queries)
    out: dict[str, dict[str, Any]] = {}
    for qid, raw in zip(queries["qid"].astype(str).tolist(), explicit, strict=True):
        pred = {k: norm(v) for k, v in json.loads(raw).items()} if raw else {}
        for name, pref in sorted(cfg.preferences.items()):
            if name in pred or pref.rule == "query":
                continue
            seen = sorted({str(m[name]) for m in metadata.values() if name in m})
            if not seen:
                raise DataValidationError(
                    f"filters.preferences.{name}: no document has a {name!r} field (corpus "
                    f"metadata or filters.assign.{name})"
                )
            if pref.rule == "hash":
                pred[name] = pick(seen, qid, f"query:{name}")
                continue
            own = [
                str(metadata[d][name])
                for d in sorted(gold.get(qid, ()))
                if name in metadata.get(d, {})
            ]
            if not own:  # no gold document to take it from: a value drawn like `hash`
                pred[name] = pick(seen, qid, f"query:{name}")
            elif len(seen) > 1 and draw(qid, f"mismatch:{name}") < pref.mismatch:
                others = [v for v in seen if v != own[0]]
                pred[name] = pick(others, qid, f"other:{name}")
            else:
                pred[name] = own[0]
        out[qid] = pred
    return out


@dataclass(frozen=True)
class QueryFilter:
    """One query's plan: the chunk rows its search may return (None: all) and its soft boosts."""

    rows: np.ndarray | None
    soft: tuple[tuple[str, Any, float], ...] = ()  # (field, accepted value(s), bonus)


@dataclass
class FilterPlan:
    """Per query, what retrieval applies; built once for a set of modes (field -> mode)."""

    queries: dict[str, QueryFilter]
    metadata: Mapping[str, Mapping[str, Any]]
    modes: dict[str, str]
    _rows_cache: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def boost(self, qid: str, final: list[tuple[str, str, float]]) -> list[tuple[str, str, float]]:
        """The final (doc, chunk, score) list with the query's soft boosts: scores scaled to
        [0, 1] by min-max, the bonus of each matching field added, re-sorted (ties by doc id)."""
        soft = self.queries[qid].soft if qid in self.queries else ()
        if not soft or not final:
            return final
        scores = np.array([s for _, _, s in final], dtype=np.float64)
        lo, span = scores.min(), scores.max() - scores.min()
        scaled = (scores - lo) / span if span > 0 else np.ones_like(scores)
        chunk = {d: c for d, c, _ in final}
        boosted = {}
        for (doc, _, _), base in zip(final, scaled.tolist(), strict=True):
            meta = self.metadata.get(doc, {})
            boosted[doc] = base + sum(b for f, v, b in soft if matches(meta, {f: v}))
        return [(d, chunk[d], s) for d, s in sort_scores(boosted)]


def build_plan(
    predicates: Mapping[str, Mapping[str, Any]],
    metadata: Mapping[str, Mapping[str, Any]],
    cfg: Any,
    chunk_doc: np.ndarray,
    modes: Mapping[str, str] | None = None,
) -> FilterPlan:
    """The plan of `predicates` under `modes` (field -> hard/soft/none; default: each
    preference's configured mode). Eligibility is applied hard to every query when enforced."""
    modes = dict(modes or {name: p.mode for name, p in cfg.preferences.items()})
    eligibility = dict(cfg.eligibility) if cfg.enforce_eligibility else {}
    docs = [str(d) for d in chunk_doc]
    doc_set = set(docs)
    cache: dict[str, np.ndarray] = {}
    plans: dict[str, QueryFilter] = {}
    for qid, pred in predicates.items():
        hard = dict(eligibility)
        soft = []
        for name, value in sorted(pred.items()):
            mode = modes.get(name, "hard")
            if mode == "hard":
                if name in hard:  # the query asks within its eligibility: both must hold
                    hard[name] = _intersect(hard[name], value)
                else:
                    hard[name] = value
            elif mode == "soft":
                soft.append(
                    (name, value, cfg.preferences[name].boost if name in cfg.preferences else 0.0)
                )
        rows = None
        if hard:
            key = json.dumps(hard, sort_keys=True)
            if key not in cache:
                allowed = {d for d in doc_set if matches(metadata.get(d, {}), hard)}
                cache[key] = np.fromiter(
                    (i for i, d in enumerate(docs) if d in allowed), dtype=np.int64
                )
            rows = cache[key]
        plans[qid] = QueryFilter(rows, tuple(soft))
    return FilterPlan(plans, metadata, modes, cache)


def _intersect(a: Any, b: Any) -> list[Any]:
    aa = a if isinstance(a, list | tuple) else [a]
    bb = b if isinstance(b, list | tuple) else [b]
    return [v for v in aa if v in bb]


def variant_modes(cfg: Any) -> dict[str, dict[str, str]]:
    """The runs the report's hard-or-soft rule compares: per preference, that field hard and
    soft with the others as configured, named `<field>=hard` / `<field>=soft`."""
    base = {name: p.mode for name, p in cfg.preferences.items()}
    out = {}
    for name in sorted(cfg.preferences):
        for mode in ("hard", "soft"):
            out[f"{name}={mode}"] = {**base, name: mode}
    return out


def metadata_table(metadata: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """doc_id and one text column per field (None where a document lacks it): what the report
    reads to check eligibility and predicates against the gold documents."""
    fields = sorted({f for m in metadata.values() for f in m})
    rows = [
        {"doc_id": d, **{f: (None if f not in m else str(m[f])) for f in fields}}
        for d, m in sorted(metadata.items())
    ]
    return pd.DataFrame(rows, columns=["doc_id", *fields])


def predicates_table(
    predicates: Mapping[str, Mapping[str, Any]], modes: Mapping[str, str]
) -> pd.DataFrame:
    """qid, the predicate (JSON), and its hard and soft parts under the configured modes."""
    rows = []
    for qid, pred in sorted(predicates.items()):
        hard = {k: v for k, v in pred.items() if modes.get(k, "hard") == "hard"}
        soft = {k: v for k, v in pred.items() if modes.get(k, "hard") == "soft"}
        rows.append(
            {
                "qid": qid,
                "predicate": json.dumps(pred, sort_keys=True),
                "hard": json.dumps(hard, sort_keys=True),
                "soft": json.dumps(soft, sort_keys=True),
            }
        )
    return pd.DataFrame(rows, columns=["qid", "predicate", "hard", "soft"])
