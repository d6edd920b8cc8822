"""Figures of the memory system: facts per user against history length (notebook 01) and
where the evidence gets lost (notebook 02)."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from memcost.plots.style import label_backend


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
    ax.set_title(f"Facts per user vs history length ({dataset})")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    label_backend(ax, backend)
    return fig


def plot_evidence_recall(by_category: pd.DataFrame, *, dataset: str, top_k: int,
                         backend: str = "") -> Any:
    """Per category: evidence covered by any stored fact vs by the top-k retrieved facts."""
    table = by_category.loc[by_category["with_evidence"] > 0]
    fig, ax = plt.subplots(figsize=(7.2, 4.0))
    x = np.arange(len(table))
    ax.bar(x - 0.2, table["evidence_in_memory"], width=0.4, label="in memory (any fact)",
           color="#9ecae1")
    ax.bar(x + 0.2, table["evidence_recall"], width=0.4, label=f"retrieved (top {top_k})",
           color="#1f77b4")
    ax.set_xticks(x, table["category"], rotation=20, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("evidence recall")
    ax.set_title(f"Where the evidence gets lost ({dataset})")
    ax.legend(loc="lower left", fontsize=8)
    label_backend(ax, backend)
    return fig
