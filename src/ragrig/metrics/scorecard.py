"""The production scorecard: three weighted axes, their floors, the gate and the diagnosis (pure).

Axes: faithfulness (is the answer supported by its context?), relevance (do the retrieved
passages answer the question?), correctness (is the answer right?). Each axis has a weight and a
floor; a floor is `hard` (below it the system fails the gate whatever the weighted score) or
`soft` (a warning: review retrieval, prompt or model).

An axis with no value (nothing scored) is **not measured**: it is never read as 0 and never
passes silently. A not-measured axis fails its floor with the floor's kind, so a hard axis that
was not measured fails the gate (`fail_hard`, listed in `unmeasured`), a soft one warns. The
weighted score is taken over the measured axes with their weights renormalised, and the notes
say so.

The same rules give the verdict of one query (its own axis values) and of one slice (its mean
axis values).

**What a floor is tested on** is decided once, by `floor_readings` under a `FloorRule`, for the
report (the whole run and each slice) and for `ragrig gate`, which re-reads the report's
recorded decision: `lower_bound` tests each axis's floor on the lower bound of its seeded
percentile-bootstrap interval over the answers it averages (with people's labels, faithfulness
on the prediction-powered bound instead), `estimate` on the axis's mean. One answer has no
interval: its floor reads the value, and the reading says so. The scorecard records the rule in
words (`rule`), which the console, the HTML page and the gate's JUnit file print.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

AXES = ("faithfulness", "relevance", "correctness")
HARD, SOFT = "hard", "soft"
PASS, FAIL_HARD, FAIL_SOFT = "pass", "fail_hard", "fail_soft"
GATES = (PASS, FAIL_SOFT, FAIL_HARD)
OK, LOW, NOT_MEASURED = "pass", "below_floor", "not_measured"
# A floor is inclusive (>= min); a mean that misses it by floating-point rounding alone
# (0.7 averaged as 0.6999999999999998) still meets it.
FLOOR_TOLERANCE = 1e-9

DEFAULT_WEIGHTS = {"faithfulness": 0.5, "relevance": 0.25, "correctness": 0.25}
DEFAULT_FLOORS = {
    "faithfulness": {"min": 0.85, "kind": HARD},
    "relevance": {"min": 0.75, "kind": SOFT},
    "correctness": {"min": 0.70, "kind": SOFT},
}

# Diagnosis codes and their texts. The first three are METRICS.md's rules (texts as in
# reference_examples.json); the others cover the remaining combinations so that every outcome
# is said in words.
DIAGNOSES = {
    "all_ok": "all axes at or above their floors",
    "measured_ok": "every measured axis at or above its floor",
    "faithfulness_low_others_ok": (
        "hallucination: the generator invents facts absent from the context"
    ),
    "relevance_low_faithfulness_ok": "weak retrieval: chunking, indexing or embeddings",
    "correctness_low_others_ok": (
        "prompt or model: the information was there but was restated wrongly"
    ),
    "faithfulness_relevance_low": (
        "weak retrieval and hallucination: the context misses the evidence and the generator "
        "fills the gap; fix retrieval first"
    ),
    "faithfulness_correctness_low": (
        "hallucination: the context is relevant but the answer departs from it and is wrong"
    ),
    "all_low": (
        "all three axes below their floors: retrieval, generator and prompt all fail; "
        "discard these answers"
    ),
    "not_measured": "no axis measured: nothing to diagnose",
}


def normalise_weights(weights: Mapping[str, float], names: list[str] | tuple[str, ...]) -> dict:
    """The weights of `names` divided by their sum ({} when they sum to 0)."""
    total = sum(float(weights.get(n, 0.0)) for n in names)
    if total <= 0:
        return {}
    return {n: float(weights.get(n, 0.0)) / total for n in names}


def combine(values: Mapping[str, float | None], weights: Mapping[str, float]) -> tuple:
    """Weighted mean of the parts that have a value, weights renormalised over them.

    Returns (value or None when no weighted part has a value, {part: weight used}). A part with a
    value but weight 0 is not used; NaN counts as no value."""
    present = [
        n
        for n, v in values.items()
        if v is not None
        and not (isinstance(v, float) and math.isnan(v))
        and float(weights.get(n, 0.0)) > 0
    ]
    used = normalise_weights(weights, present)
    if not used:
        return None, {}
    return sum(used[n] * float(values[n]) for n in present), used


def _is_value(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and not math.isnan(float(v))


@dataclass(frozen=True)
class Axis:
    name: str
    value: float | None
    n: int
    floor: float
    kind: str
    # what the floor is tested on when it is not the value: e.g. the lower bound of the
    # faithful share's prediction-powered interval (`gate_reads` names it)
    gate_value: float | None = None
    gate_reads: str | None = None

    @property
    def tested(self) -> float | None:
        """The number the floor is compared with: `gate_value` when set, else the value."""
        if self.value is None:
            return None
        return self.value if self.gate_value is None else self.gate_value

    @property
    def status(self) -> str:
        if self.value is None:
            return NOT_MEASURED
        return OK if self.tested >= self.floor - FLOOR_TOLERANCE else LOW

    @property
    def passed(self) -> bool | None:
        """True / False against the floor; None when not measured (never a silent pass)."""
        return None if self.value is None else self.status == OK

    def to_dict(self) -> dict[str, Any]:
        out = {
            "value": self.value,
            "n": self.n,
            "floor": self.floor,
            "kind": self.kind,
            "passed": self.passed,
            "status": self.status,
        }
        if self.gate_value is not None:
            out.update(gate_value=self.gate_value, gate_reads=self.gate_reads)
        return out


FLOORS_ON = ("lower_bound", "estimate")


@dataclass(frozen=True)
class FloorRule:
    """What every floor is tested on: `on` lower_bound (the interval's lower bound, drawn by
    ragrig.metrics.bootstrap with `resamples`, `level`, `seed`) or estimate (the mean)."""

    on: Literal["lower_bound", "estimate"] = "lower_bound"
    resamples: int = 1000
    level: float = 0.95
    seed: int = 0

    def __post_init__(self) -> None:
        if self.on not in FLOORS_ON:
            raise ValueError(f"floors_on must be one of {list(FLOORS_ON)}, got {self.on!r}")
        if self.resamples < 1 or not 0.0 < self.level < 1.0:
            raise ValueError(
                f"floor rule needs resamples >= 1 and 0 < level < 1, got "
                f"{self.resamples}, {self.level}"
            )

    def describe(self, labelled: str | None = None) -> str:
        """The rule in words, as the console, HTML page and JUnit file print it."""
        if self.on == "estimate":
            text = "floors tested on each axis's estimate (its mean)"
        else:
            text = (
                f"floors tested on the lower bound of each axis's {self.level:.0%} bootstrap "
                f"interval ({self.resamples} resamples, seed {self.seed}; one answer: its value)"
            )
        return text + (f"; faithfulness on the {labelled} of people's labels" if labelled else "")

    def to_dict(self) -> dict[str, Any]:
        return {"on": self.on, "resamples": self.resamples, "level": self.level, "seed": self.seed}


def floor_readings(
    per_answer: Mapping[str, Sequence[float]],
    rule: FloorRule,
    labelled: Mapping[str, tuple[float, str]] | None = None,
) -> dict[str, tuple[float, str]]:
    """axis -> (the number its floor is tested on, what that number is), for `evaluate`'s
    `gates`. `per_answer[axis]` holds the values the axis averages (missing answers left out);
    `labelled[axis]` (people's labels: the PPI bound or estimate) wins over the rule."""
    from ragrig.metrics.bootstrap import bootstrap_interval

    out: dict[str, tuple[float, str]] = {}
    for name in AXES:
        if labelled and name in labelled:
            out[name] = labelled[name]
            continue
        values = [float(v) for v in per_answer.get(name, ()) if _is_value(v)]
        if not values:
            continue
        if rule.on == "estimate":
            continue  # the floor reads the axis's value itself
        if len(values) == 1:
            out[name] = (values[0], "estimate: one answer, no interval")
        elif min(values) == max(values):  # every resample's mean is that value, unrounded
            out[name] = (values[0], f"bootstrap lower bound, n={len(values)}")
        else:
            low, _ = bootstrap_interval(
                values, seed=rule.seed, resamples=rule.resamples, level=rule.level
            )
            out[name] = (float(low), f"bootstrap lower bound, n={len(values)}")
    return out


@dataclass(frozen=True)
class Scorecard:
    axes: dict[str, Axis]
    weights: dict[str, float]
    weighted: float | None
    gate: str
    failed: list[str]
    unmeasured: list[str]
    diagnosis_code: str
    diagnosis: str
    notes: list[str] = field(default_factory=list)
    rule: str = ""  # what the floors were tested on, in words (FloorRule.describe)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "weights": dict(self.weights),
            "floors": {a.name: {"min": a.floor, "kind": a.kind} for a in self.axes.values()},
            "axes": {name: a.to_dict() for name, a in self.axes.items()},
            "weighted": self.weighted,
            "gate": self.gate,
            "failed": list(self.failed),
            "unmeasured": list(self.unmeasured),
            "diagnosis_code": self.diagnosis_code,
            "diagnosis": self.diagnosis,
            "notes": list(self.notes),
        }


def check_config(weights: Mapping[str, float], floors: Mapping[str, Mapping[str, Any]]) -> None:
    """Every axis has a non-negative weight (not all 0) and a floor in [0, 1] of kind hard/soft."""
    for name in AXES:
        if name not in weights or not _is_value(weights[name]) or weights[name] < 0:
            raise ValueError(f"scorecard weight of {name!r} missing or negative: {weights}")
        fl = floors.get(name)
        if not isinstance(fl, Mapping) or not _is_value(fl.get("min")):
            raise ValueError(f"scorecard floor of {name!r} missing its min: {floors}")
        if not 0.0 <= float(fl["min"]) <= 1.0 or fl.get("kind") not in (HARD, SOFT):
            raise ValueError(f"scorecard floor of {name!r} needs min in [0, 1], kind hard|soft")
    extra = sorted((set(weights) | set(floors)) - set(AXES))
    if extra:
        raise ValueError(f"scorecard: unknown axes {extra}; axes are {list(AXES)}")
    if sum(float(weights[a]) for a in AXES) <= 0:
        raise ValueError("scorecard weights are all 0")


def diagnose(statuses: Mapping[str, str]) -> tuple[str, str]:
    """(code, text) from each axis's status (pass / below_floor / not_measured).

    "Low" is below the floor; "fine" is at or above it. A rule that needs an axis to be fine
    still applies when that axis was not measured, and the text then names it as not measured."""
    low = {a for a in AXES if statuses.get(a) == LOW}
    unmeasured = [a for a in AXES if statuses.get(a, NOT_MEASURED) == NOT_MEASURED]
    if len(unmeasured) == len(AXES):
        return "not_measured", DIAGNOSES["not_measured"]
    if not low:
        code = "measured_ok" if unmeasured else "all_ok"
    elif low == set(AXES):
        code = "all_low"
    elif low == {"faithfulness"}:
        code = "faithfulness_low_others_ok"
    elif "relevance" in low and "faithfulness" not in low:
        code = "relevance_low_faithfulness_ok"
    elif low == {"correctness"}:
        code = "correctness_low_others_ok"
    elif low == {"faithfulness", "relevance"}:
        code = "faithfulness_relevance_low"
    else:  # {"faithfulness", "correctness"}
        code = "faithfulness_correctness_low"
    text = DIAGNOSES[code]
    if unmeasured:
        text += f" (not measured: {', '.join(unmeasured)})"
    return code, text


def evaluate(
    values: Mapping[str, float | None],
    weights: Mapping[str, float],
    floors: Mapping[str, Mapping[str, Any]],
    counts: Mapping[str, int] | None = None,
    gates: Mapping[str, tuple[float, str]] | None = None,
    rule: str = "",
) -> Scorecard:
    """The scorecard of one set of axis values (the whole run, one slice or one query).

    `values[axis]` is the axis's mean, or None (or absent) when not measured; `counts[axis]` how
    many answers it averages; `gates[axis]` = (number, what it is) tests that axis's floor on
    another number than its value (the weighted score still reads the value; `floor_readings`
    gives them); `rule` says in words what the floors were tested on."""
    check_config(weights, floors)
    counts = counts or {}
    gates = gates or {}
    axes = {}
    for name in AXES:
        v = values.get(name)
        v = float(v) if _is_value(v) else None
        g = gates.get(name)
        if g is not None and not _is_value(g[0]):
            raise ValueError(f"scorecard gate value of {name!r} is not a number: {g!r}")
        axes[name] = Axis(
            name,
            v,
            int(counts.get(name, 0 if v is None else 1)),
            float(floors[name]["min"]),
            str(floors[name]["kind"]),
            None if g is None else float(g[0]),
            None if g is None else str(g[1]),
        )
    measured = [a for a in AXES if axes[a].value is not None]
    unmeasured = [a for a in AXES if axes[a].value is None]
    weighted, used = combine({a: axes[a].value for a in AXES}, weights)
    notes = []
    if unmeasured and weighted is not None:
        notes.append(
            f"weighted score over {', '.join(measured)} only, weights renormalised "
            f"({', '.join(f'{a} {w:.3g}' for a, w in used.items())}); not measured: "
            f"{', '.join(unmeasured)}"
        )
    failed = [a for a in AXES if axes[a].status != OK]
    if any(axes[a].kind == HARD for a in failed):
        gate = FAIL_HARD
    elif failed:
        gate = FAIL_SOFT
    else:
        gate = PASS
    for a in failed:
        ax = axes[a]
        if ax.value is None:
            notes.append(f"{a} not measured: its {ax.kind} floor {ax.floor:g} counts as failed")
    code, text = diagnose({a: axes[a].status for a in AXES})
    return Scorecard(
        axes=axes,
        weights=normalise_weights(weights, AXES),
        weighted=weighted,
        gate=gate,
        failed=failed,
        unmeasured=unmeasured,
        diagnosis_code=code,
        diagnosis=text,
        notes=notes,
        rule=rule,
    )


def gate_exit_code(card: Scorecard) -> int:
    """`ragrig gate`'s exit code: 1 when a hard axis is measured below its floor, else 2 when a
    hard axis was not measured (nothing to gate on), else 0 (soft failures only warn)."""
    hard = [a for a in card.failed if card.axes[a].kind == HARD]
    if any(card.axes[a].value is not None for a in hard):
        return 1
    if hard:
        return 2
    return 0


def from_dict(section: Mapping[str, Any]) -> Scorecard:
    """Re-evaluate a metrics.json `scorecard` section from its own axes, weights and floors
    (so a gate reads exactly the rules the report used). Raises ValueError on a malformed one."""
    if not isinstance(section, Mapping):
        raise ValueError("scorecard section is not an object")
    try:
        axes = section["axes"]
        weights = section["weights"]
        floors = section["floors"]
    except KeyError as exc:
        raise ValueError(f"scorecard section lacks {exc.args[0]!r}") from None
    if not isinstance(axes, Mapping) or not isinstance(weights, Mapping):
        raise ValueError("scorecard axes/weights are not objects")
    values, counts, gates = {}, {}, {}
    for name in AXES:
        entry = axes.get(name)
        if not isinstance(entry, Mapping) or "value" not in entry:
            raise ValueError(f"scorecard axis {name!r} missing or without a value field")
        v = entry["value"]
        if v is not None and not _is_value(v):
            raise ValueError(f"scorecard axis {name!r} has a non-numeric value {v!r}")
        values[name] = v
        counts[name] = int(entry.get("n", 0) or 0)
        if entry.get("gate_value") is not None:
            gates[name] = (entry["gate_value"], str(entry.get("gate_reads") or "gate value"))
    return evaluate(values, weights, floors, counts, gates, str(section.get("rule") or ""))
