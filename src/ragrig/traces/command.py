"""`ragrig traces FILE`: evaluate logged interactions (ragrig.traces.evaluate), write the window
table, the drift table and a plot, log one MLflow run per window with its traces, print the
summary; exit 1 naming each window whose floor was crossed."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ragrig.traces.config import TracesConfig
from ragrig.traces.evaluate import AXES, Judging, Result, evaluate, fmt


def load_config(path: Path | None) -> TracesConfig:
    """conf/traces.yaml (or `path`); no file at the default path: the defaults."""
    from ragrig.core.config import load_config_file

    return load_config_file(TracesConfig, path, "conf/traces.yaml")


def query_embedder(params: Path, runtime: str = "torch", batch_size: int | None = None) -> Any:
    from ragrig.traces.embedder import embed_section, section_embedder

    return section_embedder(embed_section(params, batch_size), "query", runtime)


def write_outputs(result: Result, cfg: TracesConfig, out: Path, source: Path) -> list[Path]:
    from ragrig.core.io import atomic_write_text
    from ragrig.traces.guardrails import junit

    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "windows.csv", out / "drift.csv", out / "signals.csv"]
    result.windows.to_csv(paths[0], index=False, float_format="%.6f")
    result.drift.to_csv(paths[1], index=False, float_format="%.6g")
    result.signals.to_csv(paths[2], index=False, float_format="%.6f")
    if result.queue is not None:
        paths.append(result.queue.write(out / "review_queue.jsonl"))
    summary = {
        "file": str(source),
        "lines": result.lines,
        "left_out": dict(result.problems.counts),
        "kept_with_a_note": dict(result.problems.noted),
        "judged": result.judged,
        "seconds": round(result.seconds, 3),
        "alerts": result.alerts,
        "guardrails": [c.record() for c in result.checks],
        "methods": result.methods,
        "signals": json.loads(result.signals.to_json(orient="records")),
        "review_queue": result.queue.summary() if result.queue is not None else None,
        "config": cfg.model_dump(),
        # what ran the models: with runtime onnx no torch is imported (its ~300 MB resident)
        "models": {"runtime": cfg.runtime, "torch_imported": "torch" in sys.modules},
    }
    paths.append(out / "traces.json")
    atomic_write_text(paths[-1], json.dumps(summary, indent=2) + "\n")
    # for a scheduler or CI: one test case per window and guardrail, an alert a failure
    paths.append(out / "guardrails.junit.xml")
    atomic_write_text(paths[-1], junit(result.checks))
    if len(result.windows):
        paths.append(plot(result, cfg, out / "windows.png"))
    return paths


def plot(result: Result, cfg: TracesConfig, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    w = result.windows
    fig, axes = plt.subplots(len(AXES), 1, figsize=(9, 2.4 * len(AXES)), sharex=True)
    x = range(len(w))
    for ax, axis in zip(axes, AXES, strict=True):
        y = w[axis].astype(float)
        ax.plot(x, y, marker="o", label=axis)
        ax.fill_between(x, w[f"{axis}_low"].astype(float), w[f"{axis}_high"].astype(float),
                        alpha=0.25)  # fmt: skip
        if axis in cfg.floors:
            ax.axhline(cfg.floors[axis], color="red", linestyle="--", linewidth=1)
        ax.set_ylabel(axis)
        ax.set_ylim(0, 1.02)
    axes[-1].set_xticks(list(x), w["window"], rotation=45, ha="right", fontsize=7)
    fig.suptitle(f"{cfg.level:.0%} intervals per window; dashed: the floor")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def log_windows(result: Result, cfg: TracesConfig, params: Path, source: Path, cwd: Path) -> int:
    """One MLflow run per window (params, metrics, its traces with the judge's feedback)."""
    import dataclasses

    from ragrig.core.config import load_section
    from ragrig.tracking.contents import build_contents
    from ragrig.tracking.run import configure, log_contents

    uri = configure(load_section("report", params).mlflow, cwd)
    drift = {r["window"]: r for r in result.drift.to_dict("records")}
    starts = sorted(result.traces)
    for row, start in zip(result.windows.to_dict("records"), starts, strict=True):
        metrics = {
            k: v
            for k, v in row.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and v == v
        }
        for k in ("query_mmd2", "query_p", "slice_p", "answer_length_p", "refusal_p"):
            v = drift.get(row["window"], {}).get(k)
            if v is not None and v == v:
                metrics[f"drift/{k}"] = v
        metrics["alert"] = float(any(row["window"] in a for a in result.alerts))
        contents = build_contents(
            {"traces": {"file": str(source), "window": row["window"], **cfg.model_dump()}},
            metrics,
            cwd,
            tags={"ragrig.traces.window": row["window"]},
            traces=result.traces[start],
        )
        log_contents(
            uri, cfg.experiment, dataclasses.replace(contents, name=f"window {row['window']}")
        )
    return len(starts)


def summary_lines(result: Result, cfg: TracesConfig, source: Path) -> list[str]:
    out = [
        f"traces {source}: {result.lines:,} lines, {result.problems.total:,} left out, "
        f"{result.judged:,} judged (sample {cfg.sample_rate:g}) in {result.seconds:.1f} s "
        f"({result.lines / max(result.seconds, 1e-9):,.0f} lines/s)",
    ]
    out += [f"  left out: {line}" for line in result.problems.lines(source)]
    out += [
        f"  kept, noted: {line}" for line in result.problems.lines(source, result.problems.noted)
    ]
    head = f"{'window':<18} {'judged':>6}  " + "  ".join(f"{a:<24}" for a in AXES) + " refusals"
    out += ["", head]
    for r in result.windows.to_dict("records"):
        cells = []
        for a in AXES:
            v = r[a]
            cells.append(
                f"{fmt(v)} [{fmt(r[f'{a}_low'], 2)}, {fmt(r[f'{a}_high'], 2)}] n={r[f'{a}_n']}"
                if v is not None and v == v
                else "n/a"
            )
        out.append(
            f"{r['window']:<18} {r['judged']:>6}  " + "  ".join(f"{c:<24}" for c in cells)
            + f" {fmt(r['refusal_rate'], 3)}"
        )  # fmt: skip
    methods = result.methods
    out.append(f"faithfulness: {methods['faithfulness']}")
    for axis in ("relevance", "correctness"):
        out.append(
            f"{axis}: {methods[axis] or 'no part had a value'}; not online: {methods['not online'][axis]}"
        )
    out += signal_lines(result)
    if result.queue is not None:
        q = result.queue.summary()
        reasons = ", ".join(f"{r} {n}" for r, n in q["by_reason"].items() if n)
        out.append(
            f"review queue: {q['items']} interactions ({reasons or 'none'}; "
            f"{q['by_split']['release']} release, {q['by_split']['monitoring']} monitoring): "
            "ragrig label --queue review_queue.jsonl"
        )
    drifted = [r for r in result.drift.to_dict("records") if r["drift"]]
    if len(result.drift):
        out.append("")
        out.append(
            f"drift against {result.drift['reference'].iloc[0]}: "
            f"{len(drifted)} of {len(result.drift)} windows (p < {cfg.drift.alpha:g})"
        )
        out += [
            f"  {r['window']}: {r['drift']} (query p {fmt(r['query_p'])}, slice p "
            f"{fmt(r['slice_p'])}{' ' + r['slice_shift'] if r['slice_shift'] else ''}, "
            f"answer length p {fmt(r['answer_length_p'])}, refusals p {fmt(r['refusal_p'])})"
            for r in drifted
        ]
    counts = {}
    for c in result.checks:
        counts.setdefault(c.guardrail, {}).setdefault(c.status, 0)
        counts[c.guardrail][c.status] += 1
    if counts:
        out.append("")
        out.append("guardrails (windows): " + "; ".join(
            f"{g} " + ", ".join(f"{n} {s}" for s, n in sorted(by.items()))
            for g, by in counts.items()
        ))  # fmt: skip
    out += ["", *result.alerts] if result.alerts else ["", "no window crossed a guardrail"]
    return out


def signal_lines(result: Result) -> list[str]:
    """The signals measured against the axes: those that track one, and how many could not be
    measured."""
    t = result.signals
    if not len(t):
        return []
    measured = t[t["spearman"].notna()]
    out = [
        f"feedback signals: {len(measured)} of {len(t)} signal-axis pairs measured "
        f"(signals.csv), {int(t['tracks'].sum())} tracking an axis"
    ]
    for r in measured[measured["tracks"]].to_dict("records"):
        out.append(
            f"  {r['signal']} tracks {r['axis']}: Spearman {r['spearman']:.3f} "
            f"[{r['low']:.3f}, {r['high']:.3f}] (n={r['n']})"
        )
    return out


def cmd_traces(args: argparse.Namespace) -> int:
    from ragrig.core.errors import RagrigError

    source = Path(args.file)
    try:
        cfg = load_config(Path(args.config) if args.config else None)
        if args.sample_rate is not None:
            cfg = cfg.model_copy(update={"sample_rate": args.sample_rate})
        if not source.is_file():
            raise RagrigError(f"file not found: {source}")
        if cfg.bound_heap:
            from ragrig.runtime.malloc import bound_heap

            bound_heap(cfg.heap_threshold_mib << 20)
        judging = Judging.from_params(
            Path(args.params), cfg.semantic_relevance, cfg.runtime, cfg.embed_batch_size
        )
        embedder = None
        if cfg.drift.queries:  # the relevance's question embedder when it has one: one model
            shared = judging.axes.embedders
            embedder = (
                shared.pair()[0]
                if shared is not None
                else query_embedder(Path(args.params), cfg.runtime, cfg.embed_batch_size)
            )
        result = evaluate(source, cfg, judging, embedder, progress=not args.quiet)
        paths = write_outputs(result, cfg, Path(args.out), source)
        logged = (
            log_windows(result, cfg, Path(args.params), source, Path.cwd())
            if cfg.mlflow and not args.no_mlflow and len(result.windows)
            else 0
        )
    except RagrigError as exc:
        print(f"ragrig traces: error: {exc}", file=sys.stderr)
        return 2
    for line in summary_lines(result, cfg, source):
        print(line)
    print(f"ragrig traces: wrote {', '.join(str(p) for p in paths)}")
    if logged:
        print(f"ragrig traces: {logged} MLflow runs in experiment {cfg.experiment!r}")
    return 1 if result.alerts else 0


def add_parser(sub: Any) -> None:
    pt = sub.add_parser(
        "traces",
        help="evaluate logged interactions (JSONL): a hashed sample judged per time window, "
        "intervals, alerts on the floors' lower bounds (exit 1), drift against the first window",
    )
    pt.add_argument("file", help="JSONL of interactions (.gz too); docs/own-system.md")
    pt.add_argument("--config", default="conf/traces.yaml")
    pt.add_argument("--params", default="params.yaml", help="the judge and embed sections")
    pt.add_argument("--out", default="reports/traces")
    pt.add_argument("--sample-rate", type=float, default=None, help="override the config's")
    pt.add_argument("--no-mlflow", action="store_true", help="no MLflow runs")
    pt.add_argument("--quiet", action="store_true", help="no progress bar")
    pt.set_defaults(func=cmd_traces)
