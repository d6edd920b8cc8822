"""Notebook 00's figure: how long the conversations are, as Table 1 counts them and as billed."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter, MaxNLocator

from memcost.paths import DISPLAY_NAMES

# Fewer conversations than this are drawn one dot each: a histogram of 2 or 3 values is bars of
# height 1 that hide which value is which.
MIN_FOR_HISTOGRAM = 10


SERIES = (
    ("utterance text (Table 1)", "text_tokens", "#1f77b4"),
    ("long-context rendering (speakers, dates)", "history_tokens", "#d62728"),
)


def plot_conversation_lengths(stats: pd.DataFrame, dataset: str) -> plt.Figure:
    """Tokens per conversation, the Table-1 text and the long-context rendering: one histogram
    per series, stacked on a shared axis (small multiples, so neither hides the other), or one
    dot per conversation when there are fewer than 10."""
    if len(stats) < MIN_FOR_HISTOGRAM:
        return _strip(stats, dataset)
    fig, axes = plt.subplots(len(SERIES), 1, figsize=(7.5, 4.8), sharex=True, sharey=True)
    values = np.concatenate([stats[column].to_numpy() for _, column, _ in SERIES])
    bins = np.histogram_bin_edges(values, bins=int(min(30, max(6, len(stats)))))
    for ax, (label, column, color) in zip(axes, SERIES, strict=True):
        column_values = stats[column].to_numpy()
        ax.hist(column_values, bins=bins, color=color, edgecolor="white", linewidth=0.6)
        median = float(np.median(column_values))
        ax.axvline(median, color="#222222", linestyle="--", linewidth=1.2)
        ax.text(
            median,
            0.97,
            f" median {median:,.0f}",
            transform=ax.get_xaxis_transform(),
            va="top",
            fontsize=8,
            color="#222222",
        )
        ax.set_title(label, loc="left", fontsize=10, color=color)
        ax.set_ylabel("conversations")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes[-1].set_xlabel("o200k tokens per conversation")
    axes[-1].xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"))
    fig.suptitle(
        f"{DISPLAY_NAMES.get(dataset, dataset)}: conversation length (n = {len(stats)})",
        x=0.01,
        ha="left",
        fontweight="bold",
        fontsize=12,
    )
    fig.tight_layout()
    return fig


def _strip(stats: pd.DataFrame, dataset: str) -> plt.Figure:
    """One dot per conversation on two rows (text, rendering), each dot labelled with its value."""
    fig, ax = plt.subplots(figsize=(7.5, 2.8))
    series = [
        (label.replace(" (", "\n(", 1) if "rendering" in label else label, column, color)
        for label, column, color in SERIES
    ]
    for row, (_label, column, color) in enumerate(series):
        values = stats[column].to_numpy()
        ax.scatter(values, np.full(len(values), row), s=60, color=color, zorder=3)
        for value in values:
            ax.annotate(
                f"{int(value):,}",
                (value, row),
                xytext=(0, 8),
                textcoords="offset points",
                ha="center",
                fontsize=8,
                color=color,
            )
    ax.set_yticks([0, 1], [label for label, _, _ in series], fontsize=9)
    ax.set_ylim(-0.6, 1.6)
    ax.set_xlim(left=0)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"))
    ax.grid(axis="y", visible=False)
    ax.set_xlabel("o200k tokens per conversation (one dot each)")
    ax.set_title(
        f"{DISPLAY_NAMES.get(dataset, dataset)}: conversation length (n = {len(stats)})", loc="left"
    )
    fig.tight_layout()
    return fig
