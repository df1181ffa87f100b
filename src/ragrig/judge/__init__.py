"""judge: score answers against their context; answers with no checkable claim are counted apart."""

from ragrig.judge.base import JUDGES, InvalidVerdict, Judge, Verdict, make_judge, unclaimed
from ragrig.judge.step import (
    COLUMNS,
    DEFAULT_DECISION_THRESHOLD,
    DEFAULT_WEIGHTS,
    FLOAT_COLUMNS,
    decide,
    decision_record,
    judge_all,
)

__all__ = [
    "COLUMNS",
    "DEFAULT_DECISION_THRESHOLD",
    "DEFAULT_WEIGHTS",
    "FLOAT_COLUMNS",
    "InvalidVerdict",
    "JUDGES",
    "Judge",
    "Verdict",
    "decide",
    "decision_record",
    "judge_all",
    "make_judge",
    "unclaimed",
]
