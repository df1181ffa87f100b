"""pareto_front: maximise recall, minimise latency; exact points, ties included."""

from __future__ import annotations

import pytest

from ragrig.report.pareto import pareto_front


def test_front_on_exact_points_with_ties():
    points = [
        (0.90, 1.0),  # 0 front
        (0.95, 2.0),  # 1 front
        (0.90, 1.5),  # 2 same recall as 0, slower: dominated
        (0.85, 1.0),  # 3 same latency as 0, lower recall: dominated
        (0.95, 2.0),  # 4 identical to 1: both stay on the front
        (0.99, 5.0),  # 5 front: best recall
        (0.80, 0.5),  # 6 front: fastest
        (0.94, 2.5),  # 7 dominated by 1 on both axes
    ]
    assert pareto_front(points) == [0, 1, 4, 5, 6]


def test_small_inputs():
    assert pareto_front([]) == []
    assert pareto_front([(0.5, 3.0)]) == [0]
    # one point better on both axes leaves only itself
    assert pareto_front([(0.5, 3.0), (0.6, 2.0)]) == [1]


def test_non_finite_point_raises():
    with pytest.raises(ValueError, match="point 1"):
        pareto_front([(0.5, 1.0), (float("nan"), 2.0)])
