"""The report's coverage section (`report.coverage`): the matrix of the run's queries by intent
(a queries-table column, or its ontology branch) and document type, its empty cells and rows,
per cell the axis's interval and the queries the decision's half-width needs
(ragrig.metrics.coverage, the same computation as `ragrig coverage`); the run page draws it
(ragrig.report.html.coverage_html)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ragrig.core.errors import DataValidationError


def coverage_section(
    queries: pd.DataFrame,
    qrels: pd.DataFrame,
    documents: pd.DataFrame | None,
    per_query: pd.DataFrame,
    cfg: Any,
    level: float,
    seed: int,
    resamples: int,
) -> tuple[dict[str, Any], pd.DataFrame, list[str]]:
    """(metrics.json's `coverage`, coverage.csv's cells, the console lines)."""
    from ragrig.metrics import coverage as cov

    intents = cov.intents_from(queries, cfg.intent)
    rows: list[str] = []
    unknown: dict[str, int] = {}
    if cfg.ontology:
        parents = cov.ontology_from(cfg.ontology, "report.coverage.ontology")
        intents, rows, unknown = cov.branches(intents, parents, cfg.branch_depth)
    if cfg.doc_type is not None and documents is None:
        raise DataValidationError("report.coverage.doc_type is set but no documents table read")
    types = cov.types_from(qrels, documents if documents is not None else pd.DataFrame(),
                           cfg.doc_type, list(intents))  # fmt: skip
    measure = f"axis/{cfg.axis}"
    values = (
        cov.values_from(per_query, measure) if (per_query["measure"] == measure).any() else None
    )
    m = cov.matrix(intents, types, values, cfg.half_width, level, seed, resamples, rows=rows)
    record = {k: v for k, v in m.items() if k != "counts"}
    record.update(
        intent=cfg.intent, doc_type=cfg.doc_type, axis=cfg.axis,
        counts=m["counts"].to_dict(orient="index"), axis_measured=values is not None,
        unknown_intents=unknown,
    )  # fmt: skip
    record["empty"] = [list(e) for e in m["empty"]]
    lines = [
        "",
        f"coverage: {len(intents)} queries by {cfg.intent}"
        + (f" (ontology branches at depth {cfg.branch_depth})" if cfg.ontology else "")
        + f" x {cfg.doc_type or 'one document type'}, axis {cfg.axis}"
        + ("" if values is not None else " (not measured: sizes from the prior)"),
    ]
    if unknown:
        lines.append(
            f"  {sum(unknown.values())} queries of intents the ontology does not name "
            f"({', '.join(f'{k} {n}' for k, n in unknown.items())}) in the row {cov.UNKNOWN!r}"
        )
    lines += ["  " + line for line in cov.format_matrix(m)]
    return record, pd.DataFrame(m["cells"]), lines
