"""What the lost-in-the-middle probe shows (ragrig.generate.position): correctness and
faithfulness of the same queries' answers with the gold passage first, in the middle, last, and
with the passages reordered (strongest at both ends), each with its bootstrap interval, and the
paired differences that matter (middle - first, last - first, reorder - middle) with theirs.

Correctness per answer is the scorecard's with ground truth: token-F1 against the reference
column when set, else the answer's verdict against the claim label; an answer with neither is
left out of correctness (counted). Faithfulness is the judge's decision on a scored answer."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ragrig.metrics import correctness as corr
from ragrig.metrics.deltas import bootstrap_interval

PAIRS = (("middle", "first"), ("last", "first"), ("reorder", "middle"))


def answer_values(
    probe: pd.DataFrame, judgments: pd.DataFrame, queries: pd.DataFrame, cfg: Any
) -> pd.DataFrame:
    """One row per probe answer: qid, position, correctness, faithfulness (None where not
    measured)."""
    q = queries.set_index("qid")
    judged = judgments.set_index("qid")
    rows = []
    for g in probe.itertuples(index=False):
        j = judged.loc[g.qid] if g.qid in judged.index else None
        value = None
        if g.status == "ok":
            row = q.loc[g.query_qid]
            ref = row.get(cfg.reference_column) if cfg.reference_column else None
            label = corr.expected_verdict(row.get("claim_label")) if cfg.verdicts else None
            if isinstance(ref, str) and ref.strip():
                value = corr.token_f1(g.answer, ref)
            elif label is not None:
                refusal = j is not None and j["answer_kind"] == "refusal"
                value = float(corr.parse_verdict(g.answer, refusal=refusal) == label)
        faithful = None
        if j is not None and j["status"] == "scored" and pd.notna(j["judged_faithful"]):
            faithful = float(j["judged_faithful"])
        rows.append(
            {
                "qid": g.query_qid,
                "position": g.position,
                "gold_at": int(g.gold_at),
                "correctness": value,
                "faithfulness": faithful,
            }
        )
    return pd.DataFrame(rows, columns=["qid", "position", "gold_at", "correctness", "faithfulness"])


def _summary(values: list[float], seed: int) -> dict[str, Any]:
    ci = bootstrap_interval(values, seed)
    return {
        "mean": sum(values) / len(values) if values else None,
        "n": len(values),
        "ci_low": ci[0] if ci else None,
        "ci_high": ci[1] if ci else None,
    }


def position_measures(table: pd.DataFrame, seed: int) -> tuple[dict[str, Any], list[str]]:
    """metrics.json `position` and the console lines, from `answer_values`."""
    out: dict[str, Any] = {"queries": int(table["qid"].nunique()), "by_position": {}, "paired": {}}
    for position, group in table.groupby("position", sort=False):
        out["by_position"][position] = {
            axis: _summary(group[axis].dropna().astype(float).tolist(), seed)
            for axis in ("correctness", "faithfulness")
        }
    wide = {
        axis: table.pivot(index="qid", columns="position", values=axis)
        for axis in ("correctness", "faithfulness")
    }
    for a, b in PAIRS:
        key = f"{a}-{b}"
        out["paired"][key] = {}
        for axis, frame in wide.items():
            if a not in frame.columns or b not in frame.columns:
                continue
            both = frame[[a, b]].dropna()
            deltas = (both[a] - both[b]).astype(float).tolist()
            out["paired"][key][axis] = _summary(deltas, seed)
    lines = [f"position probe: {out['queries']} queries, each answered with the gold passage moved"]
    for axis in ("correctness", "faithfulness"):
        cells = []
        for position, axes in out["by_position"].items():
            s = axes[axis]
            if s["mean"] is None:
                cells.append(f"{position} n/a")
                continue
            ci = f" [{s['ci_low']:.2f}, {s['ci_high']:.2f}]" if s["ci_low"] is not None else ""
            cells.append(f"{position} {s['mean']:.4f}{ci}")
        lines.append(f"  {axis}: " + ", ".join(cells))
        deltas = []
        for key, axes in out["paired"].items():
            s = axes.get(axis)
            if s and s["mean"] is not None:
                ci = (
                    f" [{s['ci_low']:+.2f}, {s['ci_high']:+.2f}]" if s["ci_low"] is not None else ""
                )
                deltas.append(f"{key} {s['mean']:+.4f}{ci}")
        if deltas:
            lines.append(f"  {axis} paired: " + ", ".join(deltas))
    return out, lines
