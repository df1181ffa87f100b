"""DVC's views over runs, from the command line: `ragrig metrics-diff` (the headline metrics
of two revisions) and `ragrig exp-show` (`dvc exp show` with the swept params and the
headline metrics only)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

from ragrig.report.views import headline

HEADLINE = "reports/run/headline.json"


def metrics_diff(root: Path, a_rev: str = "HEAD", b_rev: str | None = None) -> tuple[str, int]:
    """`dvc metrics diff a_rev [b_rev]` over the headline file, said plainly.

    DVC reads a revision's metrics through the dvc.lock committed there and the DVC cache; this
    project does not commit dvc.lock (or reports/), so on a fresh clone HEAD holds no metrics
    and DVC prints an empty table with only "failed to load some metrics". Returns the text to
    print and an exit code: 1 when the compared side (the workspace unless b_rev) has no
    headline yet, else 0 with a table whose missing side is `-` and a line saying why.
    """

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
# metrics.json entries whose names start like a params section (its `judge` and `rerank` parts):
# the judge's means and bookkeeping (`llm_...`, `techniques_...`: the params say `judge.llm.`)
FULL_METRICS_LIKE_PARAMS = (
    r"rerank\.delta_",
    r"judge\.(answer_support|claim_support|completion_tokens|cpu_s|faithfulness|llm_"
    r"|n_scored|no_claims|prompt_tokens|renormalised|weights_used|techniques_)",
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

    return shlex.join(["dvc", "exp", "show", *exp_show_args()])
