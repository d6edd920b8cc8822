"""The break-even explorer for workshops: cumulative cost curves of one user, redrawn from a few
settings. It draws what :mod:`memcost.today` computes and does no arithmetic of its own; the
widgets are optional (a static figure when ipywidgets or a live kernel is missing)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from memcost import today
from memcost.plots.costs import usd_label
from memcost.today import arrivals
from memcost.today.retention import RETENTION_LABELS, RETENTION_POLICIES

# The explorer's settings and their defaults (the paper's values where it has one).
EXPLORER_DEFAULTS: dict[str, Any] = {
    "context_tokens": 101_601,  # §3.3 Table 1: mean LongMemEval-S history
    "questions": 50,  # questions per user drawn
    "scenario": "current",  # a name in memcost.today.SCENARIOS (model and price date)
    "retention": "in_memory",  # always | in_memory | extended | none
    "gap_seconds": 3_600.0,  # gap between a user's questions
    "output_tokens": 527.0,  # §8: long-context output tokens per answer
    "batch": False,  # memory's write through the Batch API
}


def explorer_settings(settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The defaults with ``settings`` applied; an unknown key is an error."""
    unknown = sorted(set(settings or {}) - set(EXPLORER_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown explorer setting(s) {unknown}; known: {list(EXPLORER_DEFAULTS)}")
    return {**EXPLORER_DEFAULTS, **(settings or {})}


def explorer_frame(settings: Mapping[str, Any]) -> Any:
    """The per-question costs the explorer draws (the same function as the tables)."""
    s = explorer_settings(settings)
    assumptions = today.Assumptions(
        output_tokens=float(s["output_tokens"]), batch_write=bool(s["batch"])
    )
    times = arrivals.fixed_gaps(int(s["questions"]), float(s["gap_seconds"]))
    return today.scenario_timeline(
        today.scenario(s["scenario"]),
        float(s["context_tokens"]),
        times,
        policy=s["retention"],
        assumptions=assumptions,
    )


def explorer_update(settings: Mapping[str, Any] | None = None) -> tuple[plt.Figure, int | None]:
    """Cumulative cost of memory and long context for one user, and the break-even N."""
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
    """A log slider's minimum near ``low`` such that ``value`` lies on its step grid: the
    browser snaps a slider's value to ``min + k * step``, which would start it elsewhere."""
    import math

    exponent = math.log10(value)
    return exponent - math.floor((exponent - low) / LOG_STEP) * LOG_STEP


def _explorer_controls(widgets: Any, s: Mapping[str, Any]) -> dict[str, Any]:
    """One control per setting of :func:`explorer_update`, starting at ``s``."""
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
    """The interactive explorer (needs ipywidgets and a live kernel): sliders and drop-downs
    that call :func:`explorer_update` on every change."""
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
