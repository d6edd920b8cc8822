"""Notebook 00's figure: how long the conversations are, as Table 1 counts them and as billed."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from memcost.datasets import DISPLAY_NAMES


def plot_conversation_lengths(stats: pd.DataFrame, dataset: str) -> plt.Figure:
    """Histogram of tokens per conversation: the Table-1 text and the long-context rendering."""
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
