"""The published runs' figures (notebook 08; analysis only)."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from memcost.offline import LEXICAL
from memcost.plots.style import panel_grid
from memcost.stats import wilson_interval

KIND_COLORS = {"memory": "#1f77b4", "long_context": "#d62728", "probe": "#7f7f7f"}
KIND_LABELS = {
    "memory": "memory system",
    "long_context": "whole history in the prompt",
    "probe": "wrong answers, accepted by the judge",
}
DATASET_TITLES = {"locomo": "LoCoMo", "longmemeval": "LongMemEval"}


def _answered_by(model: Any) -> str:
    """A run's answering model; a probe's answers were written wrong on purpose (no model: None
    in the notebook's frame, NaN once read back from its CSV)."""
    return str(model) if isinstance(model, str) and model else "wrong on purpose"


def plot_published_accuracy(
    accuracy: pd.DataFrame, ceilings: dict[str, float] | None = None
) -> plt.Figure:
    """Accuracy of each published run, one panel per dataset, best first: a bar per run coloured
    by kind, its 95% conversation-bootstrap interval, its judge in the label, and the gold
    ceiling (what a perfect system scores against the audited gold answers) as a line."""
    ceilings = ceilings or {}
    datasets = [d for d in DATASET_TITLES if d in set(accuracy["dataset"])]
    heights = [len(accuracy[accuracy["dataset"] == d]) for d in datasets]
    fig, axes = panel_grid(
        len(datasets), panel_size=(7.2, 0.55 * max(heights, default=1) + 1.4), max_columns=1
    )
    for ax, dataset in zip(axes, datasets, strict=False):
        part = accuracy[accuracy["dataset"] == dataset].sort_values("accuracy_pct")
        y = np.arange(len(part))
        colors = [KIND_COLORS.get(k, "#9467bd") for k in part["kind"]]
        low = part["accuracy_pct"] - part["cluster_low_pct"]
        high = part["cluster_high_pct"] - part["accuracy_pct"]
        ax.barh(y, part["accuracy_pct"], color=colors, height=0.65)
        ax.errorbar(
            part["accuracy_pct"], y, xerr=[low, high], fmt="none", ecolor="black", capsize=3, lw=1
        )
        for yi, value, end in zip(y, part["accuracy_pct"], part["cluster_high_pct"], strict=True):
            # past its interval, on white: the gold ceiling's line runs through the top values
            ax.text(
                end + 1.0,
                yi,
                f"{value:.1f}%",
                va="center",
                fontsize=9,
                zorder=4,
                bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.85},
            )
        labels = [
            f"{r.name}\n{_answered_by(r.answer_model)} · judge {r.judge_model} × {r.votes}"
            for r in part.itertuples(index=False)
        ]
        ax.set_yticks(y, labels, fontsize=8)
        ax.set_xlim(0, 110)
        ax.set_xlabel("accuracy (%): majority of the judge's votes; probes: share accepted")
        ax.set_title(
            f"{DATASET_TITLES[dataset]}: published runs, {int(part['n'].max()):,} questions"
        )
        if dataset in ceilings:
            ax.axvline(ceilings[dataset], color="black", ls="--", lw=1)
            ax.text(
                ceilings[dataset],
                len(part) - 0.4,
                f" gold ceiling {ceilings[dataset]:.1f}%",
                fontsize=8,
                va="bottom",
                ha="right",
            )
        ax.grid(axis="y", visible=False)
    kinds = [k for k in KIND_COLORS if k in set(accuracy["kind"])]
    fig.legend(
        handles=[Patch(color=KIND_COLORS[k], label=KIND_LABELS[k]) for k in kinds],
        loc="lower center",
        ncol=len(kinds),
        frameon=False,
        bbox_to_anchor=(0.5, -0.01),
    )
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def plot_depth_and_latency(aligned: pd.DataFrame, accuracy: pd.DataFrame) -> plt.Figure | None:
    """Memory runs of one system at two retrieval depths: accuracy (left) and the search's
    latency p50 / p95 (right), per dataset. ``None`` when no run records its depth."""
    runs = accuracy[accuracy["top_k"].notna() & (accuracy["kind"] == "memory")]
    if runs.empty:
        return None
    mine = aligned[aligned["run"].isin(runs["name"])]
    latency = (
        pd.to_numeric(mine["latency_ms"], errors="coerce")
        .groupby(mine["run"])
        .quantile([0.5, 0.95])
        .unstack()
        .rename(columns={0.5: "p50", 0.95: "p95"})
    )
    runs = runs.join(latency, on="name").sort_values(["dataset", "top_k"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.0, 3.8))
    for dataset, part in runs.groupby("dataset", sort=False):
        label = DATASET_TITLES.get(str(dataset), str(dataset))
        left.errorbar(
            part["top_k"],
            part["accuracy_pct"],
            yerr=[
                part["accuracy_pct"] - part["cluster_low_pct"],
                part["cluster_high_pct"] - part["accuracy_pct"],
            ],
            marker="o",
            capsize=3,
            label=label,
        )
        if part["p50"].notna().any() and (part["p95"] > 0).any():
            right.plot(part["top_k"], part["p50"] / 1000, marker="o", label=f"{label} p50")
            right.plot(part["top_k"], part["p95"] / 1000, marker="s", ls="--", label=f"{label} p95")
    depths = sorted(runs["top_k"].astype(int).unique())
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_xticks(depths, [str(d) for d in depths])
        ax.minorticks_off()
        ax.set_xlabel("memories retrieved per question (top-k)")
        ax.legend(fontsize=8)
    left.set_ylabel("accuracy (%)")
    left.set_title("Accuracy against retrieval depth")
    right.set_ylabel("search latency (s)")
    right.set_title("Search latency against depth (where recorded)")
    fig.tight_layout()
    return fig


def plot_judges(verdicts: pd.DataFrame) -> plt.Figure | None:
    """The same answers under each of their judges: a row per set of answers judged more than
    once, a point per judge (colour: its model, marker: its prompt) at the share it accepted,
    with its Wilson 95% interval; ``None`` when no answers have two judges."""
    judges = verdicts.groupby("answers", sort=False)["judge"].nunique()
    shown = [a for a in judges.index if judges[a] > 1]
    if not shown:
        return None
    table = (
        verdicts[verdicts["answers"].isin(shown)]
        .groupby(["answers", "judge"], sort=False)["accepted"]
        .agg(accepted="sum", n="size")
        .reset_index()
    )
    split = table["judge"].str.split("/", n=1, expand=True)
    table["model"], table["prompt"] = split[0], split[1].fillna("")
    # the offline judge is a word-overlap rule: named as such, never as a model
    table["model"] = table["model"].replace(LEXICAL, "offline lexical rule (not an LLM)")
    table["judge"] = table["model"] + "/" + table["prompt"]
    models, prompts = list(dict.fromkeys(table["model"])), list(dict.fromkeys(table["prompt"]))
    colors = dict(zip(models, plt.get_cmap("tab10").colors, strict=False))
    markers = dict(zip(prompts, "osD^vP*X", strict=False))
    rows = max(judges[shown])
    legend_in = 0.2 * max(len(models), len(prompts)) + 0.1  # the legend's inches, at the foot
    height = 0.3 * rows * len(shown) + 1.5 + legend_in
    fig, ax = plt.subplots(figsize=(8.0, height))
    for i, answers in enumerate(shown):
        part = table[table["answers"] == answers].reset_index(drop=True)
        for j, row in part.iterrows():
            low, high = wilson_interval(int(row["accepted"]), int(row["n"]))
            share = row["accepted"] / row["n"]
            y = i + (j - (len(part) - 1) / 2) * 0.8 / max(rows, 2)
            ax.errorbar(
                100 * share,
                y,
                xerr=[[100 * (share - low)], [100 * (high - share)]],
                fmt=markers[row["prompt"]],
                color=colors[row["model"]],
                markersize=6,
                capsize=2,
            )
            left = share > 0.6  # the label on the side with room
            ax.annotate(
                f"{row['judge']}  {100 * share:.1f}%",
                (100 * (low if left else high), y),
                xytext=(-6 if left else 6, 0),
                textcoords="offset points",
                ha="right" if left else "left",
                va="center",
                fontsize=7.5,
                color=colors[row["model"]],
            )
        if i:
            ax.axhline(i - 0.5, color="#ccc", linewidth=0.8)
    ax.grid(False, axis="y")
    ax.set_yticks(range(len(shown)))
    sizes = verdicts.groupby("answers")["question_id"].nunique()
    ax.set_yticklabels([f"{a}\n({sizes[a]:,} answers)" for a in shown], fontsize=8)
    ax.set_xlim(0, 100)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    ax.set_xlabel("answers the judge accepted (%), with Wilson 95% intervals")
    ax.set_title("The same answers, judged by different models and prompts")
    handles = [Patch(color=colors[m], label=f"judge model: {m}") for m in models] + [
        plt.Line2D([], [], linestyle="", marker=markers[p], color="#444", label=f"prompt: {p}")
        for p in prompts
    ]
    fig.legend(handles=handles, loc="lower center", ncol=2, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, legend_in / height, 1, 1))
    return fig
