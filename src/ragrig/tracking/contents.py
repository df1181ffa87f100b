"""What one report's MLflow run contains: its name, tags, params, metrics, the per-query answers
table, and the runs-table view (default columns) it belongs to. Pure: no MLflow import, no store.

A sweep point (environment variables set by `ragrig.sweep`) becomes a child of the sweep's
parent run, named after its swept values; any other run is top-level and named after its
non-default choices (against the committed params.yaml, the default composition of conf/).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ragrig.metrics.aggregate import flatten, mlflow_key

ENV_PARENT = "RAGRIG_SWEEP_PARENT_RUN_ID"
ENV_POINT = "RAGRIG_SWEEP_POINT"
TAG_PARENT = "mlflow.parentRunId"
TAG_SWEEP_POINT = "ragrig.sweep_point"
TAG_LOGGED_ARTIFACTS = "mlflow.loggedArtifacts"  # what mlflow.log_table records
ANSWERS_TABLE = "answers.json"  # per-query table, rendered as a table by the MLflow UI
# The runs-table views (shared view state of the MLflow UI: an experiment tag
# `mlflow.sharedViewState.<key>` holding the table's columns, opened with
# `?viewStateShareKey=<key>`).
VIEW_TAG_PREFIX = "mlflow.sharedViewState."
DEFAULT_VIEW = "ragrig"
# the columns a user sees first (MLflow metric keys), in this order; sorted by the first
HEADLINE_METRICS = (
    "retrieval/ndcg_at_10",
    "retrieval/recall_at_100",
    "judge/faithfulness",
    "scorecard/weighted",
    "latency_ms/retrieve/p95",
    "latency_ms/generate/p95",
    "cost_usd_per_query/mean",
)
MAX_NAME = 120
LONG_VALUE = 40  # a longer changed value is named `key=…` in a run name
PASSAGE_CHARS = 160


@dataclass(frozen=True)
class RunContents:
    name: str
    tags: dict[str, str]
    params: dict[str, str]
    metrics: dict[str, float]
    artifacts: list[Path] = field(default_factory=list)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # artifact file -> rows
    # one MLflow trace per answer (answer_traces), with the judge's feedback on it
    traces: list[dict[str, Any]] = field(default_factory=list)
    # the views (runs-table default columns) this run adds its params to
    view_keys: tuple[str, ...] = (DEFAULT_VIEW,)
    view_params: list[str] = field(default_factory=list)  # param columns of the view


def params_hash(params: Mapping[str, Any]) -> str:
    """The configuration's identity, leaving out report.mlflow (where its run is logged): the
    same point logged from two machines spelling the store differently has one hash."""
    report = params.get("report")
    if isinstance(report, Mapping) and "mlflow" in report:
        params = {**params, "report": {k: v for k, v in report.items() if k != "mlflow"}}
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()


def flatten_params(params: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in params.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            out.update(flatten_params(value, name))
        else:
            out[mlflow_key(name)] = (
                json.dumps(value) if isinstance(value, list | type(None)) else str(value)
            )
    return out


def git_commit(cwd: Path) -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def committed_params(cwd: Path) -> dict[str, Any] | None:
    """params.yaml as committed at HEAD (the default composition of conf/: a test keeps them
    equal), also inside DVC's temporary experiment copies; None outside a git checkout."""
    import yaml

    try:
        text = subprocess.run(
            ["git", "show", "HEAD:params.yaml"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    data = yaml.safe_load(text)
    return data if isinstance(data, dict) else None


def _same_root(a: str | None, b: str | None, cwd: Path) -> bool:
    """dataset.root values naming the same folder (the sweep makes relative roots absolute)."""
    if a is None or b is None:
        return a == b
    from ragrig.core.paths import project_root

    root = project_root(cwd)
    return (root / a).resolve() == (root / b).resolve()


# keys naming a section's choice (its config group option): when one changed, the section's
# other changed keys are consequences of that choice, not choices of their own
CHOICE_KEYS = ("method", "name")
IGNORED = ("report.mlflow.",)  # where the run is logged, not what it measures


def _norm(value: str | None) -> str | None:
    """A flattened value compared regardless of the key order inside lists of mappings."""
    if value is None or not value.startswith(("[", "{")):
        return value
    try:
        return json.dumps(json.loads(value), sort_keys=True)
    except json.JSONDecodeError:
        return value


def option_params(conf_dir: Path, section: str, key: str, value: str) -> dict[str, str] | None:
    """Flattened params of the one option of config group `section` (conf/<section>/*.yaml)
    whose `key` is `value` (e.g. retrieve options with method: dense); None when not exactly
    one option matches."""
    import yaml

    folder = conf_dir / section.replace(".", "/")
    found = []
    for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and str(data.get(key)) == value:
            found.append(data)
    return flatten_params(found[0], section) if len(found) == 1 else None


def changed_params(
    params: Mapping[str, Any], defaults: Mapping[str, Any], cwd: Path
) -> dict[str, str]:
    """Flattened params whose value differs from the defaults (added keys included), in
    params order, leaving out report.mlflow.* and a dataset.root naming the same folder.
    When a section's choice (`method`, `dataset.name`) changed, its other keys count only where
    they differ from that option's own values in conf/ (or, with no such option file, where
    the defaults have them too)."""
    from ragrig.core.paths import project_root

    flat, base = flatten_params(params), flatten_params(defaults)
    diff = {}
    for k, v in flat.items():
        if _norm(base.get(k)) == _norm(v) or k.startswith(IGNORED):
            continue
        if k == "dataset.root" and _same_root(v, base.get(k), cwd):
            continue
        diff[k] = v
    conf = project_root(cwd) / "conf"
    options: dict[str, dict[str, str] | None] = {}
    for k, v in diff.items():
        section, _, last = k.rpartition(".")
        if last in CHOICE_KEYS and section:
            options[section + "."] = option_params(conf, section, last, v)
    out = {}
    for k, v in diff.items():
        owner = next((s for s in options if k.startswith(s)), None)
        if owner is not None and k.rpartition(".")[2] not in CHOICE_KEYS:
            own = options[owner]
            consequence = _norm(own.get(k)) == _norm(v) if own is not None else k not in base
            if consequence:
                continue
        out[k] = v
    return out


def short_label(changed: Mapping[str, str]) -> str:
    """`retrieve=dense chunk=recursive max_tokens=256`: a section's choice (`method`,
    `dataset.name`) as `section=value`,
    another key by its last part when no other changed key shares it, else in full; a value
    longer than 40 characters as `…`."""
    lasts = [k.rsplit(".", 1)[-1] for k in changed]
    parts = []
    for k, v in changed.items():
        v = v if len(v) <= LONG_VALUE else "…"  # e.g. a changed list of slices
        head, _, last = k.rpartition(".")
        if last in CHOICE_KEYS and head:
            parts.append(f"{head}={v}")
        elif lasts.count(last) == 1:
            parts.append(f"{last}={v}")
        else:
            parts.append(f"{k}={v}")
    return " ".join(parts)


def _clip(label: str) -> str:
    if len(label) <= MAX_NAME:
        return label
    cut = label[: MAX_NAME - 12].rsplit(" ", 1)[0]
    return f"{cut} (+{len(label.split()) - len(cut.split())} more)"


def point_param_keys(point: str, flat: Mapping[str, str]) -> list[str]:
    """The params a sweep point label names (`chunk=recursive ef_search=64`,
    `index/dense=flat`, `retrieve.ef_search=64`): the key itself, a config group's `method`,
    or the one param whose last part is the key."""
    keys = []
    for item in point.split():
        key = item.split("=", 1)[0].lstrip("+~").replace("/", ".")
        if key in flat:
            keys.append(key)
        elif f"{key}.method" in flat:
            keys.append(f"{key}.method")
        else:
            found = [k for k in flat if k.rsplit(".", 1)[-1] == key]
            if len(found) == 1:
                keys.append(found[0])
    return list(dict.fromkeys(keys))


def sweep_view_key(parent_run_id: str) -> str:
    return f"sweep-{parent_run_id}"


def build_contents(
    params: Mapping[str, Any],
    metrics: Mapping[str, Any],
    cwd: Path,
    *,
    artifacts: list[Path] | None = None,
    answers: pd.DataFrame | None = None,
    environ: Mapping[str, str] | None = None,
    tags: Mapping[str, str] | None = None,
    traces: list[dict[str, Any]] | None = None,
) -> RunContents:
    """Everything one run logs, from the report's params and metrics tree; `tags` are added
    (e.g. precision_tags: what each torch model ran in, and the CPU that decided it)."""
    env = os.environ if environ is None else environ
    parent = env.get(ENV_PARENT, "").strip()
    point = env.get(ENV_POINT, "").strip()
    p_hash = params_hash(dict(params))
    flat = flatten_params(params)
    tags = {
        "git_commit": git_commit(cwd),
        "params_hash": p_hash,
        "dvc_exp_name": env.get("DVC_EXP_NAME", ""),
        **dict(tags or {}),
    }
    if parent:
        tags[TAG_PARENT] = parent
    if point:
        tags[TAG_SWEEP_POINT] = point
    defaults = committed_params(cwd)
    changed = changed_params(params, defaults, cwd) if defaults is not None else {}
    if point:
        name = point
        view_params = point_param_keys(point, flat)
    elif defaults is not None:
        name = short_label(changed) or "default"
        view_params = list(changed)
    else:
        data = params.get("dataset", {}).get("name", "data")
        name = f"{data}-{params.get('retrieve', {}).get('method', '')}-{p_hash[:8]}"
        view_params = []
    tables = {}
    if answers is not None:
        tables[ANSWERS_TABLE] = answers
        tags[TAG_LOGGED_ARTIFACTS] = json.dumps([{"path": ANSWERS_TABLE, "type": "table"}])
    return RunContents(
        name=_clip(name),
        tags=tags,
        params=flat,
        metrics=flatten(metrics),
        artifacts=list(artifacts or []),
        tables=tables,
        view_keys=(DEFAULT_VIEW, sweep_view_key(parent)) if parent else (DEFAULT_VIEW,),
        view_params=[k for k in view_params if k != "dataset.root"],
        traces=list(traces or []),
    )


def column(kind: str, key: str) -> str:
    """A runs-table column id as the MLflow UI spells it: metrics.`retrieval/ndcg_at_10`."""
    return f"{kind}.`{key}`"


def view_state(
    metric_keys: list[str], param_keys: list[str], previous: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The runs-table state the MLflow UI restores from a shared view: the headline metrics
    present, then the given params (added after those of `previous`), sorted by the first
    metric, best first."""
    metrics = [m for m in HEADLINE_METRICS if m in metric_keys]
    old = [c for c in (previous or {}).get("selectedColumns", []) if c.startswith("params.")]
    params = list(dict.fromkeys([*old, *(column("params", k) for k in param_keys)]))
    columns = [*(column("metrics", m) for m in metrics), *params]
    state: dict[str, Any] = {
        "selectedColumns": columns,
        "columnOrder": columns,
        "orderByAsc": False,
        "runListHidden": False,
        "viewMaximized": False,
    }
    if metrics:
        state["orderByKey"] = column("metrics", metrics[0])
    return state


def _passages(ids: str, texts: str) -> str:
    """'[1] d01#0: Mars moons. Mars has two…' one line per passage."""
    id_list, text_list = json.loads(ids or "[]"), json.loads(texts or "[]")
    lines = []
    for i, (pid, text) in enumerate(zip(id_list, text_list, strict=False), start=1):
        t = " ".join(str(text).split())
        t = t if len(t) <= PASSAGE_CHARS else t[: PASSAGE_CHARS - 1] + "…"
        lines.append(f"[{i}] {pid}: {t}")
    return "\n".join(lines)


def _unsupported(claims: str) -> str:
    try:
        items = json.loads(claims or "[]")
    except json.JSONDecodeError:
        return ""
    return "\n".join(
        str(c.get("claim", "")) for c in items if isinstance(c, dict) and not c.get("supported")
    )


def answers_table(
    queries: pd.DataFrame,
    generations: pd.DataFrame,
    judgments: pd.DataFrame,
    scorecard: pd.DataFrame | None,
) -> pd.DataFrame:
    """One row per generated answer: question, passages (ids and short text), answer, the
    judge's verdict and scores, and the scorecard's axes, gate and diagnosis."""
    q = queries[["qid", "text"]].rename(columns={"text": "question"})
    g = generations[["qid", "status", "answer", "context_chunk_ids", "contexts", "citations"]]
    g = g.rename(columns={"status": "generation_status"})
    j_cols = [
        c
        for c in (
            "qid",
            "status",
            "answer_kind",
            "faithfulness",
            "claim_support",
            "n_claims",
            "n_supported",
            "claims",
            "llm_faithfulness",
        )
        if c in judgments.columns
    ]
    j = judgments[j_cols].rename(columns={"status": "judge_status"})
    out = g.merge(q, on="qid", how="left").merge(j, on="qid", how="left")
    out["passages"] = [
        _passages(i, t) for i, t in zip(out["context_chunk_ids"], out["contexts"], strict=True)
    ]
    out["unsupported_claims"] = out["claims"].fillna("[]").map(_unsupported)
    if scorecard is not None and len(scorecard):
        sc = scorecard.drop(columns=["faithfulness"], errors="ignore").copy()
        sc["qid"] = sc["qid"].astype(str)
        out = out.merge(sc, on="qid", how="left")
    out = out.drop(columns=["context_chunk_ids", "contexts", "claims"])
    first = ["qid", "question", "passages", "answer", "generation_status", "judge_status"]
    ordered = first + [c for c in out.columns if c not in first]
    return out[ordered].sort_values("qid", kind="mergesort").reset_index(drop=True)


# the feedback a person adds to an answer's trace in the MLflow UI to label it (read back by
# `ragrig label --from-mlflow`), and the judge's own under the same name
FEEDBACK_NAME = "faithful"
TAG_QID, TAG_ANSWER_SHA = "ragrig.qid", "ragrig.answer_sha256"


def answer_traces(
    queries: pd.DataFrame,
    generations: pd.DataFrame,
    judgments: pd.DataFrame,
    veto: Collection[str] | None = None,
) -> list[dict[str, Any]]:
    """One trace per generated answer: the question and its passages in, the answer out,
    tagged with the question id and the answer's sha256 (the labels file's key,
    ragrig.dataset.labels), and the judge's decision as feedback (None: undecided, no feedback)
    with its rationale: for an unfaithful answer the deciding claim, its verdict, the evidence
    read and the failure mode (ragrig.metrics.reasons; `veto`: the judge's vetoed kinds), also
    as the feedback's metadata."""
    from ragrig.dataset.labels import answer_sha256
    from ragrig.metrics.reasons import deciding, rationale

    question = dict(zip(queries["qid"].astype(str), queries["text"], strict=True))
    judged = {str(r["qid"]): r for r in judgments.to_dict("records")}
    out = []
    for g in generations.to_dict("records"):
        qid = str(g["qid"])
        j = judged.get(qid, {})
        decision = j.get("judged_faithful") if j.get("status") == "scored" else None
        decision = None if decision is None or decision != decision else bool(decision >= 0.5)
        mode = str(j.get("failure_mode") or "")
        reason = deciding(j.get("claims"), j.get("contradictions"), mode, veto)
        out.append(
            {
                "qid": qid,
                "inputs": {
                    "question": str(question.get(qid, "")),
                    "passages": json.loads(g["contexts"] or "[]"),
                },
                "outputs": {"answer": str(g["answer"])},
                "tags": {TAG_QID: qid, TAG_ANSWER_SHA: answer_sha256(str(g["answer"]))},
                "status": str(g["status"]),
                "judged_faithful": decision,
                "rationale": rationale(
                    decision, reason, int(j.get("n_claims") or 0), int(j.get("n_supported") or 0)
                ),
                "metadata": reason.metadata() if reason is not None and decision is False else {},
            }
        )
    return out


def precision_tags(decisions: Mapping[str, Mapping[str, Any] | None]) -> dict[str, str]:
    """Run tags from the stages' manifests `precision_decision` (ragrig.weights.precision
    .precision_record), stage -> record or None: `precision.<stage>` "bf16 (auto)" or "fp32",
    and the CPU model and its bf16 flags once (and a oneDNN ISA cap, when one was set), so two
    runs that differ only by machine say why their last bits differ."""
    tags: dict[str, str] = {}
    for stage, record in sorted(decisions.items()):
        if not record:
            continue
        how = " (auto)" if record.get("requested") == "auto" else ""
        tags[f"precision.{stage}"] = f"{record.get('resolved')}{how}"
        tags["cpu"] = str(record.get("cpu", ""))
        tags["cpu.bf16_flags"] = ",".join(record.get("cpu_bf16_flags", [])) or "none"
        if record.get("onednn_max_cpu_isa"):
            tags["cpu.onednn_max_isa"] = str(record["onednn_max_cpu_isa"])
    return tags
