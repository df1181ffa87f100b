"""The files DVC's own views read: the headline metrics and the plot data series.

`dvc metrics show` / `dvc exp show` read `headline.json` (a short flat dict, stable key order,
rounded); `dvc plots show/diff` read the tabular series `latency.csv` (p50_ms, p95_ms, p99_ms
per stage) and `recall_at_k.csv` (recall and nDCG at k = 1 ... 100 of the final ranking,
`recall_final` / `ndcg_final`, and of each retrieval lane, `recall_<lane>` / `ndcg_<lane>`;
dvc.yaml plots the final ranking's, whose columns exist whatever lanes a configuration runs).
Everything here is deterministic for the same inputs, measured latencies aside."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from ragrig.metrics.aggregate import stage_key

# The query-time stages whose per-query latencies add up to the end-to-end `total` (the judge
# evaluates the answer afterwards; it is not part of answering a query).
ONLINE_STAGES = ("embed_query", "retrieve", "rerank", "generate")
TOTAL = "total"
# the cut-offs of the recall@k / nDCG@k curve (capped at the run depth by the data itself)
CURVE_KS = (1, 2, 3, 5, 10, 20, 30, 50, 100)
SIGNIFICANT = 4


def rounded(value: Any, digits: int = SIGNIFICANT) -> Any:
    """A float to `digits` significant digits (497.3978 -> 497.4, 5.5498e-06 -> 5.55e-06);
    ints, strings and None unchanged; NaN or infinity become None (never written as NaN)."""
    if isinstance(value, bool) or not isinstance(value, float):
        return value
    if not math.isfinite(value):
        return None
    if value == 0.0:
        return 0.0
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def total_latency(latency: pd.DataFrame) -> list[float]:
    """Per answered query (one with a `generate` latency), the sum of its online stages' ms."""
    online = latency[latency["stage"].isin(ONLINE_STAGES)]
    answered = set(online.loc[online["stage"] == "generate", "qid"])
    per_query = online[online["qid"].isin(answered)].groupby("qid", sort=True)["latency_ms"].sum()
    return [float(v) for v in per_query]


def _get(tree: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(tree, dict) or key not in tree:
            return None
        tree = tree[key]
    return tree


def headline(metrics: dict[str, Any]) -> dict[str, Any]:
    """The short flat dict of `reports/run/headline.json`, keys always present and in this
    order; a value that was not measured (no k=10 configured, no scored answer) is None."""
    ret = metrics.get("retrieval", {})
    axes = _get(metrics, "scorecard", "axes") or {}
    out: dict[str, Any] = {
        "ndcg@10": ret.get("ndcg@10"),
        "recall@10": ret.get("recall@10"),
        "recall@100": ret.get("recall@100"),
        "mrr": ret.get("rr"),  # mean reciprocal rank over the whole ranking (ir_measures RR)
        "faithfulness": _get(axes, "faithfulness", "value"),
        "relevance": _get(axes, "relevance", "value"),
        "correctness": _get(axes, "correctness", "value"),
        "weighted": _get(metrics, "scorecard", "weighted"),
        "gate": _get(metrics, "scorecard", "gate"),
    }
    for stage in ("retrieve", "generate", TOTAL):
        out[f"{stage}_p95_ms"] = _get(metrics, "latency_ms", stage, "p95")
    out["cost_usd_per_query"] = _get(metrics, "cost_usd_per_query", "mean")
    out["n_queries"] = _get(metrics, "counts", "queries")
    return {k: rounded(v) for k, v in out.items()}


def latency_table(metrics: dict[str, Any]) -> pd.DataFrame:
    """One row per stage in pipeline order (`total` last): p50_ms, p95_ms, p99_ms."""
    lat = metrics.get("latency_ms", {})
    qs = ("p50", "p95", "p99")
    rows = [
        {"stage": s, **{f"{q}_ms": rounded(lat[s].get(q)) for q in qs}}
        for s in sorted(lat, key=lambda s: (s == TOTAL, stage_key(s)))
    ]
    return pd.DataFrame(rows, columns=["stage", *(f"{q}_ms" for q in qs)])


def recall_curve(
    rankings: dict[str, pd.DataFrame], qrels: pd.DataFrame, ks: tuple[int, ...] = CURVE_KS
) -> pd.DataFrame:
    """recall@k and nDCG@k (document level, scored queries) per k for each named run table
    (`final`, then each lane): columns k, then `recall_<name>`, `ndcg_<name>`."""
    from ragrig.metrics.ir import mean_measures, qrels_from_table, rankings_from_run

    q = qrels_from_table(qrels)
    measures = [f"{m}@{k}" for k in ks for m in ("recall", "ndcg")]
    table = pd.DataFrame({"k": list(ks)})
    for name, run in rankings.items():
        means = mean_measures(rankings_from_run(run), q, measures)
        for m in ("recall", "ndcg"):
            table[f"{m}_{name}"] = [rounded(means.get(f"{m}@{k}", math.nan)) for k in ks]
    return table


def run_tables(reranked: pd.DataFrame, lanes: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The curve's runs: the final (reranked) ranking, then each retrieval lane by name."""
    return {"final": reranked, **{str(n): g for n, g in lanes.groupby("lane", sort=True)}}


def write_views(
    metrics: dict[str, Any],
    rankings: dict[str, pd.DataFrame],
    qrels: pd.DataFrame,
    folder: Path,
) -> list[Path]:
    """headline.json, latency.csv and recall_at_k.csv in `folder` (the report's run folder)."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    head = folder / "headline.json"
    head.write_text(json.dumps(headline(metrics), indent=2) + "\n", encoding="utf-8")
    lat = folder / "latency.csv"
    latency_table(metrics).to_csv(lat, index=False)
    curve = folder / "recall_at_k.csv"
    recall_curve(rankings, qrels).to_csv(curve, index=False)
    return [head, lat, curve]


HEADLINE = "reports/run/headline.json"


def metrics_diff(root: Path, a_rev: str = "HEAD", b_rev: str | None = None) -> tuple[str, int]:
    """`dvc metrics diff a_rev [b_rev]` over the headline file, said plainly.

    DVC reads a revision's metrics through the dvc.lock committed there and the DVC cache; this
    project does not commit dvc.lock (or reports/), so on a fresh clone HEAD holds no metrics
    and DVC prints an empty table with only "failed to load some metrics". Returns the text to
    print and an exit code: 1 when the compared side (the workspace unless b_rev) has no
    headline yet, else 0 with a table whose missing side is `-` and a line saying why.
    """
    import json
    import subprocess

    new = b_rev or "workspace"
    if b_rev is None and not (root / HEADLINE).is_file():
        return (
            f"ragrig metrics-diff: the workspace has no {HEADLINE} yet: run `dvc repro` "
            "(or `make smoke` on the fixture) first",
            1,
        )
    cmd = ["dvc", "metrics", "diff", a_rev, *([b_rev] if b_rev else [])]
    cmd += ["--targets", HEADLINE, "--all", "--json"]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        return f"ragrig metrics-diff: {' '.join(cmd)} failed: {proc.stderr.strip()}", 1
    rows = json.loads(proc.stdout or "{}").get(HEADLINE, {})
    order = list(headline({}))  # the headline's key order, not DVC's
    names = sorted(rows, key=lambda k: (order.index(k) if k in order else len(order), k))
    if not names:
        return f"ragrig metrics-diff: neither {a_rev} nor {new} has {HEADLINE}", 1
    lines = []
    if all(rows[k].get("old") is None for k in names):
        lines.append(
            f"{a_rev} has no recorded metrics (its dvc.lock is not committed, or the outputs "
            f"it names are not in this DVC cache): {new} is shown against none. Commit dvc.lock "
            "after a run to make it the baseline, or compare two experiments: "
            "`ragrig metrics-diff <exp> <exp>`."
        )
    if all(rows[k].get("new") is None for k in names):
        lines.append(f"{new} has no recorded metrics: {a_rev} is shown against none.")

    def cell(v: Any) -> str:
        return "-" if v is None else str(v)

    table = [("metric", a_rev, new, "change")]
    for k in names:
        r = rows[k]
        table.append((k, cell(r.get("old")), cell(r.get("new")), cell(r.get("diff"))))
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in table]
    return "\n".join(lines), 0


# `dvc exp show` columns: the headline metrics (always), the params that differ between the
# experiments shown, nothing else. Column names are matched with re.match; a name two files
# share is prefixed with its file (`reports/run/headline.json:cost_usd_per_query`).
PARAM_SECTIONS = (
    "dataset",
    "parse",
    "chunk",
    "embed",
    "index",
    "retrieve",
    "rerank",
    "generate",
    "train_verifier",
    "judge",
    "report",
    "runtime",
)
# metrics.json entries whose names start like a params section (its `judge` and `rerank` parts)
FULL_METRICS_LIKE_PARAMS = (
    r"rerank\.delta_",
    r"judge\.(answer_support|claim_support|completion_tokens|cpu_s|faithfulness|llm_cached|llm_model"
    r"|llm_status|n_scored|no_claims|prompt_tokens|renormalised|weights_used)",
)


def exp_show_args() -> list[str]:
    """The arguments after `dvc exp show` that keep the swept params and the headline only."""
    keys = "|".join(re.escape(k) for k in headline({}))
    keep = rf"^((reports/run/headline\.json:)?({keys}))$"
    not_params = rf"^(?!Experiment$|Created$|(params\.yaml:)?({'|'.join(PARAM_SECTIONS)})\.)"
    also = rf"^({'|'.join(FULL_METRICS_LIKE_PARAMS)})"
    return ["--only-changed", "--keep", keep, "--drop", not_params, "--drop", also]


def exp_show_command() -> str:
    """The documented command line (docs/tracking.md), shell-quoted."""
    import shlex

    return shlex.join(["dvc", "exp", "show", *exp_show_args()])
