"""Judge calibration on MTRAG's human faithfulness ratings, through `ragrig.tools.calibrate` (the code
`ragrig calibrate` runs), with conf/calibrate.yaml's judges and baselines.

477 rated answers (159 tasks x 3 responders); an answer is faithful when its mean human rating is
>= 3 of 4. Tasks are split by sha256 of the seeded task id into a calibration half and a held-out
half; the decision threshold is fitted on the calibration half (maximum balanced accuracy) and
every figure below is measured on the held-out half, plus the reverse direction. Measured per
scorer:

* balanced accuracy both ways, ROC-AUC (held-out and all answers), Cohen's kappa, ECE (10 bins);
* throughput: answers scored per second, median of --repeats scoring passes in this process;
* the issue's targets for the default offline judge (the first configured judge): held-out
  balanced accuracy >= 0.85 and ROC-AUC >= 0.90, and >= 10 answers/s.

Nothing is written into conf/ (the command `ragrig calibrate` does that); the reliability plot
goes to --plot.

    python benchmarks/bench_calibrate.py [--dataset-root DIR] [--quick] [--repeats 3]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import _common as C

DEFAULT_ROOT = (C.PROJECT_ROOT / ".." / "shared" / "datasets" / "mtrag_human").resolve()
DEFAULT_CONFIG = C.PROJECT_ROOT / "conf" / "calibrate.yaml"
TARGET_BALANCED_ACCURACY = 0.85
TARGET_ROC_AUC = 0.90
TARGET_ANSWERS_PER_S = 10.0
# The issue's own measurements (issue 6), for comparison: held-out balanced accuracy both ways
# and ROC-AUC.
ISSUE_FIGURES = {
    "overlap": {"balanced_accuracy": [0.71, 0.79], "roc_auc": 0.84},
    "naive_overlap": {"balanced_accuracy": [0.82, 0.77], "roc_auc": 0.88},
}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--dataset-root",
        type=Path,
        default=DEFAULT_ROOT,
        help="folder holding the MTRAG human-evaluation file named in --config "
        "(default ../shared/datasets/mtrag_human from the project root)",
    )
    p.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    p.add_argument("--params", type=Path, default=C.DEFAULT_PARAMS, help="for runtime.threads")
    p.add_argument("--repeats", type=int, default=3, help="timed scoring passes per scorer")
    p.add_argument("--quick", action="store_true", help="one timed pass")
    p.add_argument(
        "--plot",
        type=Path,
        default=C.PROJECT_ROOT / "benchmarks" / "calibration_reliability.png",
        help="where the reliability plot goes",
    )
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    p.add_argument("--judges", default=None, help="comma-separated judges instead of the config's")
    p.add_argument(
        "--seeds",
        type=int,
        default=0,
        help="also repeat the fit and the held-out measurement over split seeds 1..N (answer "
        "model and threshold refitted per seed; no refusal set): mean, sd and min per scorer",
    )
    args = p.parse_args(argv)

    C.setup_env()
    threads = C.apply_threads(args.params)
    repeats = 1 if args.quick else args.repeats

    from ragrig.tools.calibrate import build_scorers, run
    from ragrig.tools.calibrate.config import load_calibrate_config
    from ragrig.tools.calibrate.core import score_answers, split_tasks
    from ragrig.tools.calibrate.mtrag import load_mtrag_human

    base = load_calibrate_config(args.config)
    if args.judges is not None:
        base = base.model_copy(update={"judges": [j for j in args.judges.split(",") if j]})
    dataset = args.dataset_root.resolve() / Path(base.dataset).name
    with tempfile.TemporaryDirectory(prefix="ragrig-calibrate-") as tmp:
        refusal_tasks = (
            str(args.dataset_root.resolve() / Path(base.refusal_tasks).name)
            if base.refusal_tasks
            else None
        )
        cfg = base.model_copy(
            update={"dataset": str(dataset), "refusal_tasks": refusal_tasks, "out_dir": tmp}
        )
        t0 = time.perf_counter()
        report = run(cfg, C.PROJECT_ROOT, write_threshold=False)
        wall = time.perf_counter() - t0
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(tmp) / "reliability.png", args.plot)

    rated = load_mtrag_human(dataset, cfg.faithful_min_mean)
    split = split_tasks((a.task_id for a in rated.answers), cfg.split.seed, cfg.split.group)
    speed = {}
    for scorer in build_scorers(cfg, C.PROJECT_ROOT):
        passes = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            score_answers(scorer, rated.answers, split, cfg.question)
            passes.append(time.perf_counter() - t0)
        speed[scorer.name] = round(len(rated.answers) / C.median(passes), 1)

    scorers = {}
    for name, r in report["scorers"].items():
        scorers[name] = {
            "kind": r["kind"],
            "n": r["n"],
            "status": r["status"],
            "no_claims_human_faithful": r["no_claims"]["human_faithful"],
            "threshold": round(r["threshold"], 4),
            "threshold_rule": r["threshold_rule"],
            "reverse_threshold": _r(r["reverse"]["threshold"]),
            "balanced_accuracy_held_out": _r(r["held_out"]["balanced_accuracy"]),
            "balanced_accuracy_reverse": _r(r["reverse"]["calibration"].get("balanced_accuracy")),
            "roc_auc_held_out": _r(r["held_out"]["roc_auc"]),
            "roc_auc_all": _r(r["all"]["roc_auc"]),
            "cohen_kappa_held_out": _r(r["held_out"]["cohen_kappa"]),
            "ece_held_out": _r(r["held_out"]["ece"]),
            "ece_all": _r(r["all"]["ece"]),
            "answers_per_s": speed[r.get("scorer", name)],
            "issue_figures": ISSUE_FIGURES.get(name),
        }
    default = cfg.judges[0] if cfg.judges else None
    on_mtrag = args.dataset_root.resolve() == DEFAULT_ROOT
    target_met = None
    if default is not None and on_mtrag:
        d = scorers[default]
        target_met = bool(
            (d["balanced_accuracy_held_out"] or 0) >= TARGET_BALANCED_ACCURACY
            and (d["roc_auc_held_out"] or 0) >= TARGET_ROC_AUC
            and d["answers_per_s"] >= TARGET_ANSWERS_PER_S
        )
    result = {
        **C.header("calibrate", ["scikit-learn", "matplotlib"]),
        "config": {
            "dataset": report["dataset"],  # the file read (a .json twin of a missing .json.gz)
            "judges": cfg.judges,
            "baselines": cfg.baselines,
            "no_claims": cfg.no_claims,
            "question": cfg.question,
            "split_seed": cfg.split.seed,
            "split_group": cfg.split.group,
            "repeats": repeats,
            "threads": threads,
        },
        "counts": report["counts"],
        "split": report["split"],
        "wall_s": round(wall, 2),
        "scorers": scorers,
        # each judge's refusal detection vs MTRAG answerability (ragrig.tools.calibrate.refusals)
        "refusal_detection": report["refusal_detection"],
        "plot": str(args.plot),
        "target": (
            f"default judge ({default}) on the held-out half: balanced accuracy >= "
            f"{TARGET_BALANCED_ACCURACY}, ROC-AUC >= {TARGET_ROC_AUC}, >= "
            f"{TARGET_ANSWERS_PER_S} answers/s"
        ),
        # the targets are MTRAG's: on another file there is nothing to compare with
        "target_met": target_met,
    }

    if args.seeds > 0:
        result["seeds"] = _over_seeds(cfg, args.seeds)
        C.print_table(
            f"Held-out half over split seeds 1..{args.seeds} (fit on each seed's calibration half)",
            ["scorer", "BA mean", "BA sd", "BA min", "ROC-AUC mean", "ROC-AUC sd", "ROC-AUC min"],
            [
                [
                    n,
                    *(
                        d[m][k]
                        for m in ("balanced_accuracy", "roc_auc")
                        for k in ("mean", "sd", "min")
                    ),
                ]
                for n, d in result["seeds"].items()
            ],
        )

    s = report["split"]
    C.print_table(
        f"Judges vs human faithfulness on {Path(report['dataset']).name}: {report['counts']['evaluations']} answers, "
        f"split seed {s['seed']} ({s['tasks']['calibration']} / {s['tasks']['held_out']} tasks), "
        f"no_claims -> {cfg.no_claims}",
        ["scorer", "n", "no_claims", "BA cal->held", "BA held->cal", "ROC-AUC held", "ROC-AUC all"]
        + ["kappa held", "ECE held", "answers/s"],
        [
            [
                n,
                d["n"],
                d["status"]["no_claims"],
                d["balanced_accuracy_held_out"],
                d["balanced_accuracy_reverse"],
                d["roc_auc_held_out"],
                d["roc_auc_all"],
                d["cohen_kappa_held_out"],
                d["ece_held_out"],
                d["answers_per_s"],
            ]
            for n, d in scorers.items()
        ],
    )
    print(
        f"{result['target']}: {'n/a' if target_met is None else 'met' if target_met else 'NOT met'}"
    )
    C.write_json(args.json, result)
    return result


def _over_seeds(cfg, n: int) -> dict:
    """Held-out balanced accuracy and ROC-AUC per scorer over split seeds 1..n."""
    import statistics

    from ragrig.tools.calibrate import run

    per: dict[str, dict[str, list[float]]] = {}
    for seed in range(1, n + 1):
        with tempfile.TemporaryDirectory(prefix="ragrig-calibrate-") as tmp:
            c = cfg.model_copy(
                update={
                    "split": cfg.split.model_copy(update={"seed": seed}),
                    "refusal_tasks": None,
                    "out_dir": tmp,
                }
            )
            rep = run(c, C.PROJECT_ROOT, write_threshold=False)
        for name, r in rep["scorers"].items():
            d = per.setdefault(name, {"balanced_accuracy": [], "roc_auc": []})
            for m in d:
                if r["held_out"].get(m) is not None:
                    d[m].append(r["held_out"][m])
    return {
        name: {
            m: {
                "mean": round(statistics.fmean(v), 4),
                "sd": round(statistics.pstdev(v), 4),
                "min": round(min(v), 4),
                "n_seeds": len(v),
            }
            for m, v in d.items()
        }
        for name, d in per.items()
    }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


if __name__ == "__main__":
    main()
