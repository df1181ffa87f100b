"""Reliability diagram: per scorer, the share of answers humans rated faithful against the mean
score, in each equal-width score bin of the held-out half (marker area ~ answers in the bin)."""

from __future__ import annotations

import os
from pathlib import Path


def reliability_plot(
    bins_by_scorer: dict[str, list[dict]], ece_by_scorer: dict[str, float | None], path: Path
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    ax.plot([0, 1], [0, 1], ls="--", c="grey", lw=1, label="perfect calibration")
    for name, bins in bins_by_scorer.items():
        full = [b for b in bins if b["n"]]
        ece = ece_by_scorer.get(name)
        label = f"{name} (ECE {ece:.3f})" if ece is not None else name
        ax.plot(
            [b["mean_score"] for b in full],
            [b["share_faithful"] for b in full],
            marker="o",
            label=label,
        )
        ax.scatter(
            [b["mean_score"] for b in full],
            [b["share_faithful"] for b in full],
            s=[8 + 2 * b["n"] for b in full],
            alpha=0.3,
        )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("mean judge score in bin")
    ax.set_ylabel("share rated faithful by humans")
    ax.set_title("Reliability on the held-out half")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        fig.savefig(tmp, format="png", dpi=110)
        os.replace(tmp, path)  # readers see the old plot or the whole new one
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
    return path
