"""Figures of the study's stages (notebooks 00-04)."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from memcost.answers import in_words, system_kind, system_labels
from memcost.calls import OFFLINE
from memcost.offline import LEXICAL
from memcost.paths import DISPLAY_NAMES, display_name
from memcost.plots.style import OFFLINE_NOTE, label_backend, system_color, token_label

# Fewer conversations than this are drawn one dot each: a histogram of 2 or 3 values is bars of
# height 1 that hide which value is which.
MIN_FOR_HISTOGRAM = 10


SERIES = (
    ("utterance text (Table 1)", "text_tokens", "#1f77b4"),
    ("long-context rendering (speakers, dates)", "history_tokens", "#d62728"),
)


def plot_conversation_lengths(stats: pd.DataFrame, dataset: str) -> plt.Figure:
    """Tokens per conversation, Table 1's text and the long-context rendering as stacked histograms,
    or a dot per conversation below 10."""
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


def plot_facts_vs_history(stats: pd.DataFrame, *, dataset: str, backend: str = "") -> Any:
    """Active facts per user against the history's tokens, the compression as the colour."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    if len(stats):
        points = ax.scatter(
            stats["history_tokens"],
            stats["active_facts"],
            c=stats["compression"].astype(float),
            cmap="viridis",
            s=40,
            edgecolor="black",
            linewidth=0.4,
        )
        bar = fig.colorbar(points, ax=ax, label="history tokens per fact token")
        bar.locator = MaxNLocator(5)  # a few users span a narrow range: no 0.005 steps
        bar.update_ticks()
    ax.set_xlabel("history tokens (long-context rendering)")
    ax.set_ylabel("active facts")
    ax.set_title(f"Facts per user vs history length ({display_name(dataset)})")
    # room past the largest point, so that no dot sits half outside the axes
    ax.set_xlim(0, float(stats["history_tokens"].max()) * 1.08 if len(stats) else None)
    ax.set_ylim(0, float(stats["active_facts"].max()) * 1.1 + 1 if len(stats) else None)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"))
    label_backend(ax, backend)
    return fig


def plot_evidence_recall(
    by_category: pd.DataFrame, *, dataset: str, top_k: int, backend: str = ""
) -> Any:
    """Per category: evidence covered by any stored fact against by the retrieved ones (LoCoMo's
    category 5 left out, as in Table 3)."""
    table = by_category.loc[
        (by_category["with_evidence"] > 0) & (by_category["category"].astype(str) != "adversarial")
    ]
    # categories down the y axis: long names (LongMemEval's) never collide, and a value label on
    # every bar shows the zeros that a bar of length 0 cannot
    fig, ax = plt.subplots(figsize=(7.6, 1.4 + 0.62 * max(2, len(table))))
    y = np.arange(len(table))[::-1]
    for offset, column, label, color in (
        (0.2, "evidence_in_memory", "in memory (any fact)", "#9ecae1"),
        (-0.2, "evidence_recall", f"retrieved (top {top_k})", "#1f77b4"),
    ):
        bars = ax.barh(y + offset, table[column], height=0.4, label=label, color=color)
        ax.bar_label(bars, labels=[f"{v:.2f}" for v in table[column]], padding=3, fontsize=8)
    labels = [
        f"{in_words(str(c))} (n = {int(n)})"
        for c, n in zip(table["category"], table["with_evidence"], strict=True)
    ]
    ax.set_yticks(y, labels, fontsize=9)
    ax.set_xlim(0, 1.12)
    ax.set_xlabel("evidence recall (share of the evidence turns found)")
    ax.grid(axis="y", visible=False)
    ax.set_title(f"Where the evidence gets lost ({display_name(dataset)})", loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    if backend == OFFLINE:  # right of the axes, under the legend, where it covers no bar
        ax.text(
            1.02,
            0.0,
            OFFLINE_NOTE.replace(" (", "\n("),
            transform=ax.transAxes,
            va="bottom",
            fontsize=8,
            color="#555555",
            style="italic",
        )
    fig.tight_layout()
    return fig


SHOWN_KINDS = ("memory", "long_context", "rolling_window")


def _system_row(
    ax: plt.Axes, row: int, values: pd.Series, color: str, rng: np.random.Generator
) -> None:
    ax.boxplot(
        [values],
        positions=[row],
        orientation="horizontal",
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
    """Context tokens per question, a row per system, on a log scale."""
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
    # 1-2-5 ticks where the axis spans few decades: one lone "1,000" reads as no scale at all
    decades = np.log10(ax.get_xlim()[1] / ax.get_xlim()[0])
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if decades < 3 else (1.0,)))
    ax.xaxis.set_major_formatter(FuncFormatter(token_label))  # "10,000" and "20,000" collided
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


# One marker per kind as well as one colour, so that no system is told apart by colour alone.
MARKERS = {
    "memory": "o",
    "long_context": "s",
    "rolling_window": "D",
    "no_context": "v",
    "oracle": "^",
}
ALL = "all questions"


def _judge_label(table3: pd.DataFrame, backend: str) -> str:
    found = sorted({str(v) for v in table3["judge_model"].dropna()}) if not table3.empty else []
    judge = found[0] if len(found) == 1 else "+".join(found)
    if judge == LEXICAL or backend == OFFLINE:
        return "the lexical rule (offline, not an LLM)"
    return judge


def _rows(table3: pd.DataFrame, categories: pd.DataFrame) -> pd.DataFrame:
    overall = table3.assign(category=ALL)
    cols = ["category", "system", "n", "accuracy", "wilson_low", "wilson_high"]
    frames = [overall[cols + ["bootstrap_low", "bootstrap_high"]]]
    if not categories.empty:
        frames.append(categories[cols])
    rows = pd.concat(frames, ignore_index=True)
    order = [ALL] + sorted(set(rows["category"]) - {ALL})
    rows["group"] = rows["category"].map({g: i for i, g in enumerate(order)})
    return rows


def _styles(systems: list[str]) -> dict[str, tuple[str, str, str, str]]:
    """Colour, marker, face and line per system: a kind's second system hollow and dashed."""
    seen: dict[str, int] = {}
    out = {}
    for system in systems:
        kind = system_kind(system)
        seen[kind] = seen.get(kind, 0) + 1
        color = system_color(system)
        second = seen[kind] > 1
        out[system] = (
            color,
            MARKERS.get(kind, "o"),
            "white" if second else color,
            "--" if second else "-",
        )
    return out


def plot_accuracy(
    table3: pd.DataFrame, categories: pd.DataFrame, *, dataset: str, backend: str = ""
) -> plt.Figure:
    """Per category a dot per system with its Wilson interval; overall, the cluster bootstrap
    interval as a faint band."""
    rows = _rows(table3, categories)
    systems = list(table3["system"])
    groups = rows.drop_duplicates("group").sort_values("group")
    height = min(10.0, 1.4 + 0.17 * len(groups) * max(1, len(systems)) + 0.2 * len(groups))
    fig, ax = plt.subplots(figsize=(8.0, height))
    spread = 0.7 / max(1, len(systems))
    styles = _styles(systems)
    names = system_labels(systems, offline=backend == OFFLINE)
    for j, system in enumerate(systems):
        mine = rows.loc[rows["system"] == system]
        y = mine["group"].to_numpy() + (j - (len(systems) - 1) / 2) * spread
        color, marker, face, line = styles[system]
        acc = mine["accuracy"].to_numpy(dtype=float)
        ax.hlines(
            y, mine["wilson_low"], mine["wilson_high"], color=color, linewidth=1.4, linestyle=line
        )
        ax.scatter(
            acc, y, facecolor=face, marker=marker, s=34, zorder=3, edgecolor=color, linewidth=1.2
        )
        first = mine.loc[mine["category"] == ALL]
        if not first.empty and pd.notna(first["bootstrap_low"].iloc[0]):
            ax.hlines(
                y[0],
                first["bootstrap_low"].iloc[0],
                first["bootstrap_high"].iloc[0],
                color=color,
                linewidth=6,
                alpha=0.25,
                zorder=1,
            )
    labels = []
    for g in groups.itertuples(index=False):
        n = int(rows.loc[rows["group"] == g.group, "n"].max())
        labels.append(f"{in_words(str(g.category))}  (n = {n})")
    ax.set_yticks(groups["group"].to_numpy(), labels, fontsize=9)
    for boundary in groups["group"].to_numpy()[:-1]:
        ax.axhline(boundary + 0.5, color="#dddddd", linewidth=0.8)
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)
    ax.set_xlim(-0.02, 1.02)
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _p: f"{100 * v:.0f}%"))
    ax.set_xlabel(
        "accuracy (majority of votes); lines: Wilson 95%; faint band (all questions): "
        "cluster bootstrap 95%",
        fontsize=8.5,
    )
    ax.set_title(
        f"{display_name(dataset)}: accuracy by system and category\njudged by "
        f"{_judge_label(table3, backend)}",
        loc="left",
        fontsize=10,
    )
    handles = [
        Line2D(
            [],
            [],
            color=styles[s][0],
            marker=styles[s][1],
            markerfacecolor=styles[s][2],
            linestyle=styles[s][3],
            label=names[s],
        )
        for s in systems
    ]
    ax.legend(
        handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False
    )
    fig.tight_layout()
    return fig
