"""Implicit and explicit feedback as candidate signals: reported per window, and measured
against the judged axes on the same interactions before anyone alerts on them.

Signals, each read from the log lines that carry it (ragrig.traces.read):

* `thumbs_up`: the user's thumb (`feedback`), with the down thumbs' `feedback_reason`
  categories counted per window;
* `copied`: the user copied the answer;
* `dwell_ms`: time spent on the answer;
* `regenerated`: a later line `regenerates` this interaction;
* `doubted`: a later line `follows` this interaction with a question that doubts its answer
  ("are you sure?", "that's wrong": `signals.doubt_patterns`, regular expressions).

Per window: the share of thumbs up and the down reasons, the copy rate, the doubting follow-up
rate and the median dwell, over every line that logs the signal. Over the whole log: for each
signal and axis, the Spearman correlation between the signal and the axis value of the judged
interactions that have both, with its interval (Fisher's z with the Bonett-Wright standard
error sqrt((1 + rho^2 / 2) / (n - 3))); a signal `tracks` an axis when the interval excludes 0
on the side a team would expect (thumbs up and copies with quality, regenerations and doubts
against it; dwell has no expected side). Fewer than `min_pairs` pairs, or a signal or axis that
never varies, give no correlation, said so.

Regenerations and doubts point back at an earlier interaction, which may be judged before the
later line is read: the links are kept as 8-byte id hashes and resolved at the end.
"""

from __future__ import annotations

import math
import re
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ragrig.traces.read import Interaction, id_key

SIGNALS = ("thumbs_up", "copied", "dwell_ms", "regenerated", "doubted")
EXPECTED = {"thumbs_up": 1, "copied": 1, "dwell_ms": 0, "regenerated": -1, "doubted": -1}
COLUMNS = ["signal", "axis", "n", "spearman", "low", "high", "expected", "tracks", "note"]


@dataclass
class WindowSignals:
    """A window's signals over every line that logs them."""

    thumbs: int = 0
    up: int = 0
    down_reasons: Counter = field(default_factory=Counter)
    copy_logged: int = 0
    copied: int = 0
    dwell: array = field(default_factory=lambda: array("d"))
    follow_ups: int = 0
    doubts: int = 0
    lines: int = 0

    def observe(self, x: Interaction, doubt: re.Pattern | None) -> None:
        self.lines += 1
        if x.feedback is not None:
            self.thumbs += 1
            self.up += x.feedback == 1.0
            if x.feedback == 0.0:
                self.down_reasons[x.feedback_reason or "no reason"] += 1
        if x.copied is not None:
            self.copy_logged += 1
            self.copied += x.copied
        if x.dwell_ms is not None:
            self.dwell.append(x.dwell_ms)
        if x.follows is not None:
            self.follow_ups += 1
            self.doubts += is_doubt(x.question, doubt)

    def row(self) -> dict[str, Any]:
        dwell = np.frombuffer(self.dwell, dtype="d")
        return {
            "thumbs": self.thumbs,
            "thumbs_up_rate": self.up / self.thumbs if self.thumbs else None,
            "down_reasons": ", ".join(
                f"{k} {v}"
                for k, v in sorted(self.down_reasons.items(), key=lambda t: (-t[1], t[0]))
            ),
            "copy_rate": self.copied / self.copy_logged if self.copy_logged else None,
            "doubt_rate": self.doubts / self.lines if self.lines else None,
            "dwell_p50_ms": float(np.median(dwell)) if len(dwell) else None,
        }


def is_doubt(question: str, doubt: re.Pattern | None) -> bool:
    return doubt is not None and doubt.search(question) is not None


def doubt_pattern(patterns: list[str]) -> re.Pattern | None:
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE) if patterns else None


class Signals:
    """The whole log's signals against the judged axes (module doc)."""

    def __init__(self, cfg: Any):
        self.doubt = doubt_pattern(list(cfg.doubt_patterns))
        self.min_pairs = cfg.min_pairs
        self.regenerated: set[int] = set()
        self.doubted: set[int] = set()
        self.rows: list[tuple[int, dict[str, float | None], dict[str, float | None]]] = []

    def line(self, x: Interaction) -> None:
        """Every line: the links it makes to an earlier interaction."""
        if x.regenerates is not None:
            self.regenerated.add(id_key(x.regenerates))
        if x.follows is not None and is_doubt(x.question, self.doubt):
            self.doubted.add(id_key(x.follows))

    def judged(self, x: Interaction, values: dict[str, float | None]) -> None:
        """A judged interaction: its own signals and its axis values."""
        own = {
            "thumbs_up": x.feedback,
            "copied": None if x.copied is None else float(x.copied),
            "dwell_ms": x.dwell_ms,
        }
        self.rows.append((id_key(x.id), own, dict(values)))

    def table(self, level: float) -> pd.DataFrame:
        """One row per signal and axis (module doc)."""
        from scipy.stats import norm, spearmanr

        z = float(norm.ppf(0.5 + level / 2))
        out = []
        axes = list(self.rows[0][2]) if self.rows else []  # the axes' order
        for signal in SIGNALS:
            for axis in axes:
                pairs = []
                for key, own, values in self.rows:
                    if signal == "regenerated":
                        s: float | None = float(key in self.regenerated)
                    elif signal == "doubted":
                        s = float(key in self.doubted)
                    else:
                        s = own[signal]
                    if s is not None and values.get(axis) is not None:
                        pairs.append((s, float(values[axis])))
                row: dict[str, Any] = dict.fromkeys(COLUMNS)
                row.update(signal=signal, axis=axis, n=len(pairs), expected=EXPECTED[signal])
                row["tracks"], row["note"] = False, ""
                if len(pairs) < self.min_pairs:
                    row["note"] = f"fewer than {self.min_pairs} pairs"
                elif len({p[0] for p in pairs}) < 2 or len({p[1] for p in pairs}) < 2:
                    row["note"] = "constant: " + (
                        "signal" if len({p[0] for p in pairs}) < 2 else "axis"
                    )
                else:
                    s_arr, a_arr = np.array(pairs).T
                    rho = float(spearmanr(s_arr, a_arr).statistic)
                    low, high = spearman_interval(rho, len(pairs), z)
                    want = EXPECTED[signal]
                    row.update(spearman=rho, low=low, high=high)
                    row["tracks"] = (want > 0 and low > 0) or (want < 0 and high < 0)
                out.append(row)
        return pd.DataFrame(out, columns=COLUMNS)


def spearman_interval(rho: float, n: int, z: float) -> tuple[float, float]:
    """Fisher-z interval of a Spearman correlation, Bonett-Wright standard error."""
    r = min(max(rho, -0.999999), 0.999999)
    se = math.sqrt((1 + r * r / 2) / (n - 3))
    centre = math.atanh(r)
    return math.tanh(centre - z * se), math.tanh(centre + z * se)
