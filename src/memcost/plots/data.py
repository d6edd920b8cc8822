"""Notebook 00's figure: how long the conversations are, as Table 1 counts them and as billed."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from memcost.datasets import DISPLAY_NAMES

# Fewer conversations than this are drawn one dot each: a histogram of 2 or 3 values is bars of
# height 1 that hide which value is which.
MIN_FOR_HISTOGRAM = 10


def plot_conversation_lengths(stats: pd.DataFrame, dataset: str) -> plt.Figure:
    """Tokens per conversation, the Table-1 text and the long-context rendering: a histogram,
    or one dot per conversation when there are fewer than 10."""
    if len(stats) < MIN_FOR_HISTOGRAM:
        return _strip(stats, dataset)
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    values = np.concatenate([stats["text_tokens"].to_numpy(), stats["history_tokens"].to_numpy()])
    bins = np.histogram_bin_edges(values, bins=int(min(30, max(6, len(stats)))))
    series = (("utterance text (Table 1)", "text_tokens", "#1f77b4"),
              ("long-context rendering (speakers, dates)", "history_tokens", "#d62728"))
    for label, column, color in series:
        column_values = stats[column].to_numpy()
        ax.hist(column_values, bins=bins, alpha=0.55, color=color, label=label)
        median = sorted(column_values.tolist())[len(column_values) // 2]
        ax.axvline(median, color=color, linestyle="--", linewidth=1.2)
    ax.set_xlabel("o200k tokens per conversation (dashed: upper median)")
    ax.set_ylabel("conversations")
    ax.set_title(f"{DISPLAY_NAMES.get(dataset, dataset)}: conversation length "
                 f"(n = {len(stats)})")
    ax.legend(loc="upper right", fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def _strip(stats: pd.DataFrame, dataset: str) -> plt.Figure:
    """One dot per conversation on two rows (text, rendering), each dot labelled with its value."""
    fig, ax = plt.subplots(figsize=(7.5, 2.8))
    series = (("utterance text (Table 1)", "text_tokens", "#1f77b4"),
              ("long-context rendering\n(speakers, dates)", "history_tokens", "#d62728"))
    for row, (_label, column, color) in enumerate(series):
        values = stats[column].to_numpy()
        ax.scatter(values, np.full(len(values), row), s=60, color=color, zorder=3)
        for value in values:
            ax.annotate(f"{int(value):,}", (value, row), xytext=(0, 8), textcoords="offset points",
                        ha="center", fontsize=8, color=color)
    ax.set_yticks([0, 1], [label for label, _, _ in series], fontsize=9)
    ax.set_ylim(-0.6, 1.6)
    ax.set_xlim(left=0)
    ax.grid(axis="y", visible=False)
    ax.set_xlabel("o200k tokens per conversation (one dot each)")
    ax.set_title(f"{DISPLAY_NAMES.get(dataset, dataset)}: conversation length "
                 f"(n = {len(stats)})", loc="left")
    fig.tight_layout()
    return fig
