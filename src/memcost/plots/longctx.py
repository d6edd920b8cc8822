"""The context each system puts in front of the model: the long-context systems in notebook 03,
every system, memory included, in notebook 04."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter, NullFormatter

from memcost.answers import system_labels
from memcost.calls import OFFLINE
from memcost.plots.style import label_backend, system_color

SHOWN_KINDS = ("memory", "long_context", "rolling_window")


def _system_row(
    ax: plt.Axes, row: int, values: pd.Series, color: str, rng: np.random.Generator
) -> None:
    ax.boxplot(
        [values],
        positions=[row],
        vert=False,
        widths=0.5,
        showfliers=False,
        medianprops={"color": color, "linewidth": 2},
        boxprops={"color": color},
        whiskerprops={"color": color},
        capprops={"color": color},
    )
    ax.scatter(
        values, row + rng.uniform(-0.18, 0.18, len(values)), s=10, alpha=0.5, color=color, zorder=3
    )
    ax.annotate(
        f"median {np.median(values):,.0f}",
        (float(values.max()), row),
        xytext=(8, 0),
        textcoords="offset points",
        va="center",
        fontsize=8,
    )


def plot_context_sizes(sizes: pd.DataFrame, *, backend: str = "", subtitle: str = "") -> plt.Figure:
    """Context tokens per question, one row per system, on a log scale: memory's retrieved
    facts, the full history, the rolling window."""
    shown = sizes.loc[sizes["kind"].isin(SHOWN_KINDS)]
    systems = list(dict.fromkeys(shown["system"]))
    names = system_labels(systems, offline=backend == OFFLINE)
    fig, ax = plt.subplots(figsize=(8.5, 0.9 + 0.55 * max(2, len(systems))))
    rng = np.random.default_rng(0)  # jitter only; fixed so the figure is the same every run
    for row, system in enumerate(systems):
        values = shown.loc[shown["system"] == system, "context_tokens"].astype(float)
        _system_row(ax, row, values.clip(lower=1), system_color(system), rng)
    ax.set_yticks(range(len(systems)), [names[s] for s in systems])
    ax.invert_yaxis()
    ax.set_xscale("log")
    low, high = (
        float(shown["context_tokens"].clip(lower=1).min()),
        float(shown["context_tokens"].max()),
    )
    ax.set_xlim(low / 2, max(high * 4, low * 20))  # at least a decade, room for the labels
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("context tokens per question (o200k, log scale)")
    ax.set_title(
        "What each system puts in front of the model" + (f"\n{subtitle}" if subtitle else ""),
        loc="left",
    )
    ax.grid(axis="y", visible=False)
    label_backend(ax, backend)
    fig.tight_layout()
    return fig


__all__ = ["plot_context_sizes"]
