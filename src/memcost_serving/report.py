"""The report's section on the serving-cost study (notebook 06), and its line in the brief."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

import memcost_serving.study as study
from memcost.answers import in_words
from memcost.run.report.markdown import figure, md_table
from memcost.run.report.view import RunView, read_csv


def _study_model(models: list[Any]) -> str | None:
    """The model the study's reference numbers are for (gpt-oss-20b) when the run has it, so
    that a row is set beside the study's own; else the run's first."""
    names = [str(m) for m in models if m]
    wanted = study.BREAK_EVEN_SETTING["model"]
    return next((m for m in names if m.split("/")[-1] == wanted), names[0] if names else None)


def _priced_as(model: str, backend: str | None) -> str:
    # Offline, no model answered: the rows are the stand-ins' tokens at this model's prices.
    return f"offline stand-ins priced as {model}" if backend == "offline" else model


# Table 1's quantities in words (memcost_serving.analysis.exponents_table computes them)
QUANTITY_WORDS = {
    "p": "p",
    "q": "q",
    "r2": "R² of the fit",
    "r2_total": "R² on total tokens alone",
    "loocv_mape": "leave-one-cell-out error, %",
}


def serving_brief(view: RunView) -> str | None:
    """One line: the fitted exponents of full history and the sustained break-evens."""
    metrics = view.run_metrics("06_serving_cost_study")
    if not metrics:
        return None
    model = _study_model([r.get("model") for r in metrics.get("table1") or []])
    fits = [
        r
        for r in metrics.get("table1") or []
        if r.get("model") == model and r.get("source", "synthetic") == "synthetic"
    ]
    parts = [
        f"{in_words(r['system'])} p = {r['p']:.2f}, q = {r['q']:.2f} (R² {r['r2']:.2f})"
        for r in fits
        if r["system"] in ("full_history", "rolling_window")
    ]
    rows = [r for r in metrics.get("break_even") or [] if r.get("model") == model]
    longest = max((r["n_turns"] * r["mean_tokens"], r["cell"]) for r in rows)[1] if rows else None
    breaks = [f"{in_words(r['system'])} {r['break_even']}" for r in rows if r["cell"] == longest]
    offline = (
        (
            " (offline stand-ins: token arithmetic for the baselines, classical methods for "
            "the memory systems)"
        )
        if metrics.get("backend") == "offline"
        else ""
    )
    text = (
        f"**The serving study, this run**{offline}: fitted cost model "
        f"log(C+1) = a + p·log(L+1) + q·log(t+1) per turn, {'; '.join(parts)}; sustained "
        f"break-even against full history at {longest}: {', '.join(breaks)} (turns; "
        "0 = cheaper from the start)."
    )
    return text


def section_serving(view: RunView) -> list[str]:
    """Table 1 against the study's published ranges, the break-even, Figure 2."""
    metrics = view.run_metrics("06_serving_cost_study")
    if metrics is None:
        return []
    folder = view.run.root / "serving"
    backend = metrics.get("backend")
    lines = [
        "## The serving-cost study (notebook 06)",
        "",
        "The paper's authors' follow-up, *Total Recall at What Cost?* (2026), serves memory turn "
        "by turn; its tables and figures are numbered as that study numbers them.",
        "",
    ]
    versus = read_csv(folder / "tables" / "table1_vs_study.csv")
    if versus is not None and not versus.empty:
        model = _study_model(list(versus["model"].unique()))
        mine = versus.loc[
            (versus["model"] == model)
            & versus["published"].notna()
            & (versus["published"].astype(str) != "")
        ]
        rows = [
            [
                in_words(r.system),
                QUANTITY_WORDS.get(r.quantity, r.quantity),
                f"{r.measured:.3f}",
                r.published,
                "yes" if bool(getattr(r, "inside", False)) else "no",
            ]
            for r in mine.itertuples(index=False)
        ]
        lines += [
            "**Total Recall's Table 1 against its published ranges** "
            f"({_priced_as(model, backend)}; how to read: p and q are the cost's elasticities "
            "in the turn's length and in the turn number)",
            "",
            md_table(rows, ["system", "quantity", "this run", "study", "inside"]),
            "",
        ]
    breaks = pd.DataFrame(metrics.get("break_even") or [])
    if not breaks.empty:
        model = _study_model(list(breaks["model"].unique()))
        mine = breaks.loc[breaks["model"] == model]
        pivot = mine.pivot_table(
            index="cell", columns="system", values="break_even", aggfunc="first"
        )
        # cells in the grid's order (turns, then tokens a turn), not as strings sort
        cells = mine.drop_duplicates("cell").sort_values(["n_turns", "mean_tokens"])["cell"]
        pivot = pivot.reindex(list(cells))
        setting = study.BREAK_EVEN_SETTING
        lines += [
            f"**Sustained break-even against full history** ({_priced_as(model, backend)}; "
            "turns, `never` when memory is not cheaper at the last turn, — where the system "
            f"did not run in that cell; the study at {setting['cell']}, {setting['model']} "
            f"{setting['reasoning_effort']}: "
            + ", ".join(f"{s} {t}" for s, t in study.BREAK_EVEN_400_200.items())
            + ")",
            "",
            md_table(
                [[cell, *row] for cell, row in pivot.astype(object).iterrows()],
                ["cell", *(in_words(system) for system in pivot.columns)],
            ),
            "",
        ]
    figure(
        lines,
        Path(folder / "figures" / "figure2_cumulative_cost.png"),
        view.run.root,
        "Total Recall's Figure 2: cumulative cost per turn, memory systems against full history",
    )
    return lines
