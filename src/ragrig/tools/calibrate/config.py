"""Config of `ragrig calibrate` (conf/calibrate.yaml): not a pipeline stage, not in params.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import Field, ValidationError

from ragrig.core.config import NonEmptyStr, Section, Seed, reject_reserved_keys
from ragrig.core.errors import ConfigError

DEFAULT_CONFIG = Path("conf") / "calibrate.yaml"


class SplitConfig(Section):
    seed: Seed = Field(13, description="tasks are ordered by sha256('<seed>:<task_id>')")
    group: Literal["task", "conversation"] = Field(
        "task",
        description="what stays together in one half: each task (its answers), or each "
        "conversation (the task id before '<::>': all its turns)",
    )


class PPIConfig(Section):
    n: list[Annotated[int, Field(ge=2, le=1_000_000)]] = Field(
        default_factory=lambda: [50, 100, 200],
        description="label-sample sizes of the coverage simulation (each >= 2)",
    )
    draws: int = Field(1000, ge=1, le=100000, description="samples drawn per n")
    seed: Seed = Field(13, description="numpy PCG64 seed of the draws")
    alpha: float = Field(0.05, gt=0, lt=1, description="1 - the intervals' confidence")


class CalibrateConfig(Section):
    dataset: str = Field(
        "../shared/datasets/mtrag_human/reference_subset_with_human_evaluations.json.gz",
        description="MTRAG human-evaluation file (.json or .json.gz); relative to the project root",
    )
    faithful_min_mean: float = Field(
        3.0, ge=1, le=4, description="faithful when the mean human rating (1-4) is >= this"
    )
    split: SplitConfig = SplitConfig()
    judges: list[NonEmptyStr] = Field(
        default_factory=lambda: ["overlap"],
        description="options of conf/judge/, each built with ragrig.judge.make_judge (verifier: "
        "its model folder, default data/train_verifier, must hold a trained model)",
    )
    fit_answer_model: list[NonEmptyStr] = Field(
        default_factory=lambda: ["overlap"],
        description="judges (method overlap, also in `judges`) whose answer model "
        "(ragrig.judge.extractive) is fitted on the calibration half and written into "
        "conf/judge/<name>.yaml with the threshold",
    )
    baselines: list[Literal["naive_overlap"]] = Field(
        default_factory=lambda: ["naive_overlap"],
        description="calibration-only scorers (ragrig.tools.calibrate.baselines)",
    )
    refusal_tasks: str | None = Field(
        "../shared/datasets/mtrag_human/mtragun_reference_generation_tasks.jsonl.gz",
        description="MTRAG-UN generation tasks (.jsonl or .jsonl.gz) whose reference answers "
        "test each judge's refusal detection against answerability; null: only the rated "
        "answers are used (ragrig.tools.calibrate.refusals)",
    )
    no_claims: Literal["faithful", "unfaithful", "exclude"] = Field(
        "exclude",
        description="how a no_claims verdict scores: left out of the metrics (METRICS.md: an "
        "answer with no claims has no faithfulness score), 1.0 or 0.0; always counted apart",
    )
    threshold_rule: Literal["auto", "max_balanced_accuracy", "prevalence"] = Field(
        "auto",
        description="how the decision threshold is fitted on the calibration half: the score "
        "maximising balanced accuracy, or the share of faithful answers (the Bayes threshold "
        "of a calibrated probability); auto: prevalence for a judge whose answer model "
        "calibrate fits (its score is a probability), max_balanced_accuracy for the others",
    )
    transfer: list[Literal["domain", "responder"]] = Field(
        default_factory=lambda: ["domain", "responder"],
        description="leave-one-group-out checks beside the fixed split (ragrig.tools.calibrate."
        "transfer): per MTRAG domain and per responder, the answer model and threshold fitted "
        "on the other groups, measured on the held-out one; [] for none",
    )
    ppi: PPIConfig | None = Field(
        PPIConfig(),
        description="prediction-powered inference checked by simulation (ragrig.metrics.ppi): "
        "repeated draws of n labels from the rated answers, the share of 95% intervals holding "
        "the whole set's human rate, per judge, with its decision and with its score; null: off",
    )
    question: Literal["last_turn", "conversation"] = "conversation"
    ece_bins: int = Field(10, ge=1, le=100)
    out_dir: str = "reports/calibration"
    write_threshold: bool = Field(
        True, description="write the threshold fitted on the calibration half into conf/judge/"
    )


def load_calibrate_config(path: str | Path = DEFAULT_CONFIG, **overrides) -> CalibrateConfig:
    """Read and validate the calibration config; keyword overrides (not None) replace keys."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read calibration config {path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path} does not hold a mapping")
    raw.update({k: v for k, v in overrides.items() if v is not None})
    reject_reserved_keys(raw, "calibrate")
    try:
        return CalibrateConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"invalid calibration config {path}:\n{exc}") from exc
