"""The five guardrails of `ragrig traces`, per window, each with its bound in conf/traces.yaml:

* faithfulness below its floor (`floors.faithfulness`): the judged sample's interval lower bound
  (ragrig.traces.evaluate, which adds the slices below to its alert, as for the other axes);
* p95 latency above its SLO (`latency_p95_ms`), and per stage where the log has stage timings
  and a stage has an SLO (`stage_latency_p95_ms`);
* the filter false-exclusion rate above its bound (`filter_false_exclusion`): of the reviewed
  interactions (a `gold` list and a logged `filter_excluded`), those whose every gold document
  the filter removed (METRICS.md's definition, ragrig.metrics.filters); the alert needs the
  rate's Wilson lower bound above the bound and `min_reviewed` reviewed interactions;
* the regeneration rate outside its control band: the rate of the first `reference_windows`
  windows as p0, and for a window of n interactions the binomial band [lo, hi] of n draws at
  p0, each tail at level/2 with level = false_alarms_per_day over the windows in a day (so the
  band widens for a quiet window, and a day of clean windows raises about that many alarms);
* mean cost per interaction above its budget (`cost_per_query_usd`).

Latency, cost, filter exclusions and regenerations need no judge: they are read from every
line, not only the judged sample. A window with fewer values than a guardrail's minimum
(`min_per_window`; `min_reviewed` for the filter; the reference windows for the band) does not
alert on it: its row says `too few`. An alert line names the window, the guardrail, the value,
the bound and the affected slices: each slice value (the log's `slices`, e.g. locale=de) with
`slice_min` values whose own figure breaches the bound, worst first.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from typing import Any

GUARDRAILS = ("faithfulness", "latency", "filter_false_exclusion", "regeneration", "cost")


@dataclass
class Traffic:
    """What the guardrails read of a window's lines (or of one slice's)."""

    n: int = 0
    latency: array = field(default_factory=lambda: array("d"))
    stage_latency: dict[str, array] = field(default_factory=dict)
    cost: array = field(default_factory=lambda: array("d"))
    regenerations: int = 0
    reviewed: int = 0  # lines with gold and a logged filter
    excluded: int = 0  # of those, every gold document removed by the filter
    axes: dict[str, list[float]] = field(default_factory=dict)  # judged values (slices only)

    def observe(self, x: Any) -> None:
        self.n += 1
        if x.latency_ms is not None:
            self.latency.append(x.latency_ms)
        for stage, ms in x.stage_latency_ms:
            self.stage_latency.setdefault(stage, array("d")).append(ms)
        if x.cost_usd is not None:
            self.cost.append(x.cost_usd)
        self.regenerations += x.regenerates is not None
        if x.gold and x.filter_excluded is not None:
            self.reviewed += 1
            self.excluded += x.gold <= x.filter_excluded


def p95(values: array) -> float:
    import numpy as np

    return float(np.percentile(np.frombuffer(values, dtype="d"), 95))


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of k successes in n."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def regeneration_band(p0: float, n: int, level: float) -> tuple[float, float]:
    """The rates [lo, hi] outside which a window of n lines is out of control: the binomial
    quantiles at level/2 and 1 - level/2 of n draws at p0, as rates."""
    from scipy.stats import binom

    lo = binom.ppf(level / 2, n, p0)
    hi = binom.ppf(1 - level / 2, n, p0)
    return float(lo) / n, float(hi) / n


@dataclass(frozen=True)
class Check:
    """One guardrail in one window."""

    window: str
    guardrail: str  # latency, latency[generate], filter_false_exclusion, regeneration, cost
    value: float | None
    bound: str  # what breaches: "> 2000", "outside [0.01, 0.05]"
    n: int
    status: str  # ok | alert | too few | not logged
    slices: tuple[str, ...] = ()

    def line(self) -> str:
        text = (
            f"ALERT window {self.window}: {self.guardrail} {self.value:.4g} (n={self.n}), "
            f"bound {self.bound}"
        )
        return text + (f"; slices: {', '.join(self.slices)}" if self.slices else "")

    def record(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "guardrail": self.guardrail,
            "value": self.value,
            "bound": self.bound,
            "n": self.n,
            "status": self.status,
            "slices": list(self.slices),
        }


def _worst(found: list[tuple[float, str]], higher_is_worse: bool) -> tuple[str, ...]:
    return tuple(t for _, t in sorted(found, key=lambda f: -f[0] if higher_is_worse else f[0]))


def _slices_above(slices: dict, cfg: Any, measure, bound: float) -> tuple[str, ...]:
    found = []
    for (dim, value), t in sorted(slices.items()):
        got = measure(t)
        if got is not None and got[1] >= cfg.slice_min and got[0] > bound:
            found.append((got[0], f"{dim}={value} {got[0]:.4g} (n={got[1]})"))
    return _worst(found, True)


def check_window(
    window: str, traffic: Traffic, slices: dict, cfg: Any, min_n: int, band: tuple | None
) -> list[Check]:
    """Every guardrail but faithfulness in one window (module doc). `band`: (p0, level) of the
    regeneration band, None before the reference windows are known or when off."""
    g = cfg.guardrails
    out: list[Check] = []

    def upper(name: str, values_of, stat, bound: float | None) -> None:
        if bound is None:
            return
        values = values_of(traffic)
        if not len(values):
            out.append(Check(window, name, None, f"> {bound:g}", 0, "not logged"))
            return
        value = stat(values)
        if len(values) < min_n:
            out.append(Check(window, name, value, f"> {bound:g}", len(values), "too few"))
            return
        if value <= bound:
            out.append(Check(window, name, value, f"> {bound:g}", len(values), "ok"))
            return

        def measure(t: Traffic):
            v = values_of(t)
            return (stat(v), len(v)) if len(v) else None

        named = _slices_above(slices, g, measure, bound)
        out.append(Check(window, name, value, f"> {bound:g}", len(values), "alert", named))

    def mean(v: array) -> float:
        return float(sum(v) / len(v))

    upper("latency", lambda t: t.latency, p95, g.latency_p95_ms)
    for stage, slo in sorted(g.stage_latency_p95_ms.items()):
        upper(f"latency[{stage}]", lambda t, s=stage: t.stage_latency.get(s, ()), p95, slo)
    upper("cost", lambda t: t.cost, mean, g.cost_per_query_usd)

    if g.filter_false_exclusion is not None:
        bound = g.filter_false_exclusion
        k, n = traffic.excluded, traffic.reviewed
        if n == 0:
            out.append(Check(window, "filter_false_exclusion", None, f"> {bound:g}", 0, "not logged"))  # fmt: skip
        elif n < g.min_reviewed:
            out.append(Check(window, "filter_false_exclusion", k / n, f"> {bound:g}", n, "too few"))  # fmt: skip
        else:
            low, _ = wilson(k, n)
            alert = low > bound

            def share(t: Traffic):
                return (t.excluded / t.reviewed, t.reviewed) if t.reviewed else None

            named = _slices_above(slices, g, share, bound) if alert else ()
            out.append(
                Check(window, "filter_false_exclusion", k / n, f"> {bound:g} (Wilson lower "
                      f"bound {low:.4f})", n, "alert" if alert else "ok", named)
            )  # fmt: skip

    if g.regeneration is not None:
        if band is None:
            out.append(Check(window, "regeneration", None, "band not set", traffic.n, "too few"))
        elif traffic.n < min_n:
            rate = traffic.regenerations / traffic.n if traffic.n else None
            out.append(Check(window, "regeneration", rate, "band", traffic.n, "too few"))
        else:
            p0, level = band
            lo, hi = regeneration_band(p0, traffic.n, level)
            rate = traffic.regenerations / traffic.n
            text = f"outside [{lo:.4f}, {hi:.4f}] (reference rate {p0:.4f})"
            alert = rate < lo or rate > hi
            named: tuple[str, ...] = ()
            if alert:
                found = []
                for (dim, value), t in sorted(slices.items()):
                    if t.n >= g.slice_min:
                        s_lo, s_hi = regeneration_band(p0, t.n, level)
                        r = t.regenerations / t.n
                        if r < s_lo or r > s_hi:
                            found.append((abs(r - p0), f"{dim}={value} {r:.4g} (n={t.n})"))
                named = _worst(found, True)
            out.append(
                Check(
                    window, "regeneration", rate, text, traffic.n, "alert" if alert else "ok", named
                )  # fmt: skip
            )
    return out


def reference_band(traffics: list[Traffic], cfg: Any, min_n: int) -> tuple[float, float] | None:
    """(p0, level) of the regeneration band: the rate over the first `reference_windows`
    windows with `min_n` lines, and the per-window level; None with fewer such windows."""
    band = cfg.guardrails.regeneration
    if band is None:
        return None
    ref = [t for t in traffics if t.n >= min_n][: band.reference_windows]
    if len(ref) < band.reference_windows:
        return None
    p0 = sum(t.regenerations for t in ref) / sum(t.n for t in ref)
    per_day = 24 * 60 / cfg.window_minutes
    return p0, min(1.0, band.false_alarms_per_day / per_day)


def slices_below(slices: dict, cfg: Any, axis: str, floor: float) -> tuple[str, ...]:
    """The slices whose judged `axis` is below its floor (for the axis's alert)."""
    found = []
    for (dim, value), t in sorted(slices.items()):
        v = t.axes.get(axis, ())
        if len(v) >= cfg.guardrails.slice_min and sum(v) / len(v) < floor:
            found.append((sum(v) / len(v), f"{dim}={value} {sum(v) / len(v):.4g} (n={len(v)})"))
    return _worst(found, False)


def junit(checks: list[Check], suite: str = "ragrig traces") -> str:
    """The checks as a JUnit XML report: one test case per window and guardrail, an alert a
    failure, a check without enough values skipped."""
    from xml.sax.saxutils import quoteattr

    failures = sum(c.status == "alert" for c in checks)
    skipped = sum(c.status in ("too few", "not logged") for c in checks)
    rows = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuite name={quoteattr(suite)} tests="{len(checks)}" failures="{failures}" '
        f'skipped="{skipped}">',
    ]
    for c in checks:
        head = f"  <testcase classname={quoteattr(c.window)} name={quoteattr(c.guardrail)}"
        if c.status == "alert":
            rows.append(f"{head}><failure message={quoteattr(c.line())}/></testcase>")
        elif c.status in ("too few", "not logged"):
            rows.append(
                f"{head}><skipped message={quoteattr(f'{c.status} (n={c.n})')}/></testcase>"
            )
        else:
            rows.append(f"{head}/>")
    rows.append("</testsuite>")
    return "\n".join(rows) + "\n"
