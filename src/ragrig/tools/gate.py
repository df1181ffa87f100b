"""The release gate: a run's checks against pre-registered bounds (conf/gate.yaml), one line
each, a JUnit XML file for CI, and an exit code naming what failed.

Checks, each with its value, bound and verdict:

* **floors** of the three scorecard axes exactly as the report decided them: the floors, the
  number each is tested on and the rule (report.scorecard.floors_on, one function for both:
  ragrig.metrics.scorecard.floor_readings). A hard floor fails the gate; a soft one warns.
* **latency**: p95 of a stage (or `total`) in ms <= its SLO.
* **cost**: mean cost per query in USD <= the budget.
* **filters**: the false-exclusion rate <= its limit (a run with no filters: skipped, named).
* **regression** against a baseline run, per measure: the paired mean of (run - baseline) over
  the queries both answered, with its bootstrap interval; it passes when the interval's lower
  bound is >= -budget (non-inferiority: a drop larger than the budget is ruled out).
* **coverage** of the query set, read from `ragrig coverage`'s JSON (ragrig.metrics.coverage):
  the fewest queries in a cell of the intent x document-type matrix >= its minimum (an empty
  cell counts 0 unless it is exempt), and the share of production traffic in intents the set
  has no query of <= its maximum. A report of another query set than the run's (its recorded
  sha256 against the queries file) is not read: not measured.

Exit: 0 every check passes (soft floors may warn), 1 a check failed, 2 the metrics cannot be
read or a hard axis was not measured (nothing to gate on).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, model_validator

from ragrig.core.config import NonEmptyStr, Section, Seed
from ragrig.core.errors import DataValidationError

PASS, FAIL, WARN, SKIP, UNMEASURED = "pass", "FAIL", "warn", "skipped", "not measured"


class CoverageBounds(Section):
    """conf/gate.yaml `coverage`: the coverage checks, read from `ragrig coverage`'s JSON."""

    report: str = Field(
        "reports/coverage.json", description="the JSON `ragrig coverage --out` wrote"
    )
    queries: str = Field(
        "data/parse/queries.parquet",
        description="the run's queries: the report must have been made of this file",
    )
    min_queries_per_cell: int | None = Field(None, ge=1)
    max_uncovered_traffic: float | None = Field(None, ge=0, le=1)
    exempt_cells: list[NonEmptyStr] = Field(
        default_factory=list,
        description="'intent x doc_type' cells no query is expected in (left out of the minimum)",
    )


class GateConfig(Section):
    """conf/gate.yaml: every bound fixed before the run it gates. The axis floors, and what they
    are tested on, are the report's (report.scorecard.floors, floors_on)."""

    resamples: int = Field(
        1000, ge=100, description="bootstrap resamples of each regression interval"
    )
    level: float = Field(0.95, gt=0, lt=1, description="two-sided coverage of those intervals")
    seed: Seed = 13
    latency_p95_ms: dict[str, Annotated[float, Field(gt=0)]] = Field(
        default_factory=dict, description="stage (or total) -> p95 SLO in ms"
    )
    cost_per_query_usd: float | None = Field(None, ge=0)
    max_false_exclusion: float | None = Field(None, ge=0, le=1)
    baseline: str | None = Field(None, description="a reports folder of the baseline run")
    regression_budget: dict[str, Annotated[float, Field(ge=0)]] = Field(
        default_factory=dict,
        description="per-query measure (per_query.parquet) -> the largest drop accepted",
    )
    coverage: CoverageBounds = Field(default_factory=CoverageBounds)

    @model_validator(mode="before")
    @classmethod
    def _floors_are_the_reports(cls, data: Any) -> Any:
        # the gate and the report once read the floors each their own way; one rule now
        if isinstance(data, dict) and "floors_on" in data:
            raise ValueError(
                "floors_on is the report's setting (report.scorecard.floors_on): the gate "
                "reads the floors as the report decided them; remove it from the gate config"
            )
        return data


@dataclass(frozen=True)
class Check:
    name: str  # e.g. "floor faithfulness", "latency p95 total"
    kind: str  # floor, latency, cost, filters, regression
    value: float | None
    bound: str  # e.g. ">= 0.85", "<= 5000"
    verdict: str  # PASS, FAIL, WARN, SKIP, UNMEASURED
    detail: str = ""
    hard: bool = True  # a failure fails the gate (soft floors only warn)
    reads: str = ""  # floors: what the value is (the estimate, a lower bound and whose)
    estimate: float | None = None  # floors: the axis's own value

    def line(self) -> str:
        value = "-" if self.value is None else f"{self.value:.4f}"
        text = f"{self.name:<34} {value:>10}  {self.bound:<12} {self.verdict}"
        return text + (f"  ({self.detail})" if self.detail else "")

    @property
    def failed(self) -> bool:
        return self.verdict == FAIL or (self.verdict == UNMEASURED and self.hard)


def load_config(path: Path | None) -> GateConfig:
    """conf/gate.yaml (or `path`); no file: the floors alone, on their lower bounds."""
    from ragrig.core.config import load_config_file

    return load_config_file(GateConfig, path, "conf/gate.yaml")


def per_query_table(reports: Path) -> Any:
    """A reports folder's per-query table (run/per_query.parquet), or None."""
    import pandas as pd

    for path in (reports / "run" / "per_query.parquet", reports / "per_query.parquet"):
        if path.exists():
            return pd.read_parquet(path)
    return None


def _interval(values: list[float], cfg: GateConfig) -> tuple[float, float] | None:
    from ragrig.metrics.deltas import bootstrap_interval

    return bootstrap_interval(values, cfg.seed, n_resamples=cfg.resamples, confidence=cfg.level)


def floor_checks(metrics: dict) -> list[Check]:
    """The three floors as the report decided them (ragrig.metrics.scorecard.floor_readings,
    re-evaluated from the recorded scorecard): the same number, rule and verdict."""
    from ragrig.metrics.scorecard import HARD
    from ragrig.metrics.scorecard import from_dict as scorecard_from_dict

    section = metrics["scorecard"]
    if isinstance(section, dict) and "rule" not in section:
        raise ValueError(
            "it records no floor rule (written by an older report); rerun the report stage "
            "(dvc repro report)"
        )
    card = scorecard_from_dict(section)
    out = []
    for name, ax in card.axes.items():
        hard = ax.kind == HARD
        bound = f">= {ax.floor:g}"
        if ax.value is None:
            out.append(Check(f"floor {name}", "floor", None, bound, UNMEASURED, ax.kind, hard))
            continue
        reads = ax.gate_reads or f"estimate, n={ax.n}"
        verdict = PASS if ax.passed else (FAIL if hard else WARN)
        detail = f"{ax.kind}, {reads}; estimate {ax.value:.4f}"
        out.append(
            Check(
                f"floor {name}", "floor", ax.tested, bound, verdict, detail, hard, reads, ax.value
            )
        )
    return out


def latency_checks(metrics: dict, cfg: GateConfig) -> list[Check]:
    lat = metrics.get("latency_ms") or {}
    out = []
    for stage, slo in sorted(cfg.latency_p95_ms.items()):
        p95 = (lat.get(stage) or {}).get("p95")
        name, bound = f"latency p95 {stage} (ms)", f"<= {slo:g}"
        if p95 is None:
            out.append(Check(name, "latency", None, bound, UNMEASURED, "no such stage timed"))
        else:
            out.append(Check(name, "latency", p95, bound, PASS if p95 <= slo else FAIL))
    return out


def cost_checks(metrics: dict, cfg: GateConfig) -> list[Check]:
    if cfg.cost_per_query_usd is None:
        return []
    mean = (metrics.get("cost_usd_per_query") or {}).get("mean")
    bound = f"<= {cfg.cost_per_query_usd:g}"
    if mean is None:
        return [Check("cost per query (USD)", "cost", None, bound, UNMEASURED)]
    verdict = PASS if mean <= cfg.cost_per_query_usd else FAIL
    return [Check("cost per query (USD)", "cost", mean, bound, verdict)]


def filter_checks(metrics: dict, cfg: GateConfig) -> list[Check]:
    if cfg.max_false_exclusion is None:
        return []
    bound = f"<= {cfg.max_false_exclusion:g}"
    filters = metrics.get("filters")
    if filters is None:
        return [Check("filter false exclusion", "filters", None, bound, SKIP, "no filters", False)]
    rate = filters["false_exclusion_rate"]
    verdict = PASS if rate <= cfg.max_false_exclusion else FAIL
    detail = f"{filters['excluded_queries']} of {filters['eligible_queries']} queries"
    return [Check("filter false exclusion", "filters", rate, bound, verdict, detail)]


def regression_checks(per_query: Any, baseline: Any, cfg: GateConfig) -> list[Check]:
    out = []
    for measure, budget in sorted(cfg.regression_budget.items()):
        name, bound = f"regression {measure}", f"low >= {-budget:g}"
        if per_query is None or baseline is None:
            what = "no per-query table" if per_query is None else "no baseline table"
            out.append(Check(name, "regression", None, bound, UNMEASURED, what))
            continue
        a = per_query[per_query["measure"] == measure].set_index("qid")["value"].dropna()
        b = baseline[baseline["measure"] == measure].set_index("qid")["value"].dropna()
        common = sorted(set(a.index) & set(b.index))
        if len(common) < 2:
            detail = f"{len(common)} query(ies) measured in both runs"
            out.append(Check(name, "regression", None, bound, UNMEASURED, detail))
            continue
        deltas = [float(a[q]) - float(b[q]) for q in common]
        mean = sum(deltas) / len(deltas)
        lo, hi = _interval(deltas, cfg)
        verdict = PASS if lo >= -budget else FAIL
        unpaired = len(set(a.index) ^ set(b.index))
        detail = f"paired on {len(common)} queries, interval [{lo:+.4f}, {hi:+.4f}]"
        detail += f", {unpaired} unpaired left out" if unpaired else ""
        out.append(Check(name, "regression", mean, bound, verdict, detail))
    return out


def _coverage_report(cov: CoverageBounds) -> tuple[dict | None, str]:
    """(the coverage report, "") or (None, why it cannot be read)."""
    from ragrig.core.io import file_sha256

    path = Path(cov.report)
    if not path.is_file():
        return None, f"no coverage report at {path} (run ragrig coverage)"
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        cells = report["cells"]
        if not isinstance(cells, list):
            raise TypeError("cells is not a list")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        return None, f"{path} is not a coverage report ({type(exc).__name__}: {exc})"
    queries = Path(cov.queries)
    recorded = report.get("queries_sha256")
    if queries.is_file():
        digest = file_sha256(queries)
        if recorded is None:
            return None, f"{path} records no queries sha256 (rerun ragrig coverage)"
        if recorded != digest:
            return None, f"{path} is of another query set than {queries} (rerun ragrig coverage)"
    return report, ""


def coverage_checks(cfg: GateConfig) -> list[Check]:
    """The query set's coverage (module doc)."""
    from ragrig.core.text import counted

    cov = cfg.coverage
    wanted = []
    if cov.min_queries_per_cell is not None:
        wanted.append(("coverage min queries per cell", f">= {cov.min_queries_per_cell}"))
    if cov.max_uncovered_traffic is not None:
        wanted.append(("coverage uncovered traffic", f"<= {cov.max_uncovered_traffic:g}"))
    if not wanted:
        return []
    report, why = _coverage_report(cov)
    if report is None:
        return [Check(name, "coverage", None, bound, UNMEASURED, why) for name, bound in wanted]
    out = []
    if cov.min_queries_per_cell is not None:
        exempt = set(cov.exempt_cells)
        cells = [
            (f"{c['intent']} x {c['doc_type']}", int(c["queries"]))
            for c in report["cells"]
            if f"{c['intent']} x {c['doc_type']}" not in exempt
        ]
        name, bound = wanted[0]
        if not cells:
            out.append(Check(name, "coverage", None, bound, UNMEASURED, "no cell to check"))
        else:
            low = min(n for _, n in cells)
            short = sorted((c for c in cells if c[1] < cov.min_queries_per_cell),
                           key=lambda c: (c[1], c[0]))  # fmt: skip
            detail = (
                f"{len(cells)} cells"
                + (f", {len(exempt)} exempt" if exempt else "")
                + (f"; short: {counted(short, 'cell', form=lambda c: f'{c[0]} {c[1]}')}"
                   if short else "")
            )  # fmt: skip
            verdict = PASS if low >= cov.min_queries_per_cell else FAIL
            out.append(Check(name, "coverage", float(low), bound, verdict, detail))
    if cov.max_uncovered_traffic is not None:
        name, bound = wanted[-1]
        traffic = report.get("traffic")
        if not isinstance(traffic, dict) or "uncovered_share" not in traffic:
            why = f"{cov.report} has no production traffic (ragrig coverage --traffic LOG)"
            out.append(Check(name, "coverage", None, bound, UNMEASURED, why))
        else:
            share = float(traffic["uncovered_share"])
            uncovered = list(traffic.get("uncovered") or [])
            detail = f"of {traffic.get('lines', '?')} lines; uncovered intents: " + (
                counted(uncovered, "intent") if uncovered else "none"
            )
            verdict = PASS if share <= cov.max_uncovered_traffic else FAIL
            out.append(Check(name, "coverage", share, bound, verdict, detail))
    return out


def run_checks(
    metrics_path: Path, cfg: GateConfig, baseline: Path | None = None
) -> tuple[dict, list[Check]]:
    """Every configured check of the run whose metrics.json is `metrics_path` (its per-query
    table beside it, in run/). Raises DataValidationError when the metrics cannot be read."""
    try:
        metrics = json.loads(Path(metrics_path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataValidationError(f"cannot read {metrics_path}: {exc}") from None
    if not isinstance(metrics, dict) or metrics.get("scorecard") is None:
        raise DataValidationError(
            f"{metrics_path} has no scorecard section (rerun the report stage)"
        )
    per_query = per_query_table(Path(metrics_path).parent)
    base_dir = baseline or (Path(cfg.baseline) if cfg.baseline else None)
    base = None
    if base_dir is not None:
        base = per_query_table(Path(base_dir))
        if base is None:
            raise DataValidationError(f"baseline {base_dir} has no run/per_query.parquet")
    try:
        checks = floor_checks(metrics)
    except ValueError as exc:
        raise DataValidationError(f"{metrics_path}: malformed scorecard: {exc}") from None
    checks += latency_checks(metrics, cfg)
    checks += cost_checks(metrics, cfg)
    checks += filter_checks(metrics, cfg)
    checks += regression_checks(per_query, base, cfg)
    checks += coverage_checks(cfg)
    return metrics, checks


def exit_code(checks: list[Check]) -> int:
    """1 when a check failed on a measured value, else 2 when a hard axis was not measured,
    else 0."""
    if any(c.verdict == FAIL for c in checks):
        return 1
    if any(c.failed for c in checks):
        return 2
    return 0


def write_junit(checks: list[Check], path: Path, rule: str = "") -> None:
    """One JUnit testsuite `ragrig gate`, one testcase per check: a failure element for a failed
    or unmeasured hard check, skipped for a skipped one; the check's line as its system-out; the
    scorecard's floor rule as the suite's `floor_rule` property."""
    from xml.etree import ElementTree as ET

    failures = sum(1 for c in checks if c.failed)
    skipped = sum(1 for c in checks if c.verdict == SKIP)
    suite = ET.Element(
        "testsuite",
        name="ragrig gate",
        tests=str(len(checks)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
    )
    if rule:
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="floor_rule", value=rule)
    for c in checks:
        case = ET.SubElement(suite, "testcase", classname=f"ragrig.gate.{c.kind}", name=c.name)
        if c.failed:
            ET.SubElement(case, "failure", message=c.line().strip(), type=c.verdict)
        elif c.verdict == SKIP:
            ET.SubElement(case, "skipped", message=c.detail or "skipped")
        ET.SubElement(case, "system-out").text = c.line()
    root = ET.Element("testsuites", name="ragrig gate")
    root.append(suite)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
    tmp.replace(path)
