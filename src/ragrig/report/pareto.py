"""The Pareto front of (recall, latency) points: maximise recall, minimise latency (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices (ascending) of the points no other point dominates, each point (recall, latency).

    A point is dominated when another has recall >= and latency <= with at least one strictly
    better. Ties: identical points dominate neither each other, so all copies of a front point
    are on the front; a point with the same latency and lower recall (or the same recall and
    higher latency) is off it. A NaN or infinite coordinate raises ValueError.
    """
    for i, (r, t) in enumerate(points):
        if not (math.isfinite(r) and math.isfinite(t)):
            raise ValueError(f"pareto_front: point {i} ({r}, {t}) is not finite")
    front = []
    for i, (r, t) in enumerate(points):
        dominated = any(
            r2 >= r and t2 <= t and (r2 > r or t2 < t)
            for j, (r2, t2) in enumerate(points)
            if j != i
        )
        if not dominated:
            front.append(i)
    return front
