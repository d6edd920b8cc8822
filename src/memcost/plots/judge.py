"""Notebook 04's figure: accuracy per system, overall and per category."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from memcost.answers import system_kind
from memcost.calls import OFFLINE
from memcost.offline.judge import LEXICAL
from memcost.plots.style import system_color

HATCHES = ["", "//", "..", "xx"]  # second, third, ... system of the same kind


def _judge_label(table3: pd.DataFrame, backend: str) -> str:
    found = sorted({str(v) for v in table3["judge_model"].dropna()}) if not table3.empty else []
    judge = found[0] if len(found) == 1 else "+".join(found)
    if judge == LEXICAL or backend == OFFLINE:
        return "the lexical rule (offline, not an LLM)"
    return judge


def _bars(table3: pd.DataFrame, categories: pd.DataFrame, system: str,
          groups: list[str]) -> tuple[list[float], list[float], list[float]]:
    """Per group: the system's accuracy and the lower and upper Wilson whisker lengths."""
    values, lows, highs = [], [], []
    for group in groups:
        if group == "all":
            row = table3.loc[table3["system"] == system].iloc[0]
        else:
            match = categories.loc[(categories["system"] == system)
                                   & (categories["category"] == group)]
            row = match.iloc[0] if not match.empty else None
        if row is None or pd.isna(row["accuracy"]):
            values.append(np.nan), lows.append(np.nan), highs.append(np.nan)
            continue
        values.append(row["accuracy"])
        lows.append(max(0.0, row["accuracy"] - row["wilson_low"]))
        highs.append(max(0.0, row["wilson_high"] - row["accuracy"]))
    return values, lows, highs


def plot_accuracy(table3: pd.DataFrame, categories: pd.DataFrame, *, dataset: str,
                  backend: str = "") -> plt.Figure:
    """Grouped bars: accuracy per system, overall and per category, with Wilson 95% intervals
    (overall: the dialogue-cluster bootstrap interval as a second, thicker whisker)."""
    systems = list(table3["system"])
    groups = ["all"] + sorted(categories["category"].unique()) if not categories.empty else ["all"]
    width = 0.8 / max(1, len(systems))
    fig, ax = plt.subplots(figsize=(min(14.0, max(6.5, 0.42 * len(groups) * len(systems) + 2.5)),
                                    4.4))
    seen_kinds: dict[str, int] = {}
    for j, system in enumerate(systems):
        kind = system_kind(system)
        seen_kinds[kind] = seen_kinds.get(kind, 0) + 1
        values, lows, highs = _bars(table3, categories, system, groups)
        x = np.arange(len(groups)) + (j - (len(systems) - 1) / 2) * width
        ax.bar(x, values, width * 0.92, color=system_color(system),
               hatch=HATCHES[(seen_kinds[kind] - 1) % 4], edgecolor="white", label=system)
        ax.errorbar(x, values, yerr=[lows, highs], fmt="none", ecolor="#333333", capsize=2,
                    linewidth=0.9)
        row = table3.loc[table3["system"] == system].iloc[0]
        if pd.notna(row["bootstrap_low"]):
            ax.vlines(x[0] + width * 0.22, row["bootstrap_low"], row["bootstrap_high"],
                      color="#444444", linewidth=3.2, alpha=0.6)
    ax.set_xticks(np.arange(len(groups)), [g.replace("-", "-\n", 1) if len(g) > 14 else g
                                           for g in groups], fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("accuracy (majority of votes)")
    n = int(table3["n"].max()) if not table3.empty else 0
    ax.set_title(f"{dataset}: accuracy by system ({n} questions), judged by "
                 f"{_judge_label(table3, backend)}", loc="left", fontsize=10)
    ax.text(0, -0.2, "thin whiskers: Wilson 95%; thick grey bar (overall): dialogue-cluster "
            "bootstrap 95%", transform=ax.transAxes, fontsize=7.5, color="#555555")
    ax.legend(fontsize=8, ncol=min(3, len(systems)), loc="upper left", bbox_to_anchor=(0, -0.26),
              frameon=False)
    fig.tight_layout()
    return fig


__all__ = ["plot_accuracy"]
