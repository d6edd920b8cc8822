"""Figures of the memory system: facts per user against history length (notebook 01) and
where the evidence gets lost (notebook 02)."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from memcost.calls import OFFLINE
from memcost.datasets import display_name
from memcost.plots.style import OFFLINE_NOTE, label_backend, readable


def plot_facts_vs_history(stats: pd.DataFrame, *, dataset: str, backend: str = "") -> Any:
    """Active facts per user against the history's token length (one point per user), with
    the compression ratio of each user as the colour."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    if len(stats):
        points = ax.scatter(stats["history_tokens"], stats["active_facts"],
                            c=stats["compression"].astype(float), cmap="viridis", s=40,
                            edgecolor="black", linewidth=0.4)
        fig.colorbar(points, ax=ax, label="history tokens per fact token")
    ax.set_xlabel("history tokens (long-context rendering)")
    ax.set_ylabel("active facts")
    ax.set_title(f"Facts per user vs history length ({display_name(dataset)})")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    label_backend(ax, backend)
    return fig


def plot_evidence_recall(by_category: pd.DataFrame, *, dataset: str, top_k: int,
                         backend: str = "") -> Any:
    """Per category: evidence covered by any stored fact vs by the top-k retrieved facts. Each
    label carries the category's n; LoCoMo's adversarial category, which Table 3 leaves out, is
    left out here too."""
    table = by_category.loc[(by_category["with_evidence"] > 0)
                            & (by_category["category"].astype(str) != "adversarial")]
    fig, ax = plt.subplots(figsize=(7.2, 4.4))
    x = np.arange(len(table))
    ax.bar(x - 0.2, table["evidence_in_memory"], width=0.4, label="in memory (any fact)",
           color="#9ecae1")
    ax.bar(x + 0.2, table["evidence_recall"], width=0.4, label=f"retrieved (top {top_k})",
           color="#1f77b4")
    labels = [f"{readable(str(c))}\n(n = {int(n)})"
              for c, n in zip(table["category"], table["with_evidence"], strict=True)]
    ax.set_xticks(x, labels, fontsize=8.5)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("evidence recall")
    ax.set_title(f"Where the evidence gets lost ({display_name(dataset)})", loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    if backend == OFFLINE:  # below the axes, where it cannot cover a bar
        ax.text(0, -0.22, OFFLINE_NOTE, transform=ax.transAxes, fontsize=8, color="#555555",
                style="italic")
    fig.tight_layout()
    return fig
