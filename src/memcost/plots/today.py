"""Figures of notebook 05's section 7: the break-even at today's prices, against the gap between
questions and against the context length, next to the paper's."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FuncFormatter

from memcost.plots.costs import token_label
from memcost.plots.style import MAX_COLUMNS, panel_grid

# One colour per price scenario, one line style per cache policy.
SCENARIO_COLORS = {
    "paper": "#4d4d4d",
    "current": "#d6604d",
    "current (all gpt-6-luna)": "#4393c3",
}
POLICY_STYLES = {
    "always": ":",
    "in_memory": "-",
    "extended": (0, (6, 2)),
    "none": (0, (5, 2, 1, 2)),
}
GAP_TICKS = [
    (60, "1 min"),
    (600, "10 min"),
    (3_600, "1 h"),
    (6 * 3_600, "6 h"),
    (86_400, "1 day"),
    (604_800, "1 week"),
]


def scenario_color(name: str) -> str:
    return SCENARIO_COLORS.get(name, "#762a83")


def _log_counts(ax: plt.Axes, top: float) -> None:
    """A log y axis for break-even counts (1 to ~100 stay readable), plain-number ticks."""
    ax.set_yscale("log")
    ax.set_ylim(0.8, max(top, 2.0) * 2.5)
    ticks = [t for t in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if t <= max(top, 2.0) * 2.5]
    ax.set_yticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()


def _never_note(ax: plt.Axes, ceiling: float, never: list[str]) -> None:
    if never:
        ax.text(
            0.01,
            0.99,
            "never within the horizon: " + "; ".join(never),
            transform=ax.transAxes,
            va="top",
            fontsize=8,
            color="#555555",
        )


def plot_break_even_by_gap(table: Any, *, subtitle: str = "") -> plt.Figure:
    """Break-even N against the typical gap between a user's questions (log x, 1 minute to a
    week), one panel per price scenario, one line per cache policy."""
    names = list(dict.fromkeys(table["scenario"]))
    fig, axes = panel_grid(len(names), panel_size=(5.0, 3.9))
    for ax, name in zip(axes, names, strict=True):
        part = table.loc[table["scenario"] == name]
        never = []
        for policy, rows in part.groupby("policy", sort=False):
            y = rows["break_even_n"].astype(float).to_numpy()
            if np.isnan(y).all():
                never.append(str(rows["policy_label"].iloc[0]))
                continue
            ax.plot(
                rows["gap_seconds"],
                y,
                drawstyle="steps-post",
                lw=2,
                ls=POLICY_STYLES.get(policy, "-"),
                color=scenario_color(name),
                label=str(rows["policy_label"].iloc[0]),
            )
        ax.set_xscale("log")
        ax.set_xticks([t for t, _ in GAP_TICKS], [label for _, label in GAP_TICKS])
        ax.minorticks_off()
        ax.set_xlabel("gap between a user's questions")
        values = part["break_even_n"].astype(float).to_numpy()
        top = np.nanmax(values, initial=1.0)
        _log_counts(ax, top)
        if part.groupby("gap_seconds")["break_even_n"].nunique(dropna=False).max() == 1:
            ax.text(
                0.5,
                0.5,
                f"every policy: N = {int(top)} at every gap\n(the lines overlap)",
                transform=ax.transAxes,
                ha="center",
                fontsize=9,
                color="#333333",
            )
        ax.set_title(
            f"{name}\n{part['lc_model'].iloc[0]}, prices of {part['price_date'].iloc[0]}",
            fontsize=10,
        )
        ax.grid(alpha=0.3)
        # long handles: a dash-dot line must show its pattern, not read as a solid one
        ax.legend(fontsize=8, loc="upper right", handlelength=4.5)
        _never_note(ax, top, never)
    for ax in axes[::MAX_COLUMNS]:
        ax.set_ylabel("break-even N (questions per user)")
    L = int(table["context_tokens"].iloc[0])
    fig.suptitle(
        f"When does memory pay off? Break-even against the gap between questions, "
        f"L = {L:,} tokens" + (f"\n{subtitle}" if subtitle else ""),
        fontsize=11,
    )
    fig.tight_layout()
    return fig


def plot_break_even_by_context(
    curves: dict[str, tuple[np.ndarray, np.ndarray]], *, max_turns: int, subtitle: str = ""
) -> plt.Figure:
    """Break-even N against the context length L (log x), one line per price scenario."""
    fig, ax = plt.subplots(figsize=(8.0, 5.4))
    for label, (contexts, boundary) in curves.items():
        ax.plot(
            contexts,
            boundary,
            drawstyle="steps-mid",
            lw=2,
            color=scenario_color(label.split(":")[0]),
            label=label,
        )
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(token_label))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda *_: ""))
    ax.set_xlabel("context length L (tokens, log scale)")
    ax.set_ylabel("break-even N (questions per user)")
    _log_counts(ax, max_turns)
    ax.axvline(272_000, color="#999999", lw=1, ls="--")
    ax.text(
        272_000, 1.2, " 272K: long-context tier\n of today's models", fontsize=8, color="#555555"
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    ax.set_title(
        "Break-even by context length, back-to-back questions"
        + (f"\n{subtitle}" if subtitle else "")
        + f"\n(no line: memory not cheaper within {max_turns} questions)",
        fontsize=10,
    )
    fig.tight_layout()
    return fig
