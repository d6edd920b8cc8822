"""Notebook 05's latency figure: p50 and p95 per system and stage, Mem0's published p95 beside."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from memcost.answers import system_labels
from memcost.calls import OFFLINE
from memcost.plots.style import label_backend, system_color

STAGES = ("search", "total")


def plot_latency(table: pd.DataFrame, *, backend: str = "") -> plt.Figure:
    """Per stage (search; search + answer), a bar from p50 to p95 per system on a log axis, a
    dot at p50, a bar end at p95, and Mem0's paper's p95 as a hollow diamond where it reports
    one (``published_p95_s``)."""
    stages = [s for s in STAGES if (table["stage"] == s).any()]
    systems = list(dict.fromkeys(table["system"]))
    fig, axes = plt.subplots(
        1,
        len(stages),
        figsize=(6.2 * len(stages), 0.5 * len(systems) + 1.6),
        sharey=True,
        squeeze=False,
    )
    y = {s: i for i, s in enumerate(systems)}
    names = system_labels(systems, offline=backend == OFFLINE)
    positive = table.loc[table["p95_s"] > 0, ["p50_s", "p95_s"]].to_numpy()
    low = max(float(np.nanmin(positive)) / 3 if positive.size else 1e-4, 1e-6)
    for ax, stage in zip(axes[0], stages, strict=True):
        rows = table.loc[table["stage"] == stage]
        for r in rows.itertuples(index=False):
            color = system_color(r.system)
            p50, p95 = max(r.p50_s, low), max(r.p95_s, low)
            ax.hlines(y[r.system], p50, p95, color=color, linewidth=5, alpha=0.55)
            ax.scatter([p50], [y[r.system]], color=color, s=30, zorder=3)
            ax.scatter([p95], [y[r.system]], color=color, marker="|", s=160, zorder=3)
            published = getattr(r, "published_p95_s", np.nan)
            if pd.notna(published):
                ax.scatter(
                    [published],
                    [y[r.system]],
                    marker="D",
                    facecolor="white",
                    edgecolor=color,
                    s=46,
                    zorder=4,
                )
        ax.set_xscale("log")
        ax.set_xlabel("seconds per question (log scale)")
        ax.set_title(
            "search (embedding + index)" if stage == "search" else "total (search + answer)",
            fontsize=10,
        )
        label_backend(ax, backend)
    axes[0][0].set_yticks(range(len(systems)), [names[s] for s in systems], fontsize=9)
    axes[0][0].invert_yaxis()
    fig.suptitle(
        "Latency per question: dot p50, bar to p95; hollow diamond: Mem0's paper's p95 (LoCoMo)",
        fontsize=11,
    )
    fig.tight_layout()
    return fig
