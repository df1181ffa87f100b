"""The `ragrig` command: params, data, summary, gate, sweep page, MLflow UI, DVC setup."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from ragrig.core.errors import RagrigError


def _root() -> Path:
    return Path.cwd()


def cmd_params(args: argparse.Namespace) -> int:
    import yaml

    from ragrig.compose.params import compose_yaml, validate_composition, write_params

    if args.action == "write":
        write_params(args.conf, args.output, args.overrides)
        print(f"wrote {args.output}")
        return 0
    text = compose_yaml(args.conf, args.overrides)
    validate_composition(yaml.safe_load(text))
    current = Path(args.output).read_text(encoding="utf-8") if Path(args.output).exists() else ""
    if current != text:
        print(
            f"{args.output} differs from the composition of {args.conf}/: run `make params`",
            file=sys.stderr,
        )
        return 1
    print(f"{args.output} matches {args.conf}/")
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from ragrig.core.config import load_section
    from ragrig.dataset.beir import load_beir
    from ragrig.dataset.download import ensure_dataset

    ds = load_section("dataset", args.params)
    # the robustness sets: built when missing or built from other arguments
    if ds.robustness is not None:
        from ragrig.tools.robustness import SETS, build, is_current, write

        r = ds.robustness
        built_from = {**r.model_dump(), "sets": list(SETS)}  # a new set rebuilds the folder
        if not is_current(Path(ds.root), built_from):
            built = build(Path(r.source), Path(r.mtrag_tasks), r.per_set, r.seed)
            write(built, Path(ds.root), built_from)
            sets = ", ".join(f"{k} {v['built']}" for k, v in built.counts.items())
            print(f"dataset {ds.name}: robustness sets built at {ds.root} ({sets})")
    status = ensure_dataset(Path(ds.root), ds.download)
    if ds.documents or ds.golden:  # a folder of documents for parse=docling, not a BEIR layout
        from ragrig.core.errors import DataValidationError

        folders = [Path(d) for d in (ds.documents or [ds.root])]
        golden = [Path(ds.golden) / n for n in ("queries.jsonl", "qrels.tsv")] if ds.golden else []
        missing = [str(f) for f in folders if not f.is_dir()] + [
            str(g) for g in golden if not g.is_file()
        ]
        if missing:
            raise DataValidationError(f"dataset {ds.name}: not found: {', '.join(missing)}")
        files = sum(1 for f in folders for p in f.rglob("*") if p.is_file())
        print(
            f"dataset {ds.name} {status} at {ds.root}: {files} files in {len(folders)} documents "
            f"folder(s), golden set {ds.golden or 'none'}"
        )
        return 0
    data = load_beir(Path(ds.root), ds.split)
    print(
        f"dataset {ds.name} {status} at {ds.root}: {len(data.corpus)} documents, "
        f"{len(data.queries)} {ds.split} queries, {sum(len(v) for v in data.qrels.values())} judgments"
    )
    return 0


def cmd_summary(args: argparse.Namespace) -> int:
    from ragrig.core.config import load_params
    from ragrig.core.io import read_json
    from ragrig.report.summary import format_summary

    print(format_summary(read_json(Path(args.metrics)), load_params(args.params)))
    return 0


def cmd_gate(args: argparse.Namespace) -> int:
    """The release gate (ragrig.tools.gate): the scorecard, one line per check, a JUnit file.
    Exit 0: every check passes (soft floors may warn); 1: a check failed (named); 2: metrics
    missing or unreadable, no scorecard, or a hard axis not measured."""
    from ragrig.core.errors import RagrigError
    from ragrig.metrics.scorecard import from_dict as scorecard_from_dict
    from ragrig.report.scorecard import format_scorecard
    from ragrig.tools.gate import (
        FAIL,
        UNMEASURED,
        WARN,
        exit_code,
        load_config,
        run_checks,
        write_junit,
    )

    try:
        cfg = load_config(Path(args.config) if args.config else None)
        metrics, checks = run_checks(
            Path(args.metrics), cfg, Path(args.baseline) if args.baseline else None
        )
    except RagrigError as exc:
        print(f"ragrig gate: {str(exc).removeprefix('ragrig gate: ')}", file=sys.stderr)
        return 2
    section = metrics["scorecard"]
    card = scorecard_from_dict(section)
    body = card.to_dict()
    body["notes"] = [n for n in section.get("notes", []) if n not in card.notes] + card.notes
    if isinstance(section.get("faithfulness"), dict):  # the decision's share, PPI with labels
        body["faithfulness"] = section["faithfulness"]
    for line in format_scorecard(body):
        print(line)
    print("")
    print(f"{'check':<34} {'value':>10}  {'bound':<12} verdict")
    for c in checks:
        print(c.line())
    if args.junit:
        write_junit(checks, Path(args.junit), card.rule)
        print(f"ragrig gate: JUnit results in {args.junit}")
    code = exit_code(checks)
    for c in checks:
        if c.kind == "floor" and c.verdict in (FAIL, WARN, UNMEASURED):
            what = "not measured" if c.value is None else f"{c.value:.4f} < {c.bound[3:]}"
            if c.value is not None and not c.reads.startswith("estimate"):
                what += f", the {c.reads}; the mean {c.estimate:.4f}"
            level = "FAIL: hard" if c.hard else "warning: soft"
            print(f"ragrig gate: {level} floor {c.name[6:]} ({what})", file=sys.stderr)
        elif c.failed:
            value = "not measured" if c.value is None else f"{c.value:.4f}, bound {c.bound}"
            print(f"ragrig gate: FAIL: {c.name} ({value})", file=sys.stderr)
    if code == 0:
        warned = any(c.verdict == WARN or (c.verdict == UNMEASURED and not c.hard) for c in checks)
        print("ragrig gate: pass" + (" with warnings" if warned else ""))
    return code


def experiment_table_url(url: str, root: Path) -> str | None:
    """The runs table of the project's experiment (report.mlflow.experiment) with its default
    view, from the running server; None when the experiment does not exist yet."""
    import requests

    from ragrig.core.config import load_params
    from ragrig.tracking.run import runs_table_url

    name = "ragrig"
    params = root / "params.yaml"
    if params.exists():
        name = (load_params(params).get("report") or {}).get("mlflow", {}).get("experiment", name)
    reply = requests.get(
        f"{url}/api/2.0/mlflow/experiments/get-by-name",
        params={"experiment_name": name},
        timeout=10,
    )
    if reply.status_code != 200:
        return None
    return runs_table_url(url, reply.json()["experiment"]["experiment_id"])


def ui_store(root: Path, overrides: list[str]) -> tuple[str, str | None]:
    """The tracking URI and artifact location of report.mlflow: params.yaml's, or conf/
    composed with `overrides` (`report/mlflow=team`), checked reachable (one line if not)."""
    from ragrig.compose.params import compose
    from ragrig.core.config import load_params
    from ragrig.tracking.run import configure

    if overrides:
        cfg = compose(root / "conf", overrides)
    else:
        params = root / "params.yaml"
        cfg = load_params(params) if params.exists() else {}
    mlflow_cfg = (cfg.get("report") or {}).get("mlflow") or {}
    return configure(mlflow_cfg, root), mlflow_cfg.get("artifact_location")


def cmd_ui(args: argparse.Namespace) -> int:
    from ragrig.tracking import server as ui

    root = _root()
    if args.action == "start":
        uri, artifacts = ui_store(root, args.overrides)
        info = ui.start(root, uri, port=args.port, artifacts=artifacts)
        print(f"MLflow UI at {info['url']} (pid {info['pid']}); stop with `make ui-stop`")
        table = experiment_table_url(info["url"], root)
        if table:
            print(f"runs table with the headline columns: {table}")
    else:
        n = ui.stop(root)
        print(f"stopped MLflow server ({n} processes)" if n else "no MLflow server running")
    return 0


def cmd_init_dvc(args: argparse.Namespace) -> int:
    """Initialise DVC in the checkout: Hydra composition on, analytics off."""
    root = _root()
    if not (root / ".dvc").exists():
        subprocess.run(["dvc", "init", "-q"], cwd=root, check=True)
    for key, value in (("core.analytics", "false"), ("hydra.enabled", "true")):
        subprocess.run(["dvc", "config", key, value], cwd=root, check=True)
    print("DVC ready (hydra.enabled true, analytics off)")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from ragrig.tools.calibrate import format_table, run
    from ragrig.tools.calibrate.config import load_calibrate_config

    cfg = load_calibrate_config(args.config, dataset=args.dataset, out_dir=args.out_dir)
    if args.labels:
        return _calibrate_on_labels(cfg, args)
    report = run(cfg, _root(), write_threshold=False if args.no_write else None)
    print(format_table(report))
    print(f"wrote {report['reliability_plot']} and calibration.json, scores.csv beside it")
    for w in report["thresholds_written"].values():
        print(f"{w['path']}: decision_threshold {w['value']:.4g} (run `make params` next)")
    return 0


def _calibrate_on_labels(cfg, args: argparse.Namespace) -> int:
    import json

    from ragrig.core.io import write_json
    from ragrig.tools.calibrate import (
        RULE_NOTES,
        THRESHOLD_KEY,
        default_judge,
        judge_config_path,
        write_fitted,
    )
    from ragrig.tools.calibrate.own_labels import format_labels_report, run_on_labels

    root = _root()
    report = run_on_labels(
        cfg, root, Path(args.labels), Path(args.data), Path(args.params), args.fit_weights
    )
    for line in format_labels_report(report):
        print(line)
    out = Path(cfg.out_dir)
    out = out if out.is_absolute() else root / out
    write_json(out / "labels_calibration.json", report)
    print(f"wrote {out / 'labels_calibration.json'}")
    name = args.judge or default_judge(root)
    if not args.no_write and name:
        value = report["scorer"]["threshold"]
        rule = RULE_NOTES[report["scorer"]["threshold_rule"]]
        note = f"chosen by `ragrig calibrate --labels` ({rule} on the calibration half of "
        note += f"{Path(args.labels).name}, seed {cfg.split.seed})"
        path = judge_config_path(root, name)
        entries = [(THRESHOLD_KEY, repr(float(value)), note)]
        if report["weights"] is not None:
            entries.insert(
                0,
                (
                    "weights",
                    json.dumps(report["weights"]["weights"]),
                    "fitted by `ragrig calibrate --labels --fit-weights` (the composite's "
                    f"highest ROC-AUC on the calibration half of {Path(args.labels).name})",
                ),
            )
        write_fitted(path, entries)
        print(f"{path.relative_to(root)}: decision_threshold {value:.4g} (run `make params` next)")
    return 0


def _labels_from_mlflow(args: argparse.Namespace) -> int:
    """The human `faithful` feedback of the run's answer traces, written as a labels file."""
    import json

    from ragrig.core.config import load_section
    from ragrig.core.io import atomic_write_text
    from ragrig.tracking.run import configure, human_feedback

    cfg = load_section("report", args.params)
    uri = configure(cfg.mlflow, Path.cwd())
    got = human_feedback(uri, cfg.mlflow.experiment, args.run_id)
    out = Path(args.labels_out)
    if not got["labels"]:
        raise RagrigError(
            f"label: run {got['run_id']}: none of its {got['traces']} answer traces has "
            "feedback 'faithful' from a person; nothing written"
        )
    atomic_write_text(out, "".join(json.dumps(x) + "\n" for x in got["labels"]))
    print(
        f"ragrig label: {len(got['labels'])} of {got['traces']} answer traces of run "
        f"{got['run_id']} rated by a person; wrote {out}"
    )
    return 0


def cmd_label(args: argparse.Namespace) -> int:
    """Export a stratified sample of the run's judged answers for people to rate."""
    from ragrig.dataset.labels import export_sample

    if args.from_mlflow:
        return _labels_from_mlflow(args)
    if args.queue:
        from ragrig.cli.review import label_queue

        return label_queue(args)
    out = Path(args.out)
    try:
        m = export_sample(Path(args.data), out, args.n, args.seed)
    except ValueError as exc:
        raise RagrigError(f"label: {exc}") from None
    strata = ", ".join(f"{s} {v['drawn']} of {v['answers']}" for s, v in m["strata"].items())
    print(f"ragrig label: {m['n']} of {m['scored_answers']} scored answers drawn ({strata})")
    print(f"  rate them in {out / 'rate.html'} (saves labels.jsonl), or fill the rating column")
    print(f"  of {out / 'labels.csv'}; then put the file at labels/faithfulness.jsonl (or .csv)")
    return 0


def cmd_sweep_page(args: argparse.Namespace) -> int:
    """Render a sweep's rows.json (one row per point) as one self-contained HTML page."""
    import json

    from ragrig.core.errors import DataValidationError
    from ragrig.sweep.page import validate_rows, write_sweep_page

    path = Path(args.rows)
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise DataValidationError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise DataValidationError(f"{path}: line {exc.lineno}: not JSON: {exc.msg}") from None
    rows = validate_rows(rows, str(path))
    out = write_sweep_page(rows, Path(args.out) if args.out else path.with_name("index.html"))
    failed = sum(r["status"] == "failed" for r in rows)
    print(f"wrote {out} ({len(rows)} points, {failed} failed)")
    return 0


def cmd_metrics_diff(args: argparse.Namespace) -> int:
    from ragrig.tools.views import metrics_diff

    text, code = metrics_diff(_root(), args.a_rev, args.b_rev)
    print(text, file=sys.stderr if code else sys.stdout)
    return code


def cmd_exp_show(args: argparse.Namespace) -> int:
    from ragrig.tools.views import exp_show_args

    cmd = ["dvc", "exp", "show", *exp_show_args(), *args.dvc_args]
    return subprocess.run(cmd, cwd=_root()).returncode


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ragrig", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    pp = sub.add_parser("params", help="compose conf/ into params.yaml, or check they agree")
    pp.add_argument("action", choices=["write", "check"])
    pp.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. retrieve=bm25")
    pp.add_argument("--conf", default="conf")
    pp.add_argument("--output", default="params.yaml")
    pp.set_defaults(func=cmd_params)
    pd_ = sub.add_parser(
        "data", help="make sure the configured dataset is present (download + verify)"
    )
    pd_.add_argument("action", choices=["ensure"])
    pd_.add_argument("--params", default="params.yaml")
    pd_.set_defaults(func=cmd_data)
    ps = sub.add_parser("summary", help="print the console summary of reports/metrics.json")
    ps.add_argument("--metrics", default="reports/metrics.json")
    ps.add_argument("--params", default="params.yaml")
    ps.set_defaults(func=cmd_summary)
    pg = sub.add_parser(
        "gate",
        help="the release gate: the scorecard's floors on their interval lower bounds, p95 "
        "latency, cost, filter false exclusion and regressions against a baseline, from "
        "conf/gate.yaml (exit 0 pass, 1 a check failed, 2 metrics missing or a hard axis not "
        "measured)",
    )
    pg.add_argument("--metrics", default="reports/metrics.json")
    pg.add_argument(
        "--config", default="conf/gate.yaml", help="the pre-registered checks (conf/gate.yaml)"
    )
    pg.add_argument(
        "--baseline", default=None, help="reports folder of the baseline run (regression checks)"
    )
    pg.add_argument("--junit", default=None, help="write the checks as JUnit XML here")
    pg.set_defaults(func=cmd_gate)
    from ragrig.traces.command import add_parser as add_traces

    add_traces(sub)
    pu = sub.add_parser("ui", help="start or stop the MLflow UI over the project's store")
    pu.add_argument("action", choices=["start", "stop"])
    pu.add_argument("--port", type=int, default=5000)
    pu.add_argument(
        "overrides", nargs="*", help="conf/ overrides choosing the store, e.g. report/mlflow=team"
    )
    pu.set_defaults(func=cmd_ui)
    pc = sub.add_parser(
        "calibrate", help="measure the judges against MTRAG's human faithfulness ratings"
    )
    pc.add_argument("--config", default="conf/calibrate.yaml")
    pc.add_argument("--dataset", default=None, help="MTRAG human-evaluation file (overrides)")
    pc.add_argument("--out-dir", default=None, help="report folder (overrides)")
    pc.add_argument("--no-write", action="store_true", help="do not write thresholds to conf/")
    pc.add_argument(
        "--labels",
        default=None,
        help="the team's labels of this run's answers (ragrig label): measure and fit the "
        "run's judge on them instead of MTRAG",
    )
    pc.add_argument(
        "--fit-weights",
        action="store_true",
        help="with --labels: fit the faithfulness composite's weights on them too",
    )
    pc.add_argument("--data", default="data", help="with --labels: the run's stage outputs")
    pc.add_argument("--params", default="params.yaml", help="with --labels: the run's params")
    pc.add_argument(
        "--judge",
        default=None,
        help="with --labels: the conf/judge option to write into (default: conf/config.yaml's)",
    )
    pc.set_defaults(func=cmd_calibrate)
    pl = sub.add_parser(
        "label",
        help="export a stratified sample of the run's judged answers, with a page to rate "
        "each one faithful or unfaithful",
    )
    pl.add_argument(
        "--data", default="data", help="the run's stage outputs (parse, generate, judge)"
    )
    pl.add_argument("--out", default="reports/labels", help="folder written (replaced)")
    pl.add_argument("--n", type=int, default=100, help="answers to draw")
    pl.add_argument("--seed", type=int, default=13)
    pl.add_argument(
        "--from-mlflow",
        action="store_true",
        help="instead: read people's 'faithful' feedback on the run's answer traces in MLflow",
    )
    pl.add_argument("--run-id", default=None, help="with --from-mlflow (default: the latest run)")
    pl.add_argument("--labels-out", default="labels/faithfulness.jsonl", help="with --from-mlflow")
    pl.add_argument("--params", default="params.yaml", help="with --from-mlflow: the store")
    pl.add_argument(
        "--queue",
        default=None,
        help="instead: the review page of `ragrig traces`' review queue "
        "(reports/traces/review_queue.jsonl; written to reports/review unless --out)",
    )
    pl.set_defaults(func=cmd_label)
    pw = sub.add_parser(
        "sweep-page", help="render a sweep's rows.json as one HTML page comparing every point"
    )
    pw.add_argument("rows", help="rows.json written by the sweep")
    pw.add_argument("--out", default=None, help="the page (default: index.html beside rows.json)")
    pw.set_defaults(func=cmd_sweep_page)
    pm = sub.add_parser(
        "metrics-diff",
        help="the headline metrics of a revision (default HEAD) against the workspace "
        "(or a second revision), saying when a side has none",
    )
    pm.add_argument("a_rev", nargs="?", default="HEAD")
    pm.add_argument("b_rev", nargs="?", default=None)
    pm.set_defaults(func=cmd_metrics_diff)
    pe = sub.add_parser(
        "exp-show",
        help="`dvc exp show` with the swept params and the headline metrics only "
        "(more dvc exp show options may follow, e.g. --csv, -A)",
    )
    pe.add_argument("dvc_args", nargs="*", help="more `dvc exp show` options")
    pe.set_defaults(func=cmd_exp_show)
    pi = sub.add_parser("init-dvc", help="set up DVC in this checkout")
    pi.set_defaults(func=cmd_init_dvc)
    pg_ = sub.add_parser(
        "check-install", help="fail early on installs known to break the CPU torch stack"
    )
    pg_.set_defaults(func=cmd_check_install)
    # a sweep has a command line of its own: main() hands it every argument after the verb
    sub.add_parser(
        "sweep",
        help="a sweep of DVC experiments: `ragrig sweep --help` (Hydra overrides, -j, queue, "
        "prepare, hydra)",
        add_help=False,
    )
    from ragrig.cli import commands

    commands.add_parsers(sub)
    return p


def cmd_check_install(args: argparse.Namespace) -> int:
    from ragrig.runtime.guards import main as guards

    return guards()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sweep"]:
        from ragrig.cli.sweep import main as sweep

        return sweep(argv[1:])
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command == "exp-show":  # the rest goes to `dvc exp show` as it is (--csv, -A ...)
        args.dvc_args = [*args.dvc_args, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.func(args)
    except RagrigError as exc:
        print(f"ragrig: error: {exc}", file=sys.stderr)
        return 1
