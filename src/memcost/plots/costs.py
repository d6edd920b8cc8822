"""Figures of the cost analysis (notebook 05)."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from memcost.answers import system_labels
from memcost.calls import OFFLINE
from memcost.catalog import dollars
from memcost.costs.measured import component_label
from memcost.paths import display_name
from memcost.plots.style import (
    OFFLINE_NOTE,
    SYSTEM_COLORS,
    StepFormatter,
    label_backend,
    panel_grid,
    system_color,
    token_label,
)

LC_CHEAPER_COLOR = "#b2182b"  # the red end of RdBu: long context cheaper
MEMORY_CHEAPER_COLOR = "#2166ac"  # the blue end: memory cheaper
COST_CMAP = "RdBu"  # diverging, red below zero (C_LC < C_Mem), blue above


def usd_label(value: float, _pos: object = None) -> str:
    if value == 0:
        return "$0"
    sign = "−" if value < 0 else ""
    value = abs(value)
    return f"{sign}${value:.2f}" if value >= 0.1 else f"{sign}${value:.3g}"


def _log_edges(centres: np.ndarray) -> np.ndarray:
    logs = np.log(centres)
    mids = (logs[1:] + logs[:-1]) / 2
    first, last = 2 * logs[0] - mids[0], 2 * logs[-1] - mids[-1]
    return np.exp(np.concatenate([[first], mids, [last]]))


def plot_break_even_heatmap(
    contexts: np.ndarray,
    turns: np.ndarray,
    difference: np.ndarray,
    boundary: np.ndarray,
    *,
    marks: dict[float, int] | None = None,
    reference_context: float | None = None,
    reference_label: str = "",
    subtitle: str = "",
    region_labels: bool = True,
    zero_contour: bool = False,
    tier_threshold: float | None = None,
) -> plt.Figure:
    """Figure 1: ``C_LC − C_Mem`` over context length (x, log) and turns (y) on a symmetric-log
    colour scale (red: long context cheaper; blue: memory), the break-even boundary as a
    staircase. ``tier_threshold``: where prompts enter the long-context tier; ``region_labels``:
    the regions named as in the paper; ``zero_contour``: where the costs are equal."""
    from matplotlib.colors import SymLogNorm
    from matplotlib.ticker import FuncFormatter

    limit = float(np.nanmax(np.abs(difference)))
    linthresh = max(limit / 300, 1e-4)
    norm = SymLogNorm(linthresh=linthresh, linscale=0.6, vmin=-limit, vmax=limit, base=10)
    fig, ax = plt.subplots(figsize=(9.0, 5.6))
    mesh = ax.pcolormesh(
        _log_edges(np.asarray(contexts, float)),
        np.arange(turns[0] - 0.5, turns[-1] + 1.0, 1.0),
        difference,
        cmap=COST_CMAP,
        norm=norm,
        shading="flat",
        rasterized=True,
    )
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(token_label))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda *_: ""))
    edges = _log_edges(np.asarray(contexts, float))
    finite = np.where(np.isfinite(boundary), boundary - 0.5, np.nan)
    # Where memory is cheaper from the first question the boundary lies on the plot's bottom
    # edge, under the axis line: those lengths get a bar of their own inside the N = 1 row.
    first = np.isfinite(boundary) & (boundary <= turns[0])
    on_edge = bool(first.any()) and bool((first | ~np.isfinite(boundary)).all())
    if not on_edge:
        ax.stairs(finite, edges, color="black", linewidth=2.2, baseline=None)
        ax.plot([], [], color="black", linewidth=2.2, label="break-even boundary")
    if first.any():
        _mark_first_question(ax, edges, first, float(turns[0]), alone=on_edge)
    if tier_threshold and edges[0] < tier_threshold < edges[-1]:
        _mark_tier(ax, tier_threshold, turns)
    if reference_context:
        _mark_reference(ax, reference_context, reference_label, turns)
    if zero_contour and np.nanmin(difference) < 0 < np.nanmax(difference):
        _draw_zero_contour(ax, contexts, turns, difference)
    _mark_break_evens(ax, marks or {})
    _label_heatmap(fig, ax, edges, turns, subtitle, region_labels)
    _heatmap_colorbar(fig, ax, mesh, limit, linthresh)
    ax.legend(loc="upper left", frameon=True, fontsize=9)
    return fig


def _mark_first_question(
    ax: plt.Axes, edges: np.ndarray, first: np.ndarray, row: float, *, alone: bool
) -> None:
    from matplotlib import patheffects

    outline = [patheffects.withStroke(linewidth=5.5, foreground="white")]
    for i in np.flatnonzero(first):
        ax.plot(
            [edges[i], edges[i + 1]],
            [row, row],
            color="black",
            linewidth=3,
            solid_capstyle="butt",
            path_effects=outline,
            zorder=4,
        )
    label = "break-even at N = 1 (bar along the bottom)" if alone else "break-even at N = 1"
    ax.plot([], [], color="black", linewidth=3, path_effects=outline, label=label)


def _mark_tier(ax: plt.Axes, tier_threshold: float, turns: np.ndarray) -> None:
    ax.axvline(tier_threshold, color="#333333", linestyle=(0, (1, 2)), linewidth=1.2)
    ax.text(
        tier_threshold * 1.05,
        turns[0] + 0.5 * (turns[-1] - turns[0]),
        f"{token_label(tier_threshold)}: long-context\ntier (whole request\npriced higher)",
        fontsize=8.5,
        color="#222222",
        va="center",
        ha="left",
        bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.75},
    )


def _mark_reference(ax: plt.Axes, context: float, label: str, turns: np.ndarray) -> None:
    ax.axvline(context, color="#333333", linestyle="--", linewidth=1)
    # above the middle: the legend and a region's name hold the top, the published break-evens
    # and the other region's name the bottom, the tier's note the middle
    ax.text(
        context * 1.04,
        turns[0] + 0.66 * (turns[-1] - turns[0]),
        label,
        fontsize=9,
        color="#222222",
        va="center",
        bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.75},
    )


def _draw_zero_contour(
    ax: plt.Axes, contexts: np.ndarray, turns: np.ndarray, difference: np.ndarray
) -> None:
    ax.contour(
        np.asarray(contexts, float),
        np.asarray(turns, float),
        difference,
        levels=[0.0],
        colors="#333333",
        linestyles="dotted",
        linewidths=1.6,
    )
    ax.plot([], [], color="#333333", ls="dotted", label="equal cost (C_LC = C_Mem)")


def _mark_break_evens(ax: plt.Axes, marks: dict[float, int]) -> None:
    """Published break-evens as white circles labelled ``N=…``."""
    for L, n in marks.items():
        ax.plot(
            L,
            n,
            marker="o",
            markersize=7,
            markerfacecolor="white",
            markeredgecolor="black",
            zorder=5,
        )
        ax.annotate(
            f"N={n}",
            (L, n),
            xytext=(6, 6),
            textcoords="offset points",
            fontsize=9,
            fontweight="bold",
            color="black",
            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8},
        )


def _label_heatmap(
    fig: plt.Figure,
    ax: plt.Axes,
    edges: np.ndarray,
    turns: np.ndarray,
    subtitle: str,
    region_labels: bool = True,
) -> None:
    regions = ((0.04, "long context cheaper", "bottom"), (0.96, "memory cheaper", "top"))
    if not region_labels:
        subtitle = f"{subtitle}\nred: long context cheaper; blue: memory cheaper".strip()
    for y, text, va in regions if region_labels else ():
        ax.text(
            0.98,
            y,
            text,
            transform=ax.transAxes,
            color="white",
            fontweight="bold",
            fontsize=11,
            ha="right",
            va=va,
        )
    ax.set_xlim(edges[0], edges[-1])
    ax.set_ylim(turns[0] - 0.5, turns[-1] + 0.5)
    ax.set_xlabel("context length L (tokens of history, log scale)")
    ax.set_ylabel("questions per user N")
    ax.grid(False)
    fig.suptitle(
        "Figure 1 — cumulative cost difference per user, long context minus memory",
        x=0.01,
        ha="left",
        fontweight="bold",
        fontsize=11,
    )
    if subtitle:
        ax.set_title(subtitle, loc="left", fontsize=9, fontweight="normal", color="#333333")


def _heatmap_colorbar(
    fig: plt.Figure, ax: plt.Axes, mesh: Any, limit: float, linthresh: float
) -> None:
    """A colour bar in dollars, ticks at powers of ten on both sides of zero."""
    from matplotlib.ticker import FuncFormatter

    bar = fig.colorbar(mesh, ax=ax, pad=0.02)
    bar.set_label("C_LC(N) − C_Mem(N) per user (USD, symmetric log scale)")
    ticks = [
        t
        for t in (-1, -0.1, -0.01, -0.001, 0, 0.001, 0.01, 0.1, 1)
        if abs(t) <= limit and (t == 0 or abs(t) >= linthresh)
    ]
    bar.set_ticks(ticks)
    bar.ax.yaxis.set_major_formatter(FuncFormatter(usd_label))
    bar.ax.minorticks_off()


def plot_cumulative_costs(
    turns: np.ndarray,
    memory: np.ndarray,
    long_context: np.ndarray,
    break_even: int | None,
    *,
    published: Any = None,
    subtitle: str = "",
    title: str = "Cumulative cost per user",
) -> plt.Figure:
    """Memory against long context as questions accumulate; the crossing marked, the gap shaded."""

    fig, ax = plt.subplots(figsize=(8.0, 4.8))
    ax.plot(
        turns,
        long_context,
        color=SYSTEM_COLORS["long_context"],
        linewidth=2.2,
        label="long context: C_first + (N−1)·C_cached",
    )
    ax.plot(
        turns,
        memory,
        color=SYSTEM_COLORS["memory"],
        linewidth=2.2,
        label="memory: C_write + N·C_read",
    )
    for where, color in (
        (memory >= long_context, LC_CHEAPER_COLOR),
        (memory <= long_context, MEMORY_CHEAPER_COLOR),
    ):
        ax.fill_between(
            turns,
            memory,
            long_context,
            where=where,
            interpolate=True,
            color=color,
            alpha=0.12,
            linewidth=0,
        )
    if published is not None:
        _mark_published(ax, published)
    if break_even is not None and turns[0] <= break_even <= turns[-1]:
        _mark_crossing(ax, turns, memory, long_context, break_even)
    ax.yaxis.set_major_formatter(StepFormatter(prefix="$"))  # $0.025, not a rounded $0.03
    ax.set_xlim(turns[0] - 0.5, turns[-1] + 0.5)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("questions about the same history N")
    ax.set_ylabel("cumulative cost per user (USD)")
    ax.set_title(title + (f"\n{subtitle}" if subtitle else ""), loc="left", fontsize=11)
    ax.legend(loc="upper left", fontsize=9)
    return fig


def _mark_published(ax: plt.Axes, published: Any) -> None:
    """The paper's Table 4 values as hollow circles."""
    for column, system, label in (
        ("memory_usd", "memory", "paper, Table 4"),
        ("long_context_usd", "long_context", None),
    ):
        ax.scatter(
            published["n_turns"],
            published[column],
            s=46,
            facecolors="white",
            edgecolors=SYSTEM_COLORS[system],
            linewidths=1.6,
            zorder=4,
            **({"label": label} if label else {}),
        )


def _mark_crossing(
    ax: plt.Axes, turns: np.ndarray, memory: np.ndarray, long_context: np.ndarray, break_even: int
) -> None:
    i = int(np.flatnonzero(turns == break_even)[0])
    ax.axvline(break_even, color="#333333", linestyle=":", linewidth=1.2)
    ax.plot(break_even, memory[i], "o", color="black", markersize=6, zorder=5)
    saving = 1 - memory[-1] / long_context[-1]
    ax.annotate(
        f"break-even: memory is cheaper\nfrom question {break_even} on",
        (break_even, memory[i]),
        xytext=(18, -46),
        textcoords="offset points",
        fontsize=9,
        arrowprops={"arrowstyle": "->", "color": "#333333"},
    )
    ax.text(
        turns[-1],
        (memory[-1] + long_context[-1]) / 2,
        f"memory saves\n{saving:.0%} at N={turns[-1]}",
        ha="right",
        va="center",
        fontsize=9,
        color=MEMORY_CHEAPER_COLOR,
    )


# Readable titles for the calibration figure's constants (the CSV keeps the variable names).
CONSTANT_TITLES = {
    "write_usd_per_token": "write cost per history token",
    "read_usd": "read cost per question",
    "output_tokens": "output tokens per long-context answer",
    "cached_share": "share of the history billed as cached",
}
# ... when ``display`` rescales them (the axis then is not per token).
RESCALED_TITLES = {"write_usd_per_token": "write cost of one history"}


def plot_calibration_intervals(
    intervals: Any,
    *,
    display: dict[str, tuple[float, str]] | None = None,
    subtitle: str = "",
) -> plt.Figure:
    """Each implied constant's feasible interval with the chosen and stated values; ``display``
    rescales one for reading, with its axis label."""

    display = display or {}
    fig, axes = panel_grid(len(intervals), panel_size=(4.7, 2.3))
    for ax, row in zip(axes, intervals.itertuples(), strict=True):
        _draw_interval(ax, row, *display.get(row.constant, (1.0, row.unit)))
    # the legend of the panel that shows all three marks (a stated value apart from the chosen)
    handles, labels = max((ax.get_legend_handles_labels() for ax in axes), key=lambda h: len(h[1]))
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=9, frameon=False)
    fig.suptitle(
        "What the published cells allow" + (f" — {subtitle}" if subtitle else ""),
        x=0.01,
        ha="left",
        fontweight="bold",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


def _draw_interval(ax: plt.Axes, row: Any, factor: float, unit: str) -> None:
    from matplotlib.ticker import MaxNLocator

    low, high = row.low * factor, row.high * factor
    chosen, stated = row.chosen * factor, row.stated * factor
    values = [low, high, chosen, stated]
    span = max(values) - min(values) or abs(chosen) * 0.01 or 1.0
    ax.plot(
        [low, high],
        [0, 0],
        color="#4d4d4d",
        linewidth=8,
        solid_capstyle="butt",
        alpha=0.35,
        label="feasible (all published cells)",
    )
    same = bool(np.isclose(stated, chosen, rtol=1e-9, atol=0))
    ax.plot(
        [chosen], [0], "o", color="black", markersize=11 if same else 7, label="chosen", zorder=3
    )
    # Where the text's value is the chosen one, its mark sits on the dot, smaller, and says so.
    ax.plot(
        [stated],
        [0],
        "X",
        color=LC_CHEAPER_COLOR,
        markersize=6 if same else 9,
        markeredgecolor="white" if same else LC_CHEAPER_COLOR,
        zorder=4,
        label="stated in the text",
    )
    if same:
        ax.annotate(
            "chosen = stated",
            (chosen, 0),
            xytext=(0, 12),
            textcoords="offset points",
            ha="center",
            fontsize=8.5,
            color="#222222",
        )
    ax.set_xlim(min(values) - 0.15 * span, max(values) + 0.15 * span)
    ax.set_yticks([])
    titles = RESCALED_TITLES if factor != 1.0 else CONSTANT_TITLES
    title = titles.get(row.constant) or CONSTANT_TITLES.get(row.constant)
    ax.set_title(title or row.constant.replace("_", " "), fontsize=10, loc="left")
    ax.set_xlabel(unit, fontsize=9)
    ax.tick_params(axis="x", labelsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(4))
    ax.ticklabel_format(axis="x", style="plain", useOffset=False)
    ax.grid(axis="y", visible=False)


def plot_stage_costs(summary: Any, *, backend: str = "") -> plt.Figure:
    """Each component's total, a panel per dataset, on one log dollar axis (the judge costs a
    hundred times a write)."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    data = summary.loc[summary["component"] != "write: total"]
    datasets = list(dict.fromkeys(data["dataset"]))
    heights = [max(1.0, 0.32 * (data["dataset"] == d).sum()) for d in datasets]
    fig, axes = plt.subplots(
        len(datasets),
        1,
        figsize=(8.5, 0.9 + sum(heights) * 1.05),
        squeeze=False,
        sharex=True,
        gridspec_kw={"height_ratios": heights},
    )
    positive = data.loc[data["total_usd"] > 0, "total_usd"]
    low = 10.0 ** np.floor(np.log10(positive.min())) if len(positive) else 1e-4
    high = positive.max() * 5 if len(positive) else 1.0  # room for the largest bar's label
    for ax, dataset in zip(axes[:, 0], datasets, strict=True):
        part = data.loc[data["dataset"] == dataset].iloc[::-1]
        colors = [
            system_color("memory")
            if c.startswith(("write", "read"))
            else system_color(c.split(": ", 1)[-1])
            if c.startswith("answer")
            else "#7f7f7f"
            for c in part["component"]
        ]
        names = [component_label(c, offline=backend == OFFLINE) for c in part["component"]]
        # bars start at the axis' left end: a log axis has no zero
        widths = np.maximum(part["total_usd"].to_numpy(float) - low, 0.0)
        bars = ax.barh(names, widths, left=low, color=colors, height=0.7)
        ax.bar_label(bars, labels=[dollars(v) for v in part["total_usd"]], padding=3, fontsize=8)
        ax.set_xscale("log")
        ax.set_xlim(low, high)
        ax.set_title(display_name(dataset), loc="left", fontsize=10)
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(axis="y", visible=False)
    axes[-1, 0].xaxis.set_major_locator(LogLocator(base=10))
    axes[-1, 0].xaxis.set_major_formatter(
        FuncFormatter(lambda v, _pos: f"${v:.{max(0, -int(np.floor(np.log10(v))))}f}")
    )
    axes[-1, 0].set_xlabel("total cost at list prices (USD, log scale, the same for every panel)")
    title = "Where the money goes, by component"
    if backend == "offline":
        title += " — ESTIMATE: " + OFFLINE_NOTE
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold", fontsize=11)
    fig.tight_layout()
    return fig


def _context_palette(contexts: Any) -> dict[float, Any]:
    """One viridis colour per context length (the palette's pale end left out)."""
    colors = sns.color_palette("viridis", n_colors=len(contexts) + 1)
    return {L: tuple(colors[i]) for i, L in enumerate(contexts)}


def plot_sensitivity(
    discount: Any,
    output_tokens: Any,
    batch: Any,
    *,
    paper_discount: float = 0.9,
    paper_output_tokens: float = 527,
    subtitle: str = "",
) -> plt.Figure:
    """Small multiples: break-even against cache discount, output tokens, Batch-API use."""
    contexts = sorted(discount["context_tokens"].unique())
    palette = _context_palette(contexts)
    # (a) and (b) side by side, (c) under them across the width: ~1,500 px wide, not a
    # 2,000-px row of three
    fig = plt.figure(figsize=(10.0, 7.4))
    grid = fig.add_gridspec(2, 2)
    first = fig.add_subplot(grid[0, 0])
    axes = [
        first,
        fig.add_subplot(grid[0, 1], sharey=first),
        fig.add_subplot(grid[1, :], sharey=first),
    ]
    top = (
        max(
            float(np.nanmax(frame["break_even_n"].astype(float)))
            for frame in (discount, output_tokens, batch)
        )
        * 1.08
    )
    top = top if np.isfinite(top) else 10.0
    for L in contexts:
        part = discount.loc[discount["context_tokens"] == L]
        _draw_break_even(
            axes[0],
            top,
            part["cache_discount"] * 100,
            part["break_even_n"],
            palette[L],
            marker="o",
            markersize=3.5,
            label=f"L = {token_label(L)}",
        )
        part = output_tokens.loc[output_tokens["context_tokens"] == L]
        _draw_break_even(
            axes[1],
            top,
            part["output_tokens"],
            part["break_even_n"],
            palette[L],
            marker="o",
            markersize=3.5,
        )
    _draw_batch_panel(axes[2], top, batch, contexts, palette)
    _mark_paper(axes[0], paper_discount * 100, "right")
    _mark_paper(axes[1], paper_output_tokens, "left")
    _label_sensitivity(fig, axes, top, subtitle)
    return fig


def _draw_batch_panel(
    ax: plt.Axes, top: float, batch: Any, contexts: list[Any], palette: dict[Any, Any]
) -> None:
    scenarios = list(dict.fromkeys(batch["scenario"]))
    for i, L in enumerate(contexts):
        part = batch.loc[batch["context_tokens"] == L]
        # Scenarios have no order: dots side by side, one per context length, each labelled
        # with its N, so that equal break-evens do not hide one another on the axis.
        x = [scenarios.index(s) + (i - (len(contexts) - 1) / 2) * 0.13 for s in part["scenario"]]
        _draw_break_even(
            ax,
            top,
            x,
            part["break_even_n"],
            palette[L],
            marker="o",
            markersize=6,
            linestyle="none",
            clip_on=False,
        )
        for xi, n in zip(x, part["break_even_n"].astype(float), strict=True):
            if np.isfinite(n):
                ax.annotate(
                    f"{n:.0f}",
                    (xi, n),
                    xytext=(0, 5),
                    textcoords="offset points",
                    ha="center",
                    fontsize=7.5,
                    color="#333333",
                )
    ax.set_xticks(range(len(scenarios)), scenarios)
    ax.set_title(
        "△ on the top edge: memory never cheaper", loc="right", fontsize=8, color="#555555"
    )


def _draw_break_even(ax: plt.Axes, top: float, x: Any, y: Any, color: Any, **kwargs: Any) -> None:
    """One context length's curve; where memory never wins, a hollow triangle on the top edge."""
    y = np.asarray(y, dtype=float)
    ax.plot(x, y, color=color, **kwargs)
    never = ~np.isfinite(y)
    if never.any():
        ax.plot(
            np.asarray(x)[never],
            np.full(never.sum(), top),
            linestyle="none",
            marker="^",
            markersize=7,
            markerfacecolor="white",
            markeredgecolor=color,
            clip_on=False,
        )


def _mark_paper(ax: plt.Axes, x: float, ha: str) -> None:
    ax.axvline(x, color="#777777", linestyle="--", linewidth=1)
    ax.text(
        x,
        0.98,
        " paper",
        transform=ax.get_xaxis_transform(),
        ha=ha,
        va="top",
        fontsize=8,
        color="#555555",
    )


def _label_sensitivity(fig: plt.Figure, axes: Any, top: float, subtitle: str) -> None:
    axes[0].set_xlabel("cached-input discount (% off the input price)")
    axes[1].set_xlabel("output tokens per long-context answer")
    axes[2].set_xlabel(
        "which components use Batch-API prices (no order; one dot per context "
        "length, labelled with its N)"
    )
    axes[2].margins(x=0.08)
    for ax in (axes[0], axes[2]):
        ax.set_ylabel("break-even N (questions per user)")
    for ax, letter in zip(axes, "abc", strict=True):
        ax.set_ylim(0, top)
        ax.set_title(f"({letter})", loc="left", fontsize=10)
    axes[0].legend(loc="upper left", fontsize=8)
    fig.suptitle(
        "How robust is the break-even?" + (f"  {subtitle}" if subtitle else ""),
        x=0.01,
        ha="left",
        fontweight="bold",
        fontsize=11,
    )
    fig.tight_layout()


def plot_token_vs_dollar_break_even(frame: Any, *, subtitle: str = "") -> plt.Figure:
    """Token-level break-even (no caching, no prices) beside the dollar ones."""
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(8.0, 4.4))
    styles = {
        "token_break_even": ("token count, no caching (cognee's formula)", "#555555", "--", "s"),
        "dollar_break_even_no_cache": ("dollars, no prompt caching", "#e08214", "-", "^"),
        "dollar_break_even_cached": ("dollars, with prompt caching (paper)", "black", "-", "o"),
    }
    for column, (label, color, style, marker) in styles.items():
        ax.plot(
            frame["context_tokens"],
            frame[column],
            linestyle=style,
            marker=marker,
            markersize=4,
            color=color,
            label=label,
        )
    # The ingestion multiplier (ingested ÷ history tokens) is a ratio, not a number of
    # questions: named beside the token curve it approaches, not drawn on this axis.
    last = frame.sort_values("context_tokens").iloc[-1]
    ax.annotate(
        f"tends to the ingestion multiplier, {float(last['ingestion_multiplier']):.2f}"
        " (ingested ÷ history tokens)",
        (float(last["context_tokens"]), float(last["token_break_even"])),
        xytext=(0, 7),
        textcoords="offset points",
        ha="right",
        fontsize=8,
        color="#555555",
    )
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(token_label))
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.set_yticks([1, 2, 5, 10, 20, 50, 100])
    _mark_never(ax, frame, list(styles))
    ax.set_xlabel("context length L (tokens)")
    ax.set_ylabel("break-even (questions per user, log scale)")
    ax.set_title(
        "Token-level vs dollar break-even" + (f"\n{subtitle}" if subtitle else ""),
        loc="left",
        fontsize=11,
    )
    ax.legend(fontsize=8, loc="upper right")
    return fig


def _mark_never(ax: plt.Axes, frame: Any, columns: list[str], top: float = 100.0) -> None:
    """A hollow triangle on the top edge where a break-even is missing or above the axis."""
    ax.set_ylim(top=top)
    never_any = False
    for column in columns:
        values = np.asarray(frame[column], dtype=float)
        off = ~np.isfinite(values) | (values > top)
        if off.any():
            never_any = True
            ax.plot(
                np.asarray(frame["context_tokens"])[off],
                np.full(off.sum(), top),
                linestyle="none",
                marker="^",
                markersize=8,
                markerfacecolor="white",
                markeredgecolor="black",
                clip_on=False,
                zorder=4,
            )
    if never_any:
        ax.text(
            0.01,
            0.02,
            "△ on the top edge: memory is never cheaper within the horizon, or "
            "the break-even is above 100",
            transform=ax.transAxes,
            fontsize=8,
            color="#555555",
        )


def plot_sustained_break_even(
    series: Any, first: int | None, sustained: int | None, *, subtitle: str = ""
) -> plt.Figure:
    """The cumulative cost difference turn by turn, with the first and sustained break-even."""
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(8.0, 4.2))
    gap = series["long_context_cumulative_usd"] - series["memory_cumulative_usd"]
    t = series["turn"].to_numpy()
    ax.axhline(0, color="#333333", linewidth=0.8)
    ax.fill_between(
        t,
        0,
        gap,
        where=gap > 0,
        step="mid",
        color=MEMORY_CHEAPER_COLOR,
        alpha=0.25,
        label="memory cheaper so far",
    )
    ax.fill_between(
        t,
        0,
        gap,
        where=gap <= 0,
        step="mid",
        color=LC_CHEAPER_COLOR,
        alpha=0.25,
        label="long context cheaper so far",
    )
    ax.step(t, gap, where="mid", color="black", linewidth=1.2)
    marks = [(first, "first crossing", ":"), (sustained, "sustained", "--")]
    if first is not None and first == sustained:
        marks = [(first, "first crossing = sustained", "--")]
    for value, label, style in marks:
        if value is not None:
            ax.axvline(value, color="#333333", linestyle=style, linewidth=1.2)
            ax.text(
                value,
                0.97,
                f" {label}: turn {value}",
                transform=ax.get_xaxis_transform(),
                fontsize=8,
                va="top",
                rotation=90,
                ha="right",
            )
    ax.yaxis.set_major_formatter(FuncFormatter(usd_label))
    ax.set_xlabel("turn of the conversation")
    ax.set_ylabel("cumulative C_LC − C_Mem (USD)")
    ax.set_title(
        "First vs sustained break-even in a growing conversation"
        + (f"\n{subtitle}" if subtitle else ""),
        loc="left",
        fontsize=11,
    )
    ax.legend(loc="upper left", bbox_to_anchor=(0.06, 0.86), fontsize=8)
    return fig


STAGES = ("search", "total")


def plot_latency(table: pd.DataFrame, *, backend: str = "") -> plt.Figure:
    """Per stage, a bar from p50 to p95 per system on a log axis, and Mem0's published p95 as a
    hollow diamond."""
    stages = [s for s in STAGES if (table["stage"] == s).any()]
    systems = list(dict.fromkeys(table["system"]))
    fig, axes = plt.subplots(
        1,
        len(stages),
        figsize=(6.2 * len(stages), 0.5 * len(systems) + 1.6),
        sharey=True,
        squeeze=False,
    )
    y = {s: i for i, s in enumerate(systems)}
    names = system_labels(systems, offline=backend == OFFLINE)
    # A call's record keeps its latency to 0.1 ms: a 0 is a time under that, drawn at the left
    # edge (a third of the smallest time measured) and said so below the axes.
    values = table[["p50_s", "p95_s"]].to_numpy(dtype=float).ravel()
    positive = values[values > 0]
    low = float(positive.min()) / 3 if positive.size else 1e-4
    for ax, stage in zip(axes[0], stages, strict=True):
        rows = table.loc[table["stage"] == stage]
        for r in rows.itertuples(index=False):
            color = system_color(r.system)
            p50, p95 = max(r.p50_s, low), max(r.p95_s, low)
            ax.hlines(y[r.system], p50, p95, color=color, linewidth=5, alpha=0.55)
            ax.scatter([p50], [y[r.system]], color=color, s=30, zorder=3)
            ax.scatter([p95], [y[r.system]], color=color, marker="|", s=160, zorder=3)
            published = getattr(r, "published_p95_s", np.nan)
            if pd.notna(published):
                ax.scatter(
                    [published],
                    [y[r.system]],
                    marker="D",
                    facecolor="white",
                    edgecolor=color,
                    s=46,
                    zorder=4,
                )
        ax.set_xscale("log")
        ax.set_xlabel("seconds per question (log scale)")
        ax.set_title(
            "search (embedding + index)" if stage == "search" else "total (search + answer)",
            fontsize=10,
        )
        label_backend(ax, backend)
    axes[0][0].set_yticks(range(len(systems)), [names[s] for s in systems], fontsize=9)
    axes[0][0].invert_yaxis()
    fig.suptitle(
        "Latency per question: dot p50, bar to p95; hollow diamond: Mem0's paper's p95 (LoCoMo)",
        fontsize=11,
    )
    if (values == 0).any():
        fig.text(
            0.01,
            0.01,
            "at the left edge: 0, a time under the 0.1 ms a call's record keeps",
            fontsize=8,
            style="italic",
            color="0.35",
        )
    fig.tight_layout(rect=(0, 0.03 if (values == 0).any() else 0, 1, 1))
    return fig
