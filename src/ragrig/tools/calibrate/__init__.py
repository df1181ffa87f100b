"""`ragrig calibrate`: every configured judge (and baseline) against MTRAG's human faithfulness
ratings, on a fixed split of tasks into a calibration half and a held-out half.

For each scorer: counts (scored, no_claims, error, invalid), the decision threshold fitted on the
calibration half (maximum balanced accuracy, ties -> lowest), balanced accuracy, Cohen's kappa,
ROC-AUC and ECE on the held-out half at that threshold, the reverse direction, and threshold-free
ROC-AUC / ECE on all answers. Writes `calibration.json`, `scores.csv` (one row per answer and
scorer) and `reliability.png` under the configured out_dir, and, for pipeline judges, the fitted
threshold as `decision_threshold` in conf/judge/<name>.yaml. Beside the fixed split, the
transfer check (`transfer`: leave-one-domain-out, leave-one-responder-out; ragrig.tools.calibrate.
transfer) fits on all groups but one and decides the held-out one.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any

import yaml

from ragrig.core.errors import ConfigError, RagrigError
from ragrig.tools.calibrate.config import CalibrateConfig

THRESHOLD_KEY = "decision_threshold"


def judge_config_path(root: Path, name: str) -> Path:
    return Path(root) / "conf" / "judge" / f"{name}.yaml"


def load_judge_config(root: Path, name: str) -> Any:
    import yaml

    from ragrig.core.config import validate_section

    path = judge_config_path(root, name)
    if not path.is_file():
        raise ConfigError(f"calibrate.judges names {name!r} but {path} does not exist")
    return validate_section("judge", yaml.safe_load(path.read_text(encoding="utf-8")))


def _rooted(judge_cfg: Any, root: Path) -> Any:
    """A verifier judge's model folder (default: the train_verifier stage's output) resolved
    against the project root."""
    if judge_cfg.method != "verifier" or judge_cfg.model == "shipped":
        return judge_cfg
    model = Path(judge_cfg.model or "data/train_verifier")
    return judge_cfg.model_copy(
        update={"model": str(model if model.is_absolute() else root / model)}
    )


def build_scorers(
    cfg: CalibrateConfig, root: Path, answer_models: dict[str, Any] | None = None
) -> list:
    """A scorer per configured judge and baseline; `answer_models` (judge name ->
    ragrig.judge.extractive.AnswerModel) replace those judges' configured answer model."""
    from ragrig.judge import make_judge
    from ragrig.judge.config import AnswerModelConfig
    from ragrig.tools.calibrate.baselines import BASELINES
    from ragrig.tools.calibrate.core import BaselineScorer, JudgeScorer

    def judge_cfg(name: str) -> Any:
        jc = _rooted(load_judge_config(root, name), root)
        model = (answer_models or {}).get(name)
        if model is None:
            return jc
        return jc.model_copy(update={"answer_model": AnswerModelConfig(**model.as_config())})

    scorers = []
    for n in cfg.judges:
        jc = judge_cfg(n)
        scorers.append(JudgeScorer(n, make_judge(jc), veto=jc.veto))
    scorers += [BaselineScorer(n, BASELINES[n]()) for n in cfg.baselines]
    names = [s.name for s in scorers]
    if len(set(names)) != len(names):
        raise ConfigError(f"calibrate: a judge and a baseline share a name: {names}")
    if not scorers:
        raise ConfigError("calibrate: no judge and no baseline configured")
    return scorers


def write_fitted(path: Path, entries: list[tuple[str, str, str]]) -> None:
    """Set each `key: value` (value: YAML text on one line) in a judge's YAML, keeping every
    other line; the line before each is a comment `# key: note` saying what chose it. The
    result must still validate."""
    import yaml

    from ragrig.core.config import validate_section
    from ragrig.core.io import atomic_write_text

    keys = [k for k, _, _ in entries]
    kept: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        key = next((k for k in keys if line.startswith(f"{k}:")), None)
        if key is not None:
            if kept and kept[-1].startswith(f"# {key}"):
                kept.pop()
            continue
        kept.append(line)
    for key, value, note in entries:
        kept += [f"# {key}: {note}", f"{key}: {value}"]
    text = "\n".join(kept) + "\n"
    validate_section("judge", yaml.safe_load(text))
    atomic_write_text(path, text)


def write_decision_threshold(path: Path, value: float, note: str) -> None:
    """Set `decision_threshold: value` in a judge's YAML (write_fitted); repr: the exact
    float, so no answer's prediction changes by rounding the threshold."""
    write_fitted(path, [(THRESHOLD_KEY, repr(float(value)), note)])


def _scores_csv(rows_by_scorer: dict[str, list], answers: list) -> str:
    faithful_mean = {(a.task_id, a.model_id): a.mean_rating for a in answers}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        ["scorer", "task_id", "model_id", "half", "human_mean", "human_faithful", "status", "score"]
    )
    for name, rows in rows_by_scorer.items():
        for r in rows:
            w.writerow(
                [
                    name,
                    r.task_id,
                    r.model_id,
                    r.half,
                    f"{faithful_mean[(r.task_id, r.model_id)]:.4f}",
                    r.label,
                    r.status,
                    "" if r.score is None else f"{r.score:.6f}",
                ]
            )
    return buf.getvalue()


def _shown(path: Path, root: Path, configured: str) -> str:
    """A path as the config gave it: relative to the project root when configured relative
    (so a committed report names no machine's folders), else absolute."""
    return str(path) if Path(configured).is_absolute() else os.path.relpath(path, root)


def run(
    cfg: CalibrateConfig, root: Path | str = ".", write_threshold: bool | None = None
) -> dict[str, Any]:
    """Score, fit, measure, write the reports (and the thresholds); return the report."""
    from ragrig.core.io import atomic_write_text, write_json
    from ragrig.tools.calibrate.core import (
        CALIBRATION,
        HELD_OUT,
        THRESHOLD_RULES,
        evaluate,
        fit_answer_model_on,
        score_answers,
        split_tasks,
    )
    from ragrig.tools.calibrate.mtrag import load_mtrag_human
    from ragrig.tools.calibrate.plot import reliability_plot
    from ragrig.tools.calibrate.refusals import refusal_report

    root = Path(root)
    dataset = Path(cfg.dataset)
    dataset = dataset if dataset.is_absolute() else root / dataset
    rated = load_mtrag_human(dataset, cfg.faithful_min_mean)
    split = split_tasks((a.task_id for a in rated.answers), cfg.split.seed, cfg.split.group)
    for name in cfg.fit_answer_model:
        if name not in cfg.judges:
            raise ConfigError(f"calibrate.fit_answer_model names {name!r}, not in judges")
        if load_judge_config(root, name).method != "overlap":
            raise ConfigError(f"calibrate.fit_answer_model: judge {name!r} is not method overlap")
    # the answer models, each fitted on one half only: the calibration half's is the one
    # measured on the held-out half and written into config; the held-out half's serves the
    # reverse check alone
    try:
        fitted = {
            half: {n: fit_answer_model_on(rated.answers, split, half) for n in cfg.fit_answer_model}
            for half in (CALIBRATION, HELD_OUT)
        }
    except ValueError as exc:
        raise RagrigError(f"calibrate: fitting the answer model on {rated.path}: {exc}") from exc
    scorers = build_scorers(cfg, root, fitted[CALIBRATION])
    reverse_scorers = {s.name: s for s in build_scorers(cfg, root, fitted[HELD_OUT])}
    results, rows_by_scorer = {}, {}
    for scorer in scorers:
        rows = score_answers(scorer, rated.answers, split, cfg.question)
        rows_by_scorer[scorer.name] = rows
        rule = threshold_rule(cfg, scorer.name in fitted[CALIBRATION])
        fit = THRESHOLD_RULES[rule]
        try:
            results[scorer.name] = evaluate(rows, cfg.no_claims, cfg.ece_bins, fit)
            if scorer.name in fitted[HELD_OUT]:
                rev = score_answers(
                    reverse_scorers[scorer.name], rated.answers, split, cfg.question
                )
                results[scorer.name]["reverse"] = evaluate(rev, cfg.no_claims, cfg.ece_bins, fit)[
                    "reverse"
                ]
                results[scorer.name]["reverse"]["answer_model"] = "refitted on the held-out half"
                results[scorer.name]["answer_model"] = fitted[CALIBRATION][scorer.name].as_config()
        except ValueError as exc:
            raise RagrigError(f"calibrate {scorer.name} on {rated.path}: {exc}") from exc
        results[scorer.name]["kind"] = "baseline" if scorer.name in cfg.baselines else "judge"
        results[scorer.name]["threshold_rule"] = rule
    results.update(_baselines_on_judge_rows(cfg, rows_by_scorer))
    transfer = _transfer(cfg, root, rated.answers, rows_by_scorer, scorers, fitted[CALIBRATION])
    out_dir = Path(cfg.out_dir)
    out_dir = out_dir if out_dir.is_absolute() else root / out_dir
    report = {
        "dataset": _shown(rated.path, root, cfg.dataset),
        "counts": rated.counts,
        "faithful_rule": f"mean human faithfulness rating >= {cfg.faithful_min_mean} of 4",
        "split": {
            "rule": f"{cfg.split.group}s ordered by sha256('{cfg.split.seed}:<{cfg.split.group} "
            "id>'); the tasks of the first ceil(n/2) calibrate, the rest are held out",
            "seed": cfg.split.seed,
            "group": cfg.split.group,
            "tasks": {CALIBRATION: len(split.calibration), HELD_OUT: len(split.held_out)},
            "answers": {
                h: sum(split.half(a.task_id) == h for a in rated.answers)
                for h in (CALIBRATION, HELD_OUT)
            },
        },
        "config": cfg.model_dump(),
        "scorers": results,
        "reliability_plot": _shown(out_dir / "reliability.png", root, cfg.out_dir),
        "transfer": transfer,
        "ppi_coverage": _ppi_coverage(cfg, rows_by_scorer, results),
        "refusal_detection": refusal_report(cfg, root, scorers, rated.answers),
    }
    write_json(out_dir / "calibration.json", report)
    atomic_write_text(out_dir / "scores.csv", _scores_csv(rows_by_scorer, rated.answers))
    reliability_plot(
        {n: r["reliability_held_out"] for n, r in results.items()},
        {n: r["held_out"].get("ece") for n, r in results.items()},
        out_dir / "reliability.png",
    )
    written = {}
    if cfg.write_threshold if write_threshold is None else write_threshold:
        for name in cfg.judges:
            path = judge_config_path(root, name)
            value = results[name]["threshold"]
            half = (
                f"the calibration half of {Path(cfg.dataset).name}, by {cfg.split.group}, "
                f"seed {cfg.split.seed}"
            )
            entries = []
            if name in fitted[CALIBRATION]:
                model = fitted[CALIBRATION][name].as_config()
                entries.append(
                    (
                        "answer_model",
                        json.dumps(model),
                        f"fitted by `ragrig calibrate` (logistic regression on {half})",
                    )
                )
            entries.append(
                (
                    THRESHOLD_KEY,
                    repr(float(value)),
                    f"chosen by `ragrig calibrate` ({RULE_NOTES[results[name]['threshold_rule']]}"
                    f" on {half}, no_claims -> {cfg.no_claims})",
                )
            )
            write_fitted(path, entries)
            written[name] = {"path": os.path.relpath(path, root), "value": value}
    report["thresholds_written"] = written
    if written:
        write_json(out_dir / "calibration.json", report)
    return report


RULE_NOTES = {
    "max_balanced_accuracy": "max balanced accuracy",
    "prevalence": "the share of faithful answers, the Bayes threshold of a calibrated probability,",
}


def threshold_rule(cfg: CalibrateConfig, calibrated: bool) -> str:
    """The rule fitting a scorer's threshold: `auto` takes prevalence for a score that is a
    calibrated probability (an answer model fitted here), the balanced-accuracy maximum else."""
    if cfg.threshold_rule != "auto":
        return cfg.threshold_rule
    return "prevalence" if calibrated else "max_balanced_accuracy"


def default_judge(root: Path) -> str | None:
    """The judge option conf/config.yaml's defaults list chooses (None when it names none)."""
    try:
        data = yaml.safe_load((root / "conf" / "config.yaml").read_text(encoding="utf-8")) or {}
    except OSError:
        return None
    for entry in data.get("defaults", []):
        if isinstance(entry, dict) and "judge" in entry:
            return str(entry["judge"])
    return None


def _transfer(cfg: CalibrateConfig, root: Path, answers, rows_by_scorer, scorers, fitted) -> dict:
    """The leave-one-group-out section (ragrig.tools.calibrate.transfer) of every scorer."""
    from ragrig.tools.calibrate.core import THRESHOLD_RULES
    from ragrig.tools.calibrate.transfer import transfer_report

    if not cfg.transfer:
        return {}
    fits = {n: THRESHOLD_RULES[threshold_rule(cfg, n in fitted)] for n in rows_by_scorer}
    try:
        return transfer_report(
            cfg.transfer,
            answers,
            rows_by_scorer,
            {s.name: s for s in scorers},
            fits,
            set(fitted),
            cfg.no_claims,
            cfg.ece_bins,
            default_judge(root),
            cfg.judges,
        )
    except ValueError as exc:
        raise RagrigError(f"calibrate: transfer check: {exc}") from exc


def _ppi_coverage(cfg: CalibrateConfig, rows_by_scorer: dict, results: dict) -> dict:
    """Per judge, the coverage of prediction-powered intervals (ragrig.metrics.ppi) over
    repeated label samples of its measured answers, with the per-answer decision (score >=
    the fixed split's threshold) and with the score as the judge's value."""
    from ragrig.metrics.ppi import coverage
    from ragrig.tools.calibrate.core import metric_rows

    if cfg.ppi is None:
        return {}
    out: dict[str, Any] = {}
    for name in cfg.judges:
        usable = metric_rows(rows_by_scorer[name], cfg.no_claims)
        human = [r.label for r, _ in usable]
        scores = [s for _, s in usable]
        threshold = results[name]["threshold"]
        values = {"decision": [float(s >= threshold) for s in scores], "score": scores}
        per: dict[str, Any] = {"n_answers": len(usable), "threshold": threshold}
        for kind, f in values.items():
            per[kind] = []
            for n in cfg.ppi.n:
                try:
                    per[kind].append(
                        coverage(f, human, n, cfg.ppi.draws, cfg.ppi.seed, cfg.ppi.alpha)
                    )
                except ValueError as exc:
                    per[kind].append({"n": n, "undefined": str(exc)})
        out[name] = per
    return out


def _baselines_on_judge_rows(cfg: CalibrateConfig, rows_by_scorer: dict[str, list]) -> dict:
    """With no_claims excluded, a judge is measured on the answers it scored (refusals are
    counted apart) while a baseline scores every answer: each baseline is measured again on
    exactly the first judge's scored answers, so the two are compared on the same rows."""
    from ragrig.tools.calibrate.core import evaluate

    if cfg.no_claims != "exclude" or not cfg.judges:
        return {}
    judge = cfg.judges[0]
    scored = {(r.task_id, r.model_id) for r in rows_by_scorer[judge] if r.status == "scored"}
    out = {}
    for name in cfg.baselines:
        rows = [r for r in rows_by_scorer[name] if (r.task_id, r.model_id) in scored]
        name_on = f"{name} on {judge}'s answers"
        try:
            out[name_on] = evaluate(rows, cfg.no_claims, cfg.ece_bins)
        except ValueError as exc:
            raise RagrigError(f"calibrate {name_on}: {exc}") from exc
        out[name_on]["kind"] = "baseline"
        out[name_on]["scorer"] = name  # the same scorer, measured on fewer rows
        out[name_on]["threshold_rule"] = "max_balanced_accuracy"
        out[name_on]["rows"] = f"the {len(rows)} answers {judge} scored"
    return out


def format_table(report: dict[str, Any]) -> str:
    """One row per scorer: the figures the issue's table reports, and their context."""

    def f(x: Any) -> str:
        return "-" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)

    cols = [
        "scorer",
        "n",
        "no_claims",
        "err",
        "threshold",
        "BA cal->held",
        "BA held->cal",
        "ROC-AUC held",
        "ROC-AUC all",
        "kappa held",
        "ECE held",
    ]
    rows = []
    for name, r in report["scorers"].items():
        rows.append(
            [
                name,
                r["n"],
                r["status"]["no_claims"],
                r["status"]["error"] + r["status"]["invalid"],
                r["threshold"],
                r["held_out"]["balanced_accuracy"],
                r["reverse"]["calibration"].get("balanced_accuracy"),
                r["held_out"]["roc_auc"],
                r["all"]["roc_auc"],
                r["held_out"]["cohen_kappa"],
                r["held_out"]["ece"],
            ]
        )
    cells = [[f(v) for v in row] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    s = report["split"]
    c = report["counts"]
    head = (
        f"{c['evaluations']} rated answers ({c['faithful']} faithful: "
        f"{report['faithful_rule']}), {c['tasks']} tasks; split by {s['group']}, seed {s['seed']}: "
        f"{s['tasks']['calibration']} calibration / {s['tasks']['held_out']} held-out tasks "
        f"({s['answers']['calibration']} / {s['answers']['held_out']} answers); "
        f"no_claims -> {report['config']['no_claims']}"
    )
    from ragrig.tools.calibrate.refusals import format_refusals
    from ragrig.tools.calibrate.transfer import format_transfer

    return "\n".join(
        [
            head,
            *lines,
            *format_transfer(report.get("transfer", {})),
            *_format_ppi(report.get("ppi_coverage", {}), report["config"].get("ppi")),
            *format_refusals(report.get("refusal_detection", {})),
        ]
    )


def _format_ppi(section: dict[str, Any], ppi: dict | None) -> list[str]:
    lines = []
    for name, per in section.items():
        for kind in ("decision", "score"):
            cells = []
            for c in per[kind]:
                if "undefined" in c:
                    cells.append(f"n={c['n']} - ({c['undefined']})")
                else:
                    cells.append(
                        f"n={c['n']} {c['coverage']:.3f} (width {c['mean_width']:.3f}; "
                        f"labels alone {c['labels_only_coverage']:.3f}, "
                        f"{c['labels_only_mean_width']:.3f})"
                    )
            lines.append(
                f"PPI {name} by its {kind}, coverage of {1 - ppi['alpha']:.0%} intervals over "
                f"{ppi['draws']} draws: " + ", ".join(cells)
            )
    return lines
