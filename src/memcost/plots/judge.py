"""Notebook 04's figure: accuracy per system, overall and per category, as dots with intervals."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from memcost.answers import system_kind, system_labels
from memcost.calls import OFFLINE
from memcost.offline import LEXICAL
from memcost.paths import display_name
from memcost.plots.style import readable, system_color

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
    """One row per (group, system): accuracy, Wilson interval, n; ``all questions`` first."""
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
    """Colour, marker, marker face and line style per system: the second system of a kind (the
    second long-context model) is drawn hollow and dashed."""
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
    """Per category, a dot per system at its accuracy with its Wilson 95% interval; each label
    carries the category's n. Overall, a faint band in the system's colour is the
    dialogue-cluster bootstrap 95% interval. A 0% dot is as visible as any other."""
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
        labels.append(f"{readable(str(g.category))}  (n = {n})")
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


__all__ = ["plot_accuracy"]
