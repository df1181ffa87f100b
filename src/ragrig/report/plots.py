"""Plots people would rather look at: metric by slice, and latency per stage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragrig.metrics.aggregate import headline_measure, slice_value_key, stage_key


def write_plots(report: Any, folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    agg = report.slices
    ndcg = headline_measure(agg.loc[agg["slice"] == "all", "measure"])
    if ndcg:
        sel = agg[(agg["measure"] == ndcg) & (agg["slice"] != "all")]
        order = sorted(
            range(len(sel)),
            key=lambda i: (sel["slice"].iloc[i], slice_value_key(sel["slice_value"].iloc[i])),
        )
        sel = sel.iloc[order]
        labels = [
            f"{s}={v} (n={n})"
            for s, v, n in zip(sel["slice"], sel["slice_value"], sel["n"], strict=True)
        ]
        fig, ax = plt.subplots(figsize=(7, 0.35 * max(len(labels), 4) + 1))
        ax.barh(labels, sel["mean"])
        overall = agg[(agg["measure"] == ndcg) & (agg["slice"] == "all")]["mean"]
        if len(overall):
            ax.axvline(float(overall.iloc[0]), color="k", linestyle="--", label="all")
            ax.legend()
        ax.set_xlabel(ndcg)
        ax.set_xlim(0, 1)
        ax.invert_yaxis()
        fig.tight_layout()
        path = folder / "slices_ndcg.png"
        fig.savefig(path, dpi=100, metadata={"Software": None})
        plt.close(fig)
        written.append(path)
    lat = report.metrics.get("latency_ms", {})
    if lat:
        stages = sorted(lat, key=stage_key)
        fig, ax = plt.subplots(figsize=(7, 3.5))
        for i, q in enumerate(("p50", "p95", "p99")):
            ax.bar(
                [x + i * 0.27 for x in range(len(stages))],
                [lat[s].get(q, 0) for s in stages],
                width=0.27,
                label=q,
            )
        ax.set_xticks([x + 0.27 for x in range(len(stages))], stages)
        ax.set_yscale("log")
        ax.set_ylabel("ms per query")
        ax.legend()
        fig.tight_layout()
        path = folder / "latency.png"
        fig.savefig(path, dpi=100, metadata={"Software": None})
        plt.close(fig)
        written.append(path)
    return written
