"""The report's cost sections: this run's bill, Tables 4-5 (the cost model) and Figure 1."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from memcost.run.report.markdown import figure, md_table, png, usd
from memcost.run.report.view import DATASET_NAMES, PAPER_ORDER, RunView, read_csv


def section_costs(view: RunView) -> list[str]:
    lines = ["## Cost of this run", ""]
    estimate = read_csv(view.run.table.estimate_before_run)
    if estimate is not None and not estimate.empty:
        by_dataset = estimate.groupby("dataset", sort=False)["usd"].sum()
        parts = ", ".join(f"{DATASET_NAMES.get(d, d)} {usd(v)}" for d, v in by_dataset.items())
        lines += [f"**Estimated before the run** (notebook 00's token counts × list prices, "
                  f"assumptions in `memcost/costs/estimate.py`): {usd(float(estimate['usd'].sum()))} "
                  f"({parts}), about {float(estimate['minutes'].sum()) / 60:,.1f} hours of calls "
                  f"at the run's concurrency — `{view.run.table.estimate_before_run.relative_to(view.run.root).as_posix()}`.", ""]
    summary = read_csv(view.run.table.cost_summary)
    if summary is None or summary.empty:
        return lines + ["*No usage ledger was analysed (notebook 05 without model calls).*", ""]
    basis = sorted(set(summary["basis"].astype(str)))
    spent = float(summary.loc[~summary["component"].astype(str).str.endswith(": total"),
                              "spent_usd"].sum())
    lines += [f"Every call in `calls.jsonl`, priced with the dated price table "
              f"(`memcost.prices`); basis: {'; '.join(basis)}. Writing is shown per conversation, "
              f"answering and judging per question. Paid by this run: {usd(spent)}. Details per "
              "stage, user and question: `tables/cost_*.csv`.", ""]
    names = [d for d in PAPER_ORDER if d in set(summary["dataset"])]
    rows = []
    for component in dict.fromkeys(summary["component"].astype(str)):
        row: list[Any] = [component]
        for name in names:
            hit = summary.loc[(summary["dataset"] == name) & (summary["component"] == component)]
            if hit.empty:
                row.append("—")
                continue
            r = hit.iloc[0]
            per, unit = ((r["usd_per_conversation"], "conv.") if component.startswith("write")
                         else (r["usd_per_question"], "q."))
            row.append(f"{usd(r['total_usd'])} ({usd(per)}/{unit})")
        rows.append(row)
    lines += [md_table(rows, ["component", *[DATASET_NAMES.get(n, n) for n in names]]), ""]
    figure(lines, png(view.run.figure.cost_by_component), view.run.root, "cost by component")
    return lines


def rounded_cells(table: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    table = table.copy()
    for column in columns:
        table[column] = table[column].map(lambda v: round(float(v), 4))
    return table


def section_cost_model(view: RunView) -> list[str]:
    lines = ["## Tables 4-5: the cost model", ""]
    table4 = read_csv(view.run.table.table4)
    table5 = read_csv(view.run.table.table5)
    if table4 is None or table5 is None:
        return lines + ["*Notebook 05 has not run in this run.*", ""]
    model = view.cost_parameters.get("cost_model", "paper")
    cells = read_csv(view.run.table.table45_vs_paper)
    matched = "" if cells is None else (
        f" **{int(cells['match'].sum())} of {len(cells)}** published cells reproduced "
        "(rounded to 4 decimals).")
    lines += [f"Cost model constants: **{model}** (study §8: `C_LC(N) = C_first + (N−1)·C_cached`, "
              f"`C_Mem(N) = C_write + N·C_read`, break-even from unrounded costs).{matched}", ""]
    t4 = rounded_cells(table4, ("memory_usd", "long_context_usd"))
    lines += ["**Table 4 — cumulative cost per user at L = 101,601 tokens**", "",
              md_table(t4.values.tolist(), ["N", "memory ($)", "long context GPT-5-mini ($)"]), ""]
    t5 = rounded_cells(table5, ("write_usd", "lc_turn1_usd", "lc_turn_n_usd"))
    lines += ["**Table 5 — break-even by context length**", "",
              md_table(t5.values.tolist(), ["L (tokens)", "write ($)", "LC turn 1 ($)",
                                            "LC turn N>1 ($)", "break-even N"]), ""]
    lines += ["The constants the paper's text states ($0.0435 per write, $0.0013 per read) do "
              "not reproduce these tables; the constants the tables imply do, and rounding the "
              "rows before computing the break-even gives 9 instead of 10 at 100k tokens. "
              "Notebook 05 derives each constant's feasible interval from the published cells.",
              ""]
    return lines


def section_figure1(view: RunView) -> list[str]:
    lines = ["## Figure 1", ""]
    before = len(lines)
    figure(lines, png(view.run.figure.figure1), view.run.root,
            "Figure 1: cumulative cost difference, long context minus memory")
    figure(lines, png(view.run.figure.figure1b), view.run.root,
            "Cumulative cost per user at L = 101,601 tokens")
    if len(lines) == before:
        lines += ["*Notebook 05 has not run in this run.*", ""]
    return lines
