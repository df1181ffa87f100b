"""When the faithfulness techniques disagree (ragrig.metrics.agreement)."""

from __future__ import annotations

import pytest

from ragrig.metrics.agreement import technique_agreement


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ({"claims": 0.9, "llm": 0.8, "entity": 1.0}, "agree"),
        # sentence verification high, the LLM judge low: they contradict each other
        ({"claims": 0.9, "llm": 0.3, "entity": 1.0}, "disagree"),
        ({"claims": 0.9, "llm": None, "entity": 0.4}, "disagree"),  # exactly the spread apart
        ({"claims": 0.2, "llm": 0.1, "entity": 0.45}, "all_low"),
        ({"claims": 0.5, "llm": 0.2, "entity": 0.3}, "agree"),  # one at `low`: not all below it
        ({"claims": 0.9, "llm": None, "entity": None}, None),  # one part: nothing to compare
        ({}, None),
    ],
)
def test_each_answer_reads_agree_disagree_or_all_low(parts, expected):
    assert technique_agreement(parts, spread=0.5, low=0.5) == expected


def test_bounds_are_refused_outside_zero_one():
    with pytest.raises(ValueError, match="0 < spread <= 1"):
        technique_agreement({"claims": 1.0, "entity": 0.0}, spread=0.0)
