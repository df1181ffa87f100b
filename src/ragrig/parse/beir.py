"""The BEIR parser: corpus.jsonl, queries.jsonl and qrels into the standard tables, plus
SciFact-style claim files; the counts of what it left out, and their console lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from ragrig.core.io import DEFAULT_LIMITS, ReadLimits
from ragrig.core.text import sample
from ragrig.dataset.beir import BeirDataset
from ragrig.dataset.claims import UNKNOWN
from ragrig.parse.base import META_PREFIX, Parsed, content_hash


class BeirParser:
    """BEIR layout plus, when configured, SciFact-style claim files for per-query labels."""

    def __init__(
        self,
        title_separator: str = ". ",
        empty_text: str = "skip",
        limits: ReadLimits = DEFAULT_LIMITS,
    ):
        self.title_separator = title_separator
        self.empty_text = empty_text
        self.limits = limits

    @classmethod
    def from_config(cls, cfg: Any) -> BeirParser:
        limits = ReadLimits(cfg.max_record_bytes, cfg.max_inflated_bytes, setting="parse")
        return cls(cfg.title_separator, cfg.empty_text, limits)

    def parse(self, dataset: Any) -> Parsed:
        from ragrig.core.progress import bar
        from ragrig.dataset.beir import Replaced, load_beir
        from ragrig.dataset.claims import load_claims

        root = Path(dataset.root)
        with bar("parse", _corpus_records(root, self.limits), "documents") as b:
            data = load_beir(
                root, dataset.split, self.empty_text, done=b.update, limits=self.limits
            )
        in_claims = Replaced()
        claims = (
            load_claims([root / f for f in dataset.claims.files], in_claims, self.limits)
            if dataset.claims
            else None
        )
        from ragrig.dataset.splits import check_not_development, split_record

        check_not_development(root, dataset.split, list(data.qrels))
        queries = queries_table(data, claims)
        stats = parse_stats(data, claims, split=dataset.split)
        version = split_record(root, dataset.split)  # a set `ragrig split` made
        if version is not None:
            stats["split_version"] = version
        if claims is not None:
            stats["surrogates_replaced"]["claims"] = in_claims.count
        return Parsed(
            documents_table(
                data, source=f"beir:{dataset.name}", title_separator=self.title_separator
            ),
            queries,
            qrels_table(data),
            stats,
        )


def _corpus_records(root: Path, limits: ReadLimits) -> int | None:
    """The corpus's record count for the progress bar's total: counted (one more read of the
    file) only when a bar is drawn; None when unknown (load_beir then names any problem)."""
    from ragrig.core.errors import DataValidationError
    from ragrig.core.progress import enabled
    from ragrig.dataset.beir import count_records, find_corpus

    if not enabled() or not root.is_dir():
        return None
    try:
        return count_records(find_corpus(root), limits)
    except DataValidationError:
        return None


def documents_table(dataset: BeirDataset, source: str, title_separator: str) -> pd.DataFrame:
    """One row per document; `content` (title + separator + text) is what chunk offsets index."""
    rows = []
    for doc_id in sorted(dataset.corpus):
        rec = dataset.corpus[doc_id]
        title, text = rec["title"].strip(), rec["text"].strip()
        content = f"{title}{title_separator}{text}" if title and text else (title or text)
        rows.append(
            {
                "doc_id": doc_id,
                "title": title,
                "text": text,
                "content": content,
                "source": source,
                "content_hash": content_hash(content),
            }
        )
    table = pd.DataFrame(rows)
    # the corpus's own metadata (what retrieve's filters read); none: no column
    for name, col in metadata_columns(list(table["doc_id"]), dataset.doc_metadata).items():
        table[name] = col.to_numpy()
    return table


def metadata_columns(qids: list[str], metadata: dict[str, dict[str, Any]]) -> dict[str, pd.Series]:
    """One `meta_<field>` column per scalar metadata field, in qid order: numeric when every
    value is a number (float with NaN where a query lacks it), else text (None where missing)."""
    fields = sorted({k for meta in metadata.values() for k in meta})
    cols: dict[str, pd.Series] = {}
    for name in fields:
        values = [metadata.get(q, {}).get(name) for q in qids]
        present = [v for v in values if v is not None]
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in present)
        if numeric:
            cols[META_PREFIX + name] = pd.Series(
                values,
                dtype="float64"
                if None in values or any(isinstance(v, float) for v in present)
                else "int64",
            )
        else:
            cols[META_PREFIX + name] = pd.Series(
                [None if v is None else str(v) for v in values], dtype="object"
            )
    return cols


def queries_table(dataset: BeirDataset, claims: dict[str, dict[str, Any]] | None) -> pd.DataFrame:
    """One row per query of the split, with slice attributes (claim label, gold count, length)
    and one `meta_<field>` column per scalar field of the queries' `metadata` objects."""
    rows = []
    for qid in sorted(dataset.queries):
        text = dataset.queries[qid]
        n_gold = sum(1 for rel in dataset.qrels.get(qid, {}).values() if rel > 0)
        if claims is not None and qid in claims:
            label, evidence = claims[qid]["label"], claims[qid]["evidence"]
        else:  # no claim files, or a query they do not name: the label is not known
            label, evidence = UNKNOWN, {}
        rows.append(
            {
                "qid": qid,
                "text": text,
                "claim_label": label,
                "evidence": json.dumps(evidence, sort_keys=True),
                "n_gold": n_gold,
                "n_words": len(text.split()),
            }
        )
    table = pd.DataFrame(rows)
    for name, col in metadata_columns(list(table["qid"]), dataset.query_metadata).items():
        table[name] = col.to_numpy()
    if dataset.query_filters:  # each query's `metadata.filter` ("" for none), for retrieve
        table["filter"] = [
            json.dumps(dataset.query_filters[q], sort_keys=True)
            if q in dataset.query_filters
            else ""
            for q in table["qid"]
        ]
    return table


def qrels_table(dataset: BeirDataset) -> pd.DataFrame:
    rows = [
        {"qid": qid, "doc_id": doc_id, "relevance": int(rel)}
        for qid in sorted(dataset.qrels)
        for doc_id, rel in sorted(dataset.qrels[qid].items())
    ]
    return pd.DataFrame(rows, columns=["qid", "doc_id", "relevance"])


def parse_stats(
    dataset: BeirDataset, claims: dict[str, dict[str, Any]] | None, split: str
) -> dict[str, Any]:
    """What parse left out or could not label, counted for the manifest and the console.

    `queries_scored` are the split's queries with at least one positive judgment (the ones
    retrieval metrics score); `queries_no_positive` are judged but only with grade <= 0;
    `queries_unjudged` are in queries.jsonl with no judgment in the split at all;
    `surrogates_replaced` counts the lone surrogates replaced by U+FFFD in each file read.
    """
    no_positive = dataset.no_positive
    empty = set(dataset.empty_documents)
    judged_empty = [
        (qid, doc_id, rel)
        for qid, rels in sorted(dataset.qrels.items())
        for doc_id, rel in sorted(rels.items())
        if doc_id in empty
    ]
    stats: dict[str, Any] = {
        "queries_scored": len(dataset.queries) - len(no_positive),
        "queries_unjudged": len(dataset.unjudged),
        "queries_no_positive": len(no_positive),
        "queries_unjudged_in_other_splits": dict(dataset.unjudged_in_other_splits),
        "empty_text": {
            "policy": dataset.empty_text,
            "documents": len(empty),
            "skipped": len(empty) if dataset.empty_text == "skip" else 0,
            "doc_ids": sorted(empty)[:20],
            "judged_documents": len({d for _, d, _ in judged_empty}),
            "judged_doc_ids": sorted({d for _, d, _ in judged_empty})[:20],
            "judgments": len(judged_empty),
            "positive_judgments": sum(1 for _, _, r in judged_empty if r > 0),
            "queries_affected": len({q for q, _, r in judged_empty if r > 0}),
        },
        "split": split,
        "query_metadata_columns": sorted(
            META_PREFIX + k for k in {k for m in dataset.query_metadata.values() for k in m}
        ),
        "query_metadata_nested_fields": len(dataset.nested_metadata_fields),
        "document_metadata_columns": sorted(
            META_PREFIX + k for k in {k for m in dataset.doc_metadata.values() for k in m}
        ),
        "query_filters": len(dataset.query_filters),
        "surrogates_replaced": dict(dataset.surrogates_replaced),
    }
    if claims is not None:
        stats["claims_unknown"] = sum(1 for q in dataset.queries if q not in claims)
    return stats


def stats_lines(stats: dict[str, Any]) -> list[str]:
    """Console lines for the counts of `parse_stats` (the ones worth a user's attention)."""
    split = stats["split"]
    elsewhere = "".join(
        f"; {n} judged in {other}"
        for other, n in stats.get("queries_unjudged_in_other_splits", {}).items()
        if n
    )
    lines = [
        f"parse: queries: {stats['queries_scored']} scored, "
        f"{stats['queries_unjudged']} unjudged (in queries.jsonl, no judgment in "
        f"qrels/{split}.tsv{elsewhere}), {stats['queries_no_positive']} judged with no "
        "positive judgment"
    ]
    e = stats["empty_text"]
    if e["documents"]:
        done = "skipped" if e["policy"] == "skip" else "kept with empty content"
        lines.append(
            f"parse: {e['documents']} document(s) with empty title and text {done} "
            f"(parse.empty_text={e['policy']}): {e['judged_documents']} of them judged"
            + (
                f" ({sample(e['judged_doc_ids'], total=e['judged_documents'])})"
                if e["judged_doc_ids"]
                else ""
            )
            + f", {e['positive_judgments']} positive judgment(s) on {e['queries_affected']} "
            "query(ies) kept in qrels"
            + (" (counted as gold that cannot be retrieved)" if e["policy"] == "skip" else "")
        )
    if stats.get("query_metadata_columns"):
        lines.append(
            "parse: query metadata as slice columns: " + ", ".join(stats["query_metadata_columns"])
        )
    if stats.get("document_metadata_columns"):
        lines.append(
            "parse: document metadata (for retrieve's filters): "
            + ", ".join(stats["document_metadata_columns"])
        )
    if stats.get("query_filters"):
        lines.append(f"parse: {stats['query_filters']} query(ies) carry a metadata.filter")
    replaced = stats.get("surrogates_replaced", {})
    if any(replaced.values()):
        lines.append(surrogates_line(replaced))
    if stats.get("claims_unknown"):
        lines.append(
            f"parse: {stats['claims_unknown']} query(ies) not in the claim files: "
            f"claim_label {UNKNOWN!r}"
        )
    v = stats.get("split_version")
    if v:
        lines.append(
            f"parse: split {v['part']}: version {v['version']} of splits.jsonl (from "
            f"{v['source']}, seed {v['seed']})"
            + ("" if v["unchanged"] else f"; qrels/{v['part']}.tsv CHANGED since that version")
        )
    return lines


def surrogates_line(replaced: dict[str, int]) -> str:
    """The console line for lone surrogates replaced, by the file kind they were in."""
    kinds = ", ".join(f"{kind} {n}" for kind, n in replaced.items() if n)
    return f"parse: {sum(replaced.values())} lone surrogate(s) replaced by U+FFFD ({kinds})"
