"""`ragrig traces`: a sample of logged interactions judged per time window, with intervals,
alerts on the floors' lower bounds, and drift against a reference window.

The file is streamed (ragrig.traces.read): memory holds the interactions waiting to be judged
(`batch`), and per window the judged sample's values, at most `drift.max_queries` questions and
`max_traces_per_window` traces, never the file.

Per window, on the judged sample (no qrels, no reference answers needed), the three axes as
the scorecard computes them offline, each with the parts that produced it:

* faithfulness: what the scorecard's axis reads (report.scorecard.faithfulness_reads): the
  judge's decision (judged faithful, at judge.decision_threshold with its vetoes) or its score;
  the same judge as the pipeline's (the params' judge section), against the contexts logged;
* relevance and correctness: ragrig.traces.axes (semantic similarity, keyword overlap and, with
  reviewed gold, context precision/recall; the reference-free correctness surrogates:
  self-consistency when the log holds samples, coverage, clarity);
* user feedback (the share of thumbs up) beside them, a signal and not an axis
  (ragrig.traces.signals measures how each signal tracks the axes);
* refusal rate, answer length (words), latency p50/p95.

Beside the windows, the review queue (ragrig.traces.queue): low-confidence and low-consistency
judged answers, every thumbs-down and a blind sample, for people to review (`ragrig label
--queue`).

Each axis has a bootstrap interval (report-wide seed and resamples); a window with at least
`min_per_window` values of an axis whose lower bound is below the floor is an alert naming the
slices below the floor. The other guardrails (latency, filter false exclusions, regenerations,
cost: ragrig.traces.guardrails) read every line of the window.
"""

from __future__ import annotations

import heapq
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragrig.traces.axes import (
    CORRECTNESS_PARTS,
    NOT_ONLINE,
    RELEVANCE_PARTS,
    OnlineAxes,
    Scored,
)
from ragrig.traces.guardrails import Check, Traffic, check_window, reference_band, slices_below
from ragrig.traces.queue import ReviewQueue
from ragrig.traces.read import Interaction, Problems, interactions, sample_key
from ragrig.traces.signals import Signals, WindowSignals

AXES = ("faithfulness", "relevance", "correctness")


@dataclass
class Window:
    start: float
    lines: int = 0
    judged: int = 0
    values: dict[str, list[float]] = field(default_factory=lambda: {a: [] for a in AXES})
    parts: dict[str, Counter] = field(default_factory=lambda: {a: Counter() for a in AXES})
    feedback: list[float] = field(default_factory=list)  # judged lines' thumbs (1 up, 0 down)
    signals: WindowSignals = field(default_factory=WindowSignals)  # every line's
    faith_score: list[float] = field(default_factory=list)
    lengths: list[float] = field(default_factory=list)
    refused: int = 0
    latencies: list[float] = field(default_factory=list)
    status: Counter = field(default_factory=Counter)
    queries: list[tuple[float, str]] = field(default_factory=list)  # max-heap by -key
    traces: list[dict[str, Any]] = field(default_factory=list)
    traffic: Traffic = field(default_factory=Traffic)  # every line, for the guardrails
    slices: dict[tuple[str, str], Traffic] = field(default_factory=dict)

    def observe(self, x: Interaction, doubt: Any) -> None:
        self.traffic.observe(x)
        self.signals.observe(x, doubt)
        for key in x.slices:
            t = self.slices.get(key)
            if t is None:
                t = self.slices[key] = Traffic()
            t.observe(x)


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%MZ")


@dataclass
class Judging:
    """What judges a batch: the params' judge and the scorecard's reading of it, and the
    relevance and correctness of the scorecard (`axes`)."""

    judge: Any
    weights: dict[str, float] | None
    threshold: float | None
    veto: Any
    reads: str  # decision | score
    axes: OnlineAxes
    method: str = ""  # the judge's, as the window table names faithfulness's method

    @classmethod
    def from_params(
        cls,
        params: Path,
        semantic: bool = True,
        runtime: str = "torch",
        embed_batch_size: int | None = None,
    ) -> Judging:
        """The params' judge; `semantic`: relevance's semantic part (the embed section's
        model) when its weight is not 0; `runtime="onnx"`: every verifier of the judge section
        through onnxruntime (ragrig.judge.config.onnx_verifiers); `embed_batch_size`: texts per
        embedder call (None: the embed section's)."""
        from ragrig.core.config import load_section
        from ragrig.judge import make_judge
        from ragrig.judge.config import onnx_verifiers

        jcfg = load_section("judge", params)
        if runtime == "onnx":
            jcfg = onnx_verifiers(jcfg)
        rcfg = load_section("report", params)
        if getattr(jcfg, "llm", None) is not None:
            from ragrig.core.errors import ConfigError

            raise ConfigError(
                "ragrig traces runs the deterministic judge: set judge.llm null (an LLM call "
                "per sampled interaction is a separate, priced job)"
            )
        return cls(
            make_judge(jcfg),
            dict(jcfg.weights) if getattr(jcfg, "weights", None) else None,
            getattr(jcfg, "decision_threshold", None),
            getattr(jcfg, "veto", None),
            rcfg.scorecard.faithfulness_reads,
            OnlineAxes.from_params(params, semantic, runtime, embed_batch_size),
            f"{jcfg.method} judge, {rcfg.scorecard.faithfulness_reads}",
        )

    def run(self, batch: list[Interaction]) -> pd.DataFrame:
        from ragrig.judge.step import judge_all

        gens = pd.DataFrame(
            {
                "qid": [str(i) for i in range(len(batch))],
                "status": ["ok" if x.answer.strip() else "empty" for x in batch],
                "answer": [x.answer for x in batch],
                "contexts": [json.dumps(x.contexts, ensure_ascii=False) for x in batch],
            }
        )
        queries = {str(i): x.question for i, x in enumerate(batch)}
        return judge_all(
            self.judge,
            gens,
            queries,
            progress=False,
            weights=self.weights,
            threshold=self.threshold,
            veto=self.veto,
        )


@dataclass
class Result:
    windows: pd.DataFrame
    drift: pd.DataFrame
    alerts: list[str]
    problems: Problems
    lines: int
    judged: int
    seconds: float
    traces: dict[float, list[dict[str, Any]]]
    checks: list[Check] = field(default_factory=list)
    signals: pd.DataFrame = field(default_factory=pd.DataFrame)
    methods: dict[str, Any] = field(default_factory=dict)  # what produced each axis
    queue: ReviewQueue | None = None  # what people should review (ragrig.traces.queue)


def evaluate(
    path: Path,
    cfg: Any,
    judging: Judging,
    embedder: Any | None = None,
    progress: bool = True,
) -> Result:
    """Stream `path`, judge the sample, and summarise each window (module doc)."""
    import time

    from ragrig.core.progress import bar

    t0 = time.perf_counter()
    width = cfg.window_minutes * 60
    windows: dict[float, Window] = {}
    problems = Problems()
    pending: list[tuple[Interaction, float]] = []
    lines = 0
    signals = Signals(cfg.signals)
    queue = ReviewQueue(cfg.queue, judging.threshold)

    def flush() -> None:
        if not pending:
            return
        batch = [x for x, _ in pending]
        judged = judging.run(batch).to_dict("records")
        scored = judging.axes.score(batch, [j.get("answer_kind") == "refusal" for j in judged])
        for (x, key), j, sc in zip(pending, judged, scored, strict=True):
            w = windows[x.ts // width * width]
            values = absorb(w, x, key, j, sc, cfg, judging.reads, judging.veto)
            signals.judged(x, values)
            queue.judged(x, j, sc.correctness_parts, values)
        pending.clear()

    with bar("traces", None, "lines", on=progress) as b:
        for _, x in interactions(path, problems):
            lines += 1
            start = x.ts // width * width
            w = windows.get(start)
            if w is None:
                w = windows[start] = Window(start)
            w.lines += 1
            w.observe(x, signals.doubt)
            signals.line(x)
            queue.line(x)
            b.update(1)
            key = sample_key(x.id, cfg.seed)
            if key >= cfg.sample_rate:
                continue
            pending.append((x, key))
            if len(pending) >= cfg.batch:
                flush()
        flush()
    ordered = [windows[k] for k in sorted(windows)]
    table, alerts, checks = summarise(ordered, cfg)
    drift = drift_table(ordered, cfg, embedder)
    return Result(
        table,
        drift,
        alerts,
        problems,
        lines + problems.total,
        int(table["judged"].sum()) if len(table) else 0,
        time.perf_counter() - t0,
        {w.start: w.traces for w in ordered},
        checks,
        signals.table(cfg.level),
        methods(ordered, judging),
        queue,
    )


def methods(windows: list[Window], judging: Judging) -> dict[str, Any]:
    """What produced each axis over the whole log: the judge, and the parts relevance and
    correctness read (with on how many values); what no log line can give."""
    out: dict[str, Any] = {"faithfulness": judging.method}
    for axis in ("relevance", "correctness"):
        total: Counter = Counter()
        for w in windows:
            total.update(w.parts[axis])
        out[axis] = parts_text(axis, total, sum(len(w.values[axis]) for w in windows))
    out["not online"] = dict(NOT_ONLINE)
    return out


def absorb(
    w: Window,
    x: Interaction,
    key: float,
    j: dict,
    scored: Scored,
    cfg: Any,
    reads: str,
    veto: Any = None,
) -> dict[str, float | None]:
    """One judged interaction into its window; returns its axis values. Its trace's rationale
    names why an unfaithful answer is so (ragrig.metrics.reasons, `veto` the judge's vetoed
    kinds)."""
    from ragrig.dataset.labels import answer_sha256
    from ragrig.metrics.reasons import deciding, rationale
    from ragrig.tracking.contents import TAG_ANSWER_SHA, TAG_QID

    w.judged += 1
    status = str(j["status"])
    w.status[status] += 1
    decision = j.get("judged_faithful")
    decision = None if decision is None or decision != decision else float(decision)
    score = j.get("faithfulness")
    score = None if score is None or score != score else float(score)
    values: dict[str, float | None] = dict.fromkeys(AXES)
    if status == "scored":
        values["faithfulness"] = decision if reads == "decision" and decision is not None else score
        if score is not None:
            w.faith_score.append(score)
    values["relevance"], values["correctness"] = scored.relevance, scored.correctness
    w.parts["relevance"].update(scored.relevance_parts.keys())
    w.parts["correctness"].update(scored.correctness_parts.keys())
    for axis, value in values.items():
        if value is None:
            continue
        w.values[axis].append(value)
        for part in x.slices:
            w.slices[part].axes.setdefault(axis, []).append(value)
    if x.feedback is not None:
        w.feedback.append(x.feedback)
    w.lengths.append(float(len(x.answer.split())))
    w.refused += int(j.get("answer_kind") == "refusal")
    if x.latency_ms is not None:
        w.latencies.append(x.latency_ms)
    if len(w.queries) < cfg.drift.max_queries:
        heapq.heappush(w.queries, (-key, x.question))
    elif -w.queries[0][0] > key:
        heapq.heapreplace(w.queries, (-key, x.question))
    if len(w.traces) < cfg.max_traces_per_window:
        mode = str(j.get("failure_mode") or "")
        reason = deciding(j.get("claims"), j.get("contradictions"), mode, veto)
        judged = None if decision is None else bool(decision >= 0.5)
        w.traces.append(
            {
                "qid": x.id,
                "inputs": {"question": x.question, "passages": x.contexts},
                "outputs": {"answer": x.answer},
                "tags": {TAG_QID: x.id, TAG_ANSWER_SHA: answer_sha256(x.answer)},
                "status": "ok" if x.answer.strip() else "empty",
                "judged_faithful": judged,
                "rationale": rationale(
                    judged, reason, int(j.get("n_claims") or 0), int(j.get("n_supported") or 0)
                ),
                "metadata": reason.metadata() if reason is not None and judged is False else {},
            }
        )
    return values


def _interval(values: list[float], cfg: Any) -> tuple[float | None, float | None, float | None]:
    from ragrig.metrics.bootstrap import bootstrap_ci

    if not values:
        return None, None, None
    low, high = bootstrap_ci(values, cfg.seed, cfg.resamples, 1.0 - cfg.level)
    return float(np.mean(values)), low, high


def parts_text(axis: str, parts: Counter, n: int) -> str:
    """The parts an axis read and on how many of its n values, in the axis's order of parts:
    "semantic 40/40, keyword 40/40"."""
    order = RELEVANCE_PARTS if axis == "relevance" else CORRECTNESS_PARTS
    return ", ".join(f"{k} {parts[k]}/{n}" for k in order if parts[k])


def summarise(windows: list[Window], cfg: Any) -> tuple[pd.DataFrame, list[str], list[Check]]:
    """The window table, the alert lines (the axes' floors, then the other guardrails, window by
    window) and every guardrail's and axis's check."""
    rows, alerts, checks = [], [], []
    band = reference_band([w.traffic for w in windows], cfg, cfg.min_per_window)
    for w in windows:
        row: dict[str, Any] = {
            "window": iso(w.start),
            "lines": w.lines,
            "judged": w.judged,
            "judge_errors": w.status.get("error", 0) + w.status.get("invalid", 0),
        }
        for axis in AXES:
            mean, low, high = _interval(w.values[axis], cfg)
            n = len(w.values[axis])
            row.update({f"{axis}": mean, f"{axis}_low": low, f"{axis}_high": high, f"{axis}_n": n})
            if axis != "faithfulness":
                row[f"{axis}_parts"] = parts_text(axis, w.parts[axis], n)
            floor = cfg.floors.get(axis)
            if floor is None or low is None:
                if floor is not None:
                    checks.append(Check(iso(w.start), axis, None, f"< {floor:g}", 0, "not logged"))
                continue
            alert = n >= cfg.min_per_window and low < floor
            named = slices_below(w.slices, cfg, axis, floor) if alert else ()
            status = "alert" if alert else "ok" if n >= cfg.min_per_window else "too few"
            bound = f"< {floor:g} (interval lower bound {low:.4f})"
            checks.append(Check(iso(w.start), axis, mean, bound, n, status, named))
            if alert:
                slices = f"; slices: {', '.join(named)}" if named else ""
                alerts.append(
                    f"ALERT window {iso(w.start)}: {axis} {mean:.4f} [{low:.4f}, {high:.4f}] "
                    f"(n={n}), lower bound below the floor {floor:.2f}{slices}"
                )
        row["faithfulness_score"] = float(np.mean(w.faith_score)) if w.faith_score else None
        mean, low, high = _interval(w.feedback, cfg)
        row.update(feedback_up=mean, feedback_up_low=low, feedback_up_high=high)
        row["feedback_n"] = len(w.feedback)
        row.update(w.signals.row())
        row["refusal_rate"] = w.refused / w.judged if w.judged else None
        row["answer_words"] = float(np.mean(w.lengths)) if w.lengths else None
        lat = np.asarray(w.latencies)
        row["latency_p50_ms"] = float(np.percentile(lat, 50)) if len(lat) else None
        row["latency_p95_ms"] = float(np.percentile(lat, 95)) if len(lat) else None
        row["too_few_to_alert"] = w.judged < cfg.min_per_window
        row["regeneration_rate"] = w.traffic.regenerations / w.traffic.n if w.traffic.n else None
        row["cost_mean_usd"] = float(np.mean(w.traffic.cost)) if len(w.traffic.cost) else None
        rows.append(row)
        guard = check_window(iso(w.start), w.traffic, w.slices, cfg, cfg.min_per_window, band)
        checks += guard
        alerts += [c.line() for c in guard if c.status == "alert"]
    return pd.DataFrame(rows), alerts, checks


def drift_table(windows: list[Window], cfg: Any, embedder: Any | None) -> pd.DataFrame:
    """Each window against the reference (the first with `min_per_window` judged)."""
    from ragrig.traces.drift import length_test, mmd_test, refusal_test, slice_test

    ref = next((w for w in windows if w.judged >= cfg.min_per_window), None)
    cols = ["window", "reference", "query_mmd2", "query_p", "slice_p", "slice_shift",
            "answer_length_p", "refusal_p", "drift"]  # fmt: skip
    if ref is None:
        return pd.DataFrame(columns=cols)

    def vectors(w: Window) -> np.ndarray:
        texts = [q for _, q in sorted(w.queries, key=lambda t: -t[0])]
        return np.asarray(embedder.encode(texts), dtype=np.float64)

    ref_vec = vectors(ref) if embedder is not None and cfg.drift.queries else None
    rows = []
    for w in windows:
        if w is ref or not w.judged:
            continue
        mmd = p_query = None
        if ref_vec is not None and len(w.queries) >= 2:
            mmd, p_query = mmd_test(ref_vec, vectors(w), cfg.drift.permutations, cfg.seed)
        p_len = length_test(ref.lengths, w.lengths)
        p_ref = refusal_test(ref.refused, ref.judged, w.refused, w.judged)
        p_slice, shift = slice_test(
            {k: t.n for k, t in ref.slices.items()}, {k: t.n for k, t in w.slices.items()}
        )
        ps = [p for p in (p_query, p_slice, p_len, p_ref) if p is not None]
        rows.append(
            {
                "window": iso(w.start),
                "reference": iso(ref.start),
                "query_mmd2": mmd,
                "query_p": p_query,
                "slice_p": p_slice,
                "slice_shift": shift,
                "answer_length_p": p_len,
                "refusal_p": p_ref,
                "drift": ", ".join(
                    name
                    for name, p in (
                        ("queries", p_query),
                        ("slices", p_slice),
                        ("answer length", p_len),
                        ("refusals", p_ref),
                    )  # fmt: skip
                    if p is not None and p < cfg.drift.alpha
                )
                if ps
                else "",
            }
        )
    return pd.DataFrame(rows, columns=cols)


def fmt(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}"
