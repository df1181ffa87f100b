"""The coverage matrix of a query set, and the size each cell needs for a decision.

Every query gets an intent (a column of the queries table: the team's own, or a rule's) and a
document type (the most common value of a documents-table column among its gold documents, ties
to the first in sorted order; `none` for a query with no gold document). The matrix counts
queries per (intent, document type); a cell of the cross product with no query is an **empty
cell**, listed. Per cell, with per-query values of an axis (a run's per_query table): the mean,
its bootstrap interval and half-width; a cell with queries but fewer than two values has no
interval (counted as `no_interval`, never a NaN).

Sizing from the decision: a release decision tolerates an interval half-width h on an axis.
For a mean of values in [0, 1] the normal approximation gives n = ceil((z * sd / h)^2), z the
two-sided quantile of the level; sd is the cell's standard deviation with z^2 / 2 pseudo-values
at 0 and at 1 added (the Agresti-Coull correction: four faithful answers out of four do not
make a variance of 0 and a size of 2) when it has at least two values, else the conservative
prior 0.5 (the largest sd a [0, 1] variable can have), so a cell with no run yet still gets a
size. `needed` is that n; `missing` what the cell
lacks of it.

Production traffic as the target (`traffic_coverage`): the share of a log's lines per intent
(`ragrig coverage --traffic` reads it) beside the set's own share; the intents production uses
that the set has no query of are named with their summed share (the **uncovered share**), and
those the set holds that production never asks.

An **ontology** (`ragrig coverage --ontology FILE`, `read_ontology`) names the intents a set
should cover and how they nest: a YAML or JSON mapping of each node to its parent (null at a
root). A query's **branch** is its intent's path from the root cut at `depth` ("billing/refunds"
at depth 2); the matrix's rows are then every branch of the ontology at that depth, so a branch
no query falls in is an empty row, listed, rather than absent. A query whose intent the ontology
does not name falls in the branch `unknown`, counted and named. A parent that is not a node, a
cycle, or a file that is not such a mapping is one line naming the file and the node.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragrig.core.errors import DataValidationError

PRIOR_SD = 0.5
NO_GOLD = "none"
UNKNOWN = "unknown"


def z_of(level: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(0.5 + level / 2))


def check_half_width(h: float) -> float:
    if not 0 < h < 1:
        raise DataValidationError(
            f"half-width {h:g}: a decision's interval half-width lies strictly between 0 and 1"
        )
    return h


def adjusted_sd(values: Sequence[float], level: float) -> float:
    """The values' sd with z^2 / 2 pseudo-values at 0 and at 1 (module doc)."""
    z2 = z_of(level) ** 2
    v = np.asarray(values, dtype=float)
    n = len(v) + z2
    mean = (v.sum() + z2 / 2) / n
    ss = ((v - mean) ** 2).sum() + z2 / 2 * (mean**2 + (1 - mean) ** 2)
    return float(math.sqrt(ss / (n - 1)))


def needed_n(sd: float | None, half_width: float, level: float) -> int:
    """Queries a mean needs for an interval of `half_width` at `level` (module doc)."""
    check_half_width(half_width)
    s = PRIOR_SD if sd is None else sd
    return max(2, math.ceil((z_of(level) * s / half_width) ** 2 - 1e-9))


def doc_types(
    qrels: Mapping[str, Mapping[str, int]], doc_type: Mapping[str, str]
) -> dict[str, str]:
    """qid -> the most common type among its gold (grade > 0) documents."""
    out = {}
    for q, rels in qrels.items():
        kinds = Counter(str(doc_type.get(d, "unknown")) for d, r in rels.items() if r > 0)
        if not kinds:
            out[q] = NO_GOLD
            continue
        top = max(kinds.values())
        out[q] = sorted(k for k, n in kinds.items() if n == top)[0]
    return out


def read_ontology(path: Any) -> dict[str, str | None]:
    """node -> parent (None at a root) from a YAML or JSON file (module doc), checked: every
    parent a node, no cycle."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataValidationError(f"ontology {path}: not found") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" line {where.line + 1}" if where is not None else ""
        raise DataValidationError(
            f"ontology {path}{at}: not readable ({type(exc).__name__})"
        ) from None
    return ontology_from(data, str(path))


def ontology_from(data: Any, path: str) -> dict[str, str | None]:
    """node -> parent of a loaded mapping (`path` names it in errors), checked: every parent a
    node, no cycle."""
    if not isinstance(data, dict) or not data:
        raise DataValidationError(
            f"ontology {path}: expected a mapping of each intent to its parent (null at a root)"
        )
    parents: dict[str, str | None] = {}
    for node, parent in data.items():
        if parent is not None and not isinstance(parent, str | int | float):
            raise DataValidationError(
                f"ontology {path}: the parent of {node!r} is a {type(parent).__name__}, not a "
                "node name (write node: parent, null at a root)"
            )
        parents[str(node)] = None if parent is None or str(parent) == "" else str(parent)
    for node, parent in parents.items():
        if parent is not None and parent not in parents:
            raise DataValidationError(
                f"ontology {path}: {node!r} has the unknown parent {parent!r} (not a node)"
            )
    for node in parents:
        seen = [node]
        up = parents[node]
        while up is not None:
            if up in seen:
                loop = " -> ".join([*seen[seen.index(up) :], up])
                raise DataValidationError(f"ontology {path}: a cycle ({loop})")
            seen.append(up)
            up = parents[up]
    return parents


def branch_of(node: str, parents: Mapping[str, str | None], depth: int) -> str:
    """The node's path from its root, cut at `depth` levels ("a/b")."""
    path = [node]
    while parents[path[-1]] is not None:
        path.append(str(parents[path[-1]]))
    return "/".join(list(reversed(path))[:depth])


def branches(
    intents: Mapping[str, str], parents: Mapping[str, str | None], depth: int
) -> tuple[dict[str, str], list[str], dict[str, int]]:
    """(qid -> branch, every branch of the ontology at `depth` in order, intents the ontology
    does not name -> queries): the matrix's rows with an ontology (module doc)."""
    if depth < 1:
        raise DataValidationError(f"branch depth {depth}: the first level is 1")
    out: dict[str, str] = {}
    unknown: Counter = Counter()
    for q, intent in intents.items():
        if intent in parents:
            out[q] = branch_of(intent, parents, depth)
        else:
            out[q] = UNKNOWN
            unknown[intent] += 1
    rows = sorted({branch_of(n, parents, depth) for n in parents})
    return out, rows, dict(sorted(unknown.items()))


def branch_shares(
    shares: Mapping[str, float], parents: Mapping[str, str | None], depth: int
) -> dict[str, float]:
    """Production's share per intent summed per branch (an intent not named: `unknown`)."""
    out: Counter = Counter()
    for k, v in shares.items():
        out[branch_of(k, parents, depth) if k in parents else UNKNOWN] += v
    return dict(sorted(out.items()))


def matrix(
    intents: Mapping[str, str],
    types: Mapping[str, str],
    values: Mapping[str, float] | None = None,
    half_width: float = 0.05,
    level: float = 0.95,
    seed: int = 13,
    resamples: int = 1000,
    rows: Sequence[str] = (),
) -> dict[str, Any]:
    """The cells (module doc): counts, empty cells, per cell its mean, interval and size.
    `rows` are intents (or branches) listed even where no query has them."""
    from ragrig.metrics.bootstrap import bootstrap_ci

    check_half_width(half_width)
    qids = sorted(intents)
    rows = sorted({intents[q] for q in qids} | set(rows))
    cols = sorted({types.get(q, NO_GOLD) for q in qids})
    cells = []
    no_interval = 0
    for r in rows:
        for c in cols:
            members = [q for q in qids if intents[q] == r and types.get(q, NO_GOLD) == c]
            vals = [float(values[q]) for q in members if values is not None and q in values]
            vals = [v for v in vals if v == v]  # a query the axis could not score: no value
            cell: dict[str, Any] = {"intent": r, "doc_type": c, "queries": len(members),
                                    "values": len(vals)}  # fmt: skip
            sd = adjusted_sd(vals, level) if len(vals) >= 2 else None
            if len(vals) >= 2:
                low, high = bootstrap_ci(vals, seed, resamples, 1.0 - level)
                cell.update(mean=float(np.mean(vals)), low=low, high=high,
                            half_width=(high - low) / 2)  # fmt: skip
            else:  # one value or none: no interval, counted where the cell has queries
                no_interval += bool(members)
                cell.update(mean=vals[0] if vals else None, low=None, high=None, half_width=None)
            cell["sd"] = sd
            cell["sd_from"] = "observed, adjusted" if sd is not None else "prior 0.5"
            cell["needed"] = needed_n(sd, half_width, level)
            cell["missing"] = max(0, cell["needed"] - len(members))
            cells.append(cell)
    counts = pd.DataFrame(
        [[next(x["queries"] for x in cells if x["intent"] == r and x["doc_type"] == c)
          for c in cols] for r in rows],
        index=rows, columns=cols,
    )  # fmt: skip
    return {
        "intents": rows,
        "doc_types": cols,
        "counts": counts,
        "cells": cells,
        "empty": [(x["intent"], x["doc_type"]) for x in cells if x["queries"] == 0],
        "empty_rows": [r for r in rows if not any(intents[q] == r for q in qids)],
        "no_interval": no_interval,
        "half_width": half_width,
        "level": level,
    }


def format_matrix(m: dict[str, Any]) -> list[str]:
    counts: pd.DataFrame = m["counts"]
    head = "intent \\ doc type"
    width = max([len(head), *(len(r) for r in m["intents"])])
    cols = [max(len(c), 5) for c in m["doc_types"]]
    out = [
        f"{head:<{width}}  "
        + "  ".join(f"{c:>{w}}" for c, w in zip(m["doc_types"], cols, strict=True))
    ]
    for r in m["intents"]:
        out.append(
            f"{r:<{width}}  "
            + "  ".join(
                f"{counts.loc[r, c]:>{w}}" for c, w in zip(m["doc_types"], cols, strict=True)
            )
        )
    empty = ", ".join(f"{r} x {c}" for r, c in m["empty"]) or "none"
    out.append(f"empty cells: {len(m['empty'])} ({empty})")
    if m.get("empty_rows"):
        out.append(
            f"rows with no query at all: {len(m['empty_rows'])} ({', '.join(m['empty_rows'])})"
        )
    short = [x for x in m["cells"] if x["missing"]]
    out.append(
        f"for a half-width of {m['half_width']:g} at {m['level']:.0%}: {len(short)} of "
        f"{len(m['cells'])} cells short, {sum(x['missing'] for x in short)} queries missing; "
        f"{m['no_interval']} cells with queries and under two values (no interval)"
    )
    for x in sorted(short, key=lambda x: (-x["missing"], x["intent"], x["doc_type"]))[:10]:
        hw = "n/a" if x.get("half_width") is None else f"{x['half_width']:.3f}"
        out.append(
            f"  {x['intent']} x {x['doc_type']}: {x['queries']} queries (half-width {hw}), "
            f"needs {x['needed']} (sd {x['sd_from']})"
        )
    return out


def intents_from(queries: pd.DataFrame, column: str) -> dict[str, str]:
    if column not in queries.columns:
        raise DataValidationError(
            f"intent column {column!r} is not in the queries table (columns: "
            f"{', '.join(sorted(map(str, queries.columns)))})"
        )
    return {
        str(q): ("unknown" if v is None or v != v or str(v) == "" else str(v))
        for q, v in zip(queries["qid"], queries[column], strict=True)
    }


def values_from(per_query: pd.DataFrame, measure: str) -> dict[str, float]:
    sel = per_query[per_query["measure"] == measure]
    if not len(sel):
        raise DataValidationError(f"the per-query table has no measure {measure!r}")
    return {str(q): float(v) for q, v in zip(sel["qid"], sel["value"], strict=True)}


def types_from(
    qrels: pd.DataFrame, documents: pd.DataFrame, column: str | None, qids: Sequence[str]
) -> dict[str, str]:
    from ragrig.metrics.ir import qrels_from_table

    if column is None:
        kinds: dict[str, str] = {}
    elif column not in documents.columns:
        raise DataValidationError(
            f"document type column {column!r} is not in the documents table (columns: "
            f"{', '.join(sorted(map(str, documents.columns)))})"
        )
    else:
        kinds = {
            str(d): str(v) for d, v in zip(documents["doc_id"], documents[column], strict=True)
        }
    got = doc_types(qrels_from_table(qrels), kinds) if column else {}
    return {q: got.get(q, NO_GOLD if column else "all") for q in qids}


def traffic_coverage(shares: Mapping[str, float], intents: Mapping[str, str]) -> dict[str, Any]:
    """Production's share per intent beside the set's (module doc)."""
    n = len(intents)
    in_set = Counter(intents.values())
    rows = [
        {"intent": k, "production_share": shares.get(k, 0.0),
         "set_share": in_set.get(k, 0) / n if n else 0.0, "queries": in_set.get(k, 0)}
        for k in sorted(set(shares) | set(in_set))
    ]  # fmt: skip
    uncovered = sorted((r for r in rows if r["queries"] == 0), key=lambda r: -r["production_share"])
    return {
        "rows": rows,
        "uncovered": [r["intent"] for r in uncovered],
        "uncovered_share": float(sum(r["production_share"] for r in uncovered)),
        "not_in_production": [r["intent"] for r in rows if r["production_share"] == 0],
    }


def format_traffic(t: dict[str, Any], lines: int, left_out: int, key: str) -> list[str]:
    worst = ", ".join(
        f"{r['intent']} {r['production_share']:.3f}"
        for r in t["rows"]
        if r["intent"] in t["uncovered"][:5]
    )
    out = [
        f"production traffic ({lines:,} lines, {left_out:,} left out; slice {key!r}): "
        f"{t['uncovered_share']:.3f} of it in intents the set does not cover"
        + (f" ({worst})" if worst else ""),
        f"{'intent':<20} {'production':>10} {'set':>8} {'queries':>8}",
    ]
    for r in t["rows"]:
        out.append(
            f"{r['intent']:<20} {r['production_share']:>10.3f} {r['set_share']:>8.3f} "
            f"{r['queries']:>8}"
        )
    if t["not_in_production"]:
        out.append(f"in the set, never asked in production: {', '.join(t['not_in_production'])}")
    return out
