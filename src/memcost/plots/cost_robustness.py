"""Figures of how robust the break-even is (notebook 05, section 6): its sensitivity to the cache
discount, the answer length and Batch-API prices; token-level against dollar break-even; and the
first against the sustained break-even of a growing conversation."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from memcost.plots.costs import LC_CHEAPER_COLOR, MEMORY_CHEAPER_COLOR, token_label, usd_label


def _context_palette(contexts: Any) -> dict[float, Any]:
    """One viridis colour per context length (seaborn's palette, one colour spare so that the
    last is not the palette's pale end)."""
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
    """Small multiples: break-even vs cache discount, vs output tokens, vs Batch-API use."""
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
    """Panel (c): the break-even of each Batch-API scenario, one dot per context length."""
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
    """One context length's break-even curve; where memory never wins, a hollow triangle on the
    top edge."""
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
    """A dashed line at the paper's value, labelled ``paper``."""
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
    """Axis labels, panel letters, legend and title of the sensitivity figure."""
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
    """Token-level break-even (no caching, no prices) next to the dollar break-evens."""
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(8.0, 4.4))
    styles = {
        "token_break_even": ("token count, no caching (§9 formula)", "#555555", "--", "s"),
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
    """Where a break-even is missing (memory is never cheaper) or above the axis, a hollow
    triangle on the top edge, so that no context length silently drops out of a line."""
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
    """Cumulative cost difference turn by turn, with the first and the sustained break-even."""
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
