"""Figures of today's break-even (notebook 07) and the break-even explorer, which draws what
:mod:`memcost.costs.today` computes (widgets optional)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FuncFormatter

from memcost.costs import timeline, today
from memcost.costs.timeline import RETENTION_LABELS, RETENTION_POLICIES
from memcost.plots.costs import usd_label
from memcost.plots.style import MAX_COLUMNS, panel_grid, token_label

# One colour per price scenario, one line style per cache policy.
SCENARIO_COLORS = {
    today.PAPER.name: "#4d4d4d",
    today.CURRENT.name: "#d6604d",
    today.CURRENT_LOW_COST.name: "#4393c3",
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
    """A log y axis for break-even counts, plain-number ticks."""
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
    """Break-even N against the gap between questions (log x, a minute to a week), a panel per price
    scenario, a line per cache policy."""
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


# The explorer's settings and their defaults (the paper's values where it has one).
EXPLORER_DEFAULTS: dict[str, Any] = {
    "context_tokens": 101_601,  # §3.3 Table 1: mean LongMemEval-S history
    "questions": 50,  # questions per user drawn
    "scenario": "current",  # a name in memcost.costs.today.SCENARIOS (model and price date)
    "retention": "in_memory",  # always | in_memory | extended | none
    "gap_seconds": 3_600.0,  # gap between a user's questions
    "output_tokens": 527.0,  # paper §3.5: long-context output tokens per answer
    "batch": False,  # memory's write through the Batch API
}


def explorer_settings(settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    unknown = sorted(set(settings or {}) - set(EXPLORER_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown explorer setting(s) {unknown}; known: {list(EXPLORER_DEFAULTS)}")
    return {**EXPLORER_DEFAULTS, **(settings or {})}


def explorer_frame(settings: Mapping[str, Any]) -> Any:
    s = explorer_settings(settings)
    assumptions = today.Assumptions(
        output_tokens=float(s["output_tokens"]), batch_write=bool(s["batch"])
    )
    times = timeline.fixed_gaps(int(s["questions"]), float(s["gap_seconds"]))
    return today.scenario_timeline(
        today.scenario(s["scenario"]),
        float(s["context_tokens"]),
        times,
        policy=s["retention"],
        assumptions=assumptions,
    )


def explorer_update(settings: Mapping[str, Any] | None = None) -> tuple[plt.Figure, int | None]:
    """One user's cumulative cost of memory and long context, and the break-even N."""
    s = explorer_settings(settings)
    frame = explorer_frame(s)
    be = today.break_even_of(frame)
    fig, ax = plt.subplots(figsize=(8.0, 4.6))
    n = frame["question"].to_numpy()
    ax.plot(n, frame["long_context_cumulative_usd"], lw=2, color="#b2182b", label="long context")
    ax.plot(n, frame["memory_cumulative_usd"], lw=2, color="#2166ac", label="fact memory")
    if be is not None:
        ax.axvline(be, color="black", lw=1, ls="--")
        ax.annotate(
            f"break-even N = {be}",
            (be, frame["memory_cumulative_usd"].iloc[be - 1]),
            xytext=(8, -16),
            textcoords="offset points",
            fontsize=9,
        )
    hit = frame["cache_alive"].iloc[1:].mean() if len(frame) > 1 else np.nan
    ax.set_xlabel("questions asked by one user")
    ax.set_ylabel("cumulative cost per user")
    ax.yaxis.set_major_formatter(usd_label)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=9)
    scenario = today.scenario(s["scenario"])
    gap = _gap_text(float(s["gap_seconds"]))
    ax.set_title(
        f"L = {int(s['context_tokens']):,} tokens, a question every {gap}; "
        f"{RETENTION_LABELS[s['retention']]} (cache hit on {hit:.0%} of later questions)\n"
        f"{scenario.label}; {int(s['output_tokens'])} output tokens; "
        f"write {'Batch API' if s['batch'] else 'list prices'}; "
        f"break-even {be if be is not None else 'not within ' + str(int(s['questions']))}",
        fontsize=9,
    )
    fig.tight_layout()
    return fig, be


def _gap_text(seconds: float) -> str:
    for unit, size in (("week", 604_800), ("day", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


LOG_STEP = 0.01  # log10 steps of the log sliders: 2.3% apart


def _on_grid(value: float, low: float) -> float:
    """A log slider's minimum near ``low`` that puts ``value`` on its step grid (the browser snaps
    to ``min + k * step``)."""
    import math

    exponent = math.log10(value)
    return exponent - math.floor((exponent - low) / LOG_STEP) * LOG_STEP


def _explorer_controls(widgets: Any, s: Mapping[str, Any]) -> dict[str, Any]:
    # Wide enough for the longest description; steps fine enough that every slider starts at
    # the static figure's value (a coarse step snaps 101,601 tokens to 100,000, 527 to 550).
    style = {"description_width": "230px"}
    layout = widgets.Layout(width="640px")
    controls = {
        "context_tokens": widgets.FloatLogSlider(
            value=s["context_tokens"],
            base=10,
            min=_on_grid(s["context_tokens"], 4),
            max=6.3,
            step=LOG_STEP,
            description="context length (tokens)",
            readout_format=",.0f",
            style=style,
            layout=layout,
        ),
        "questions": widgets.IntSlider(
            value=s["questions"],
            min=2,
            max=200,
            description="questions per user",
            style=style,
            layout=layout,
        ),
        "scenario": widgets.Dropdown(
            options=list(today.SCENARIOS),
            value=s["scenario"],
            description="model and price date",
            style=style,
            layout=layout,
        ),
        "retention": widgets.Dropdown(
            options=list(RETENTION_POLICIES),
            value=s["retention"],
            description="cache retention",
            style=style,
            layout=layout,
        ),
        "gap_seconds": widgets.FloatLogSlider(
            value=s["gap_seconds"],
            base=10,
            min=_on_grid(s["gap_seconds"], 1),
            max=5.79,
            step=LOG_STEP,
            description="gap between questions (s)",
            readout_format=",.0f",
            style=style,
            layout=layout,
        ),
        "output_tokens": widgets.IntSlider(
            value=int(s["output_tokens"]),
            min=0,
            max=4_000,
            step=1,
            description="output tokens per answer",
            style=style,
            layout=layout,
        ),
        "batch": widgets.Checkbox(
            value=s["batch"], description="memory write on the Batch API", style=style
        ),
    }
    return controls


def explorer_widgets(settings: Mapping[str, Any] | None = None) -> Any:
    """The interactive explorer (ipywidgets, a live kernel)."""
    import ipywidgets as widgets
    from IPython.display import display

    controls = _explorer_controls(widgets, explorer_settings(settings))

    def redraw(**values: Any) -> None:
        try:
            fig, _ = explorer_update(values)
        except ValueError as error:  # e.g. a retention the chosen model does not sell
            print(error)
            return
        display(fig)
        plt.close(fig)

    out = widgets.interactive_output(redraw, controls)
    return widgets.VBox([*controls.values(), out])


SYSTEM_COLORS = {
    "full_history": "#d62728",
    "rolling_window": "#ff7f0e",
    "mem0": "#1f77b4",
    "observational": "#2ca02c",
}
