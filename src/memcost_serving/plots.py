"""The serving study's figures (matplotlib; analysis only)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from memcost.answers import in_words
from memcost.plots.style import MAX_COLUMNS, label_backend, panel_grid

SYSTEM_COLORS = {
    "full_history": "#d62728",
    "rolling_window": "#ff7f0e",
    "mem0": "#1f77b4",
    "observational": "#2ca02c",
    "hindsight": "#9467bd",
}


def _cell_order(cells: pd.Series) -> list[str]:
    return sorted(cells.unique(), key=lambda c: tuple(int(x) for x in str(c).split("×")))


def plot_cumulative(
    curves: pd.DataFrame,
    break_even: pd.DataFrame,
    *,
    cell: str,
    backend: str,
    value_label: str = "cumulative cost (USD)",
) -> plt.Figure:
    """Figure 2: mean cumulative cost per turn at one cell, one panel per model and effort,
    the sustained break-even of each memory system marked on its curve and listed in the
    panel's corner (labels beside the markers covered the curves where they cross)."""
    mine = curves[curves["cell"] == cell]
    panels = mine[["model", "reasoning_effort"]].drop_duplicates().to_records(index=False)
    fig, axes = panel_grid(len(panels), panel_size=(5.0, 3.9))
    for ax, (model, effort) in zip(axes, panels, strict=False):
        part = mine[(mine["model"] == model) & (mine["reasoning_effort"] == effort)]
        found = []  # (system, t_BE): listed in the panel's corner, not written over the curves
        for system, curve in part.groupby("system"):
            color = SYSTEM_COLORS.get(system, "#7f7f7f")
            ax.plot(curve["turn"], curve["cumulative"], label=in_words(system), color=color)
            row = break_even[
                (break_even["cell"] == cell)
                & (break_even["model"] == model)
                & (break_even["reasoning_effort"] == effort)
                & (break_even["system"] == system)
            ]
            if len(row) and pd.isna(row["t_be"].iloc[0]):
                found.append((system, None))  # not cheaper at the last turn
            elif len(row):
                t = int(row["t_be"].iloc[0])
                y = curve.loc[curve["turn"] == t, "cumulative"]
                if len(y):
                    ax.scatter(
                        [t], [float(y.iloc[0])], marker="o", s=40, zorder=3, color=color,
                        edgecolor="black",
                    )  # fmt: skip
                    found.append((system, t))
        if found:
            ax.text(
                0.98,
                0.10,
                "sustained break-even\n"
                + "\n".join(
                    f"{in_words(s)}: never" if t is None else f"{in_words(s)}: turn {t}"
                    for s, t in found
                ),
                transform=ax.transAxes,
                ha="right",
                va="bottom",
                fontsize=8,
                bbox={"boxstyle": "round,pad=0.3", "fc": "white", "ec": "#cccccc"},
            )
        # offline no model answered: the panel is the stand-ins' tokens at that model's prices
        priced = "priced as " if backend == "offline" else ""
        ax.set_title(f"{priced}{model} ({effort or 'default'}) · N×L = {cell}", fontsize=10)
        ax.set_xlabel("turn t")
        ax.set_ylabel(value_label)
        ax.set_yscale("log")
        label_backend(ax, backend)
    # one legend under the panels: inside one it hid the break-even labels near the curves' knee
    handles, _ = axes[0].get_legend_handles_labels()
    handles.append(
        Line2D(
            [],
            [],
            marker="o",
            linestyle="none",
            markerfacecolor="white",
            markeredgecolor="black",
            label="sustained break-even t_BE",
        )
    )
    fig.legend(handles=handles, fontsize=8, loc="lower center", ncol=len(handles), frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


def plot_residuals(residuals: pd.DataFrame, loocv: pd.DataFrame, *, backend: str) -> plt.Figure:
    """Where the separable fit fails: log residuals per cell (box) and the held-out cell's
    mean-cost ratio (predicted / actual, the LOOCV error) as a red mark."""
    systems = list(residuals["system"].unique())
    fig, axes = panel_grid(len(systems), panel_size=(4.8, 3.6), sharey=True)
    for ax, system in zip(axes, systems, strict=False):
        mine = residuals[residuals["system"] == system]
        cells = _cell_order(mine["cell"])
        ax.boxplot([mine.loc[mine["cell"] == c, "residual"] for c in cells], showfliers=False)
        held = loocv[loocv["system"] == system].set_index("cell")
        marks = [
            np.log(held.loc[c, "predicted"] / held.loc[c, "actual"]) if c in held.index else np.nan
            for c in cells
        ]
        ax.scatter(
            range(1, len(cells) + 1),
            marks,
            color="#d62728",
            marker="D",
            s=25,
            label="held-out cell: log(pred/actual)",
            zorder=3,
        )
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xticks(range(1, len(cells) + 1), cells, rotation=45, fontsize=8)
        ax.set_title(in_words(system), fontsize=10)
        ax.set_xlabel("cell N×L")
        label_backend(ax, backend)
    for ax in axes[::MAX_COLUMNS]:
        ax.set_ylabel("log(C+1) − fitted")
    axes[0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def plot_cost_per_turn(turns: pd.DataFrame, *, cell: str, backend: str) -> plt.Figure:
    """Input tokens per turn of one run of each system at a cell (the sawtooth of the gates)."""
    mine = turns[(turns["cell"] == cell) & (turns["seed"] == turns["seed"].min())]
    first = mine[["model", "reasoning_effort"]].drop_duplicates().iloc[0]
    mine = mine[
        (mine["model"] == first["model"]) & (mine["reasoning_effort"] == first["reasoning_effort"])
    ]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for system, part in mine.groupby("system"):
        ax.plot(
            part["turn"], part["C"], label=in_words(system), color=SYSTEM_COLORS.get(system),
            linewidth=1,
        )  # fmt: skip
    ax.set_yscale("log")
    # plain token counts at 1-2-5 steps, not "6 × 10^3" minor labels beside one major one
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("turn t")
    ax.set_ylabel("input tokens C at turn t")
    ax.set_title(f"Input tokens per turn, N×L = {cell} (one seed)", fontsize=10)
    ax.legend(fontsize=8)
    label_backend(ax, backend)
    fig.tight_layout()
    return fig
