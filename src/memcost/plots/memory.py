"""Figures of the memory system: facts per user against history length (notebook 01) and
where the evidence gets lost (notebook 02)."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter, MaxNLocator

from memcost.calls import OFFLINE
from memcost.paths import display_name
from memcost.plots.style import OFFLINE_NOTE, label_backend, readable


def plot_facts_vs_history(stats: pd.DataFrame, *, dataset: str, backend: str = "") -> Any:
    """Active facts per user against the history's token length (one point per user), with
    the compression ratio of each user as the colour."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    if len(stats):
        points = ax.scatter(
            stats["history_tokens"],
            stats["active_facts"],
            c=stats["compression"].astype(float),
            cmap="viridis",
            s=40,
            edgecolor="black",
            linewidth=0.4,
        )
        bar = fig.colorbar(points, ax=ax, label="history tokens per fact token")
        bar.locator = MaxNLocator(5)  # a few users span a narrow range: no 0.005 steps
        bar.update_ticks()
    ax.set_xlabel("history tokens (long-context rendering)")
    ax.set_ylabel("active facts")
    ax.set_title(f"Facts per user vs history length ({display_name(dataset)})")
    # room past the largest point, so that no dot sits half outside the axes
    ax.set_xlim(0, float(stats["history_tokens"].max()) * 1.08 if len(stats) else None)
    ax.set_ylim(0, float(stats["active_facts"].max()) * 1.1 + 1 if len(stats) else None)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"))
    label_backend(ax, backend)
    return fig


def plot_evidence_recall(
    by_category: pd.DataFrame, *, dataset: str, top_k: int, backend: str = ""
) -> Any:
    """Per category: evidence covered by any stored fact vs by the top-k retrieved facts. Each
    label carries the category's n; LoCoMo's adversarial category, which Table 3 leaves out, is
    left out here too."""
    table = by_category.loc[
        (by_category["with_evidence"] > 0) & (by_category["category"].astype(str) != "adversarial")
    ]
    # categories down the y axis: long names (LongMemEval's) never collide, and a value label on
    # every bar shows the zeros that a bar of length 0 cannot
    fig, ax = plt.subplots(figsize=(7.6, 1.4 + 0.62 * max(2, len(table))))
    y = np.arange(len(table))[::-1]
    for offset, column, label, color in (
        (0.2, "evidence_in_memory", "in memory (any fact)", "#9ecae1"),
        (-0.2, "evidence_recall", f"retrieved (top {top_k})", "#1f77b4"),
    ):
        bars = ax.barh(y + offset, table[column], height=0.4, label=label, color=color)
        ax.bar_label(bars, labels=[f"{v:.2f}" for v in table[column]], padding=3, fontsize=8)
    labels = [
        f"{readable(str(c))} (n = {int(n)})"
        for c, n in zip(table["category"], table["with_evidence"], strict=True)
    ]
    ax.set_yticks(y, labels, fontsize=9)
    ax.set_xlim(0, 1.12)
    ax.set_xlabel("evidence recall (share of the evidence turns found)")
    ax.grid(axis="y", visible=False)
    ax.set_title(f"Where the evidence gets lost ({display_name(dataset)})", loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    if backend == OFFLINE:  # right of the axes, under the legend, where it covers no bar
        ax.text(
            1.02,
            0.0,
            OFFLINE_NOTE.replace(" (", "\n("),
            transform=ax.transAxes,
            va="bottom",
            fontsize=8,
            color="#555555",
            style="italic",
        )
    fig.tight_layout()
    return fig
