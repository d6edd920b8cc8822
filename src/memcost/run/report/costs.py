"""The report's cost sections: this run's bill, Tables 4-5, Figure 1, and the break-even today."""

from __future__ import annotations

from typing import Any

import pandas as pd

from memcost import paper
from memcost.costs import today
from memcost.costs.estimate import bill, call_time, chosen_total
from memcost.costs.measured import component_label
from memcost.paths import RUN_TABLES
from memcost.plugins import Section, Table
from memcost.run.report.markdown import figure, md_table, merge_rows, png, usd
from memcost.run.report.view import DATASET_NAMES, PAPER_ORDER, RunView, read_csv


def section_costs(view: RunView) -> list[str]:
    lines = ["## Cost of this run", ""]
    estimate = read_csv(view.run.table.estimate_before_run)
    if estimate is not None and not estimate.empty:
        column = "usd" if chosen_total(estimate) is None else "usd_execution"
        by_dataset = estimate.groupby("dataset", sort=False)[column].sum()
        parts = ", ".join(f"{DATASET_NAMES.get(d, d)} {usd(v)}" for d, v in by_dataset.items())
        table = view.run.table.estimate_before_run.relative_to(view.run.root).as_posix()
        lines += [
            f"**Estimated before the run** (notebook 00's token counts × list prices, "
            f"assumptions in `memcost/costs/estimate.py`): "
            f"{usd(bill(estimate))} ({parts}), {call_time(estimate)} of calls at the rate "
            "limits in force "
            "and the run's max_concurrency"
            + (", plus batches" if (estimate["execution"] == "batch").any() else "")
            + f" — `{table}`.",
            "",
        ]
    summary = read_csv(view.run.table.cost_summary)
    if summary is None or summary.empty:
        why = (
            "notebook 05 did not run"
            if view.run_metrics("05_analyse_costs") is None
            else "the run made no model calls"
        )
        return lines + [f"*No usage ledger was analysed ({why}).*", ""]
    basis = sorted(set(summary["basis"].astype(str)))
    spent = float(
        summary.loc[~summary["component"].astype(str).str.endswith(": total"), "spent_usd"].sum()
    )
    lines += [
        f"Every call in `calls.sqlite`, priced with the dated price table "
        f"(`memcost.catalog`); basis: {'; '.join(basis)}. Writing is shown per conversation, "
        f"answering and judging per question. Paid by this run: {usd(spent)}. Details per "
        "stage, user and question: `tables/cost_*.csv`.",
        "",
    ]
    names = [d for d in PAPER_ORDER if d in set(summary["dataset"])]
    rows = []
    for component in dict.fromkeys(summary["component"].astype(str)):
        row: list[Any] = [component_label(component, offline=view.offline)]
        for name in names:
            hit = summary.loc[(summary["dataset"] == name) & (summary["component"] == component)]
            if hit.empty:
                row.append("—")
                continue
            r = hit.iloc[0]
            per, unit = (
                (r["usd_per_conversation"], "conv.")
                if component.startswith("write")
                else (r["usd_per_question"], "q.")
            )
            row.append(f"{usd(r['total_usd'])} ({usd(per)}/{unit})")
        rows.append(row)
    lines += [md_table(rows, ["component", *[DATASET_NAMES.get(n, n) for n in names]]), ""]
    figure(lines, png(view.run.figure.cost_by_component), view.run.root, "cost by component")
    return lines


def _constants_sentence(view: RunView) -> str:
    model = view.cost_parameters.get("cost_model", "paper")
    cells = read_csv(view.run.table.table45_vs_paper)
    matched = (
        ""
        if cells is None
        else (
            f" **{int(cells['match'].sum())} of {len(cells)}** published cells reproduced "
            "(rounded to 4 decimals)."
        )
    )
    return (
        f"Cost model constants: **{model}** (paper §3.5: `C_LC(N) = C_first + (N−1)·C_cached`, "
        f"`C_Mem(N) = C_write + N·C_read`, break-even from unrounded costs).{matched}"
    )


def _printed(value: Any) -> str:
    """Four decimals, trailing zeros kept ($0.0700), as the paper prints."""
    return f"${float(value):.4f}"


def _calibration(view: RunView) -> list[str]:
    """What notebook 05 found of the paper's constants (cells reproduced, what rounding first does
    to the break-even), read from the run's files."""
    variants = read_csv(view.run.table.calibration_variants)
    found = []
    if variants is not None:
        by_kind = {str(r["constants"]).split(" (")[0]: r for r in variants.to_dict("records")}
        stated, implied = by_kind.get("stated in the text"), by_kind.get("implied by the tables")
        if stated is not None and implied is not None:
            found.append(
                "the constants the paper's text states "
                f"(${paper.MEASURED['extraction_usd_per_conversation']} per write, "
                f"${paper.MEASURED['read_usd_per_question']} per read) reproduce "
                f"{stated['cells_matched']} of {stated['cells']} published cells, the "
                f"constants the tables imply {implied['cells_matched']} of {implied['cells']}"
            )
    rounded = (view.run_metrics("05_analyse_costs") or {}).get("break_even_from_rounded_rows")
    contexts = view.cost_parameters.get("table5_context_tokens")
    if rounded and contexts and len(rounded) == len(contexts):
        table5 = paper.TABLE5.set_index("context_tokens")["break_even_n"]
        published = {int(L): int(n) for L, n in table5.items()}
        moved = [
            f"{n} instead of {published[L]} at {L:,} tokens"
            for L, n in zip(contexts, rounded, strict=True)
            if L in published and n != published[L]
        ]
        found.append(
            "rounding the rows to four decimals before computing the break-even gives "
            + ("; ".join(moved) if moved else "the published break-evens")
        )
    if not found:
        return []
    text = "; ".join(found)
    return [
        f"{text[0].upper()}{text[1:]}. Notebook 05 derives each constant's feasible interval "
        "from the published cells.",
        "",
    ]


COST_MODEL = Section(
    "cost_model",
    "Tables 4-5: the cost model",
    text=_constants_sentence,
    tables=(
        Table(
            f"tables/{RUN_TABLES['table4']}.csv",
            {"n_turns": "N", "memory_usd": "memory", "long_context_usd": "long context GPT-5-mini"},
            title="Table 4 — cumulative cost per user at L = 101,601 tokens",
            formats={"memory_usd": _printed, "long_context_usd": _printed},
        ),
        Table(
            f"tables/{RUN_TABLES['table5']}.csv",
            {
                "context_tokens": "L (tokens)",
                "write_usd": "write",
                "lc_turn1_usd": "LC turn 1",
                "lc_turn_n_usd": "LC turn N>1",
                "break_even_n": "break-even N",
            },
            title="Table 5 — break-even by context length",
            formats={c: _printed for c in ("write_usd", "lc_turn1_usd", "lc_turn_n_usd")},
        ),  # fmt: skip
    ),
    lines=_calibration,
)


def section_figure1(view: RunView) -> list[str]:
    lines = ["## Figure 1", ""]
    before = len(lines)
    figure(
        lines,
        png(view.run.figure.figure1),
        view.run.root,
        "Figure 1: cumulative cost difference, long context minus memory",
    )
    figure(
        lines,
        png(view.run.figure.figure1b),
        view.run.root,
        "Cumulative cost per user at L = 101,601 tokens",
    )
    if len(lines) == before:
        return section_today(view)  # no Figure 1: notebook 05 did not run
    return lines + section_today(view)


def _n(value: Any) -> str:
    return "never" if pd.isna(value) else f"{int(value)}"


def _headline_value(row: Any) -> str:
    note = getattr(row, "note", "")
    return "not sold" if isinstance(note, str) and note.strip() else _n(row.break_even_n)


def section_today(view: RunView) -> list[str]:
    """Is memory worth it today? The computed break-evens side by side, today's Table 5, and the
    break-even by gap, dataset time, tier and Batch write."""
    headline = read_csv(view.run.table.break_even_headline)
    if headline is None:
        return []
    lines = [
        "## Is memory worth it today?",
        "",
        "Dated price rows (`tables/price_schedules.csv`, each with its source and date), the "
        f"successor models ({today.CURRENT.lc_model} for {today.PAPER.lc_model}, "
        f"{today.CURRENT.extraction_model} for {today.PAPER.extraction_model}), and a "
        "cost model in which a prompt cache expires between a user's questions. Every "
        f"number below is computed by notebook 07; none is typed in. Since the paper, "
        f"{today.what_moved()}.",
        "",
    ]
    rows = [
        [
            r.case,
            r.lc_model,
            r.price_date,
            r.policy.replace("_", "-"),
            f"{int(r.context_tokens):,}",
            _headline_value(r),
        ]
        for r in headline.itertuples()
    ]
    lines += [
        md_table(
            rows, ["case", "long context", "prices of", "cache retention", "L", "break-even N"]
        ),
        "",
        READ_N,
        "",
    ]
    table5 = read_csv(view.run.table.table5_today)
    if table5 is not None:
        pivot = table5.pivot(index="context_tokens", columns="scenario", values="break_even_n")
        pivot = pivot[list(dict.fromkeys(table5["scenario"]))]
        dates = dict(zip(table5["scenario"], table5["price_date"], strict=False))
        lines += [
            "**Table 5 at the paper's prices and today's** (break-even N, back to back: "
            "the history is cached from a user's second question on, as the paper "
            "assumes)",
            "",
            md_table(
                [[f"{int(L):,}", *[_n(v) for v in row]] for L, row in pivot.iterrows()],
                ["L (tokens)", *[f"{c} ({dates[c]})" for c in pivot.columns]],
            ),
            "",
        ]
    for name, caption in (
        ("figure1_today", f"Figure 1 at today's prices ({today.CURRENT.lc_model})"),
        ("break_even_by_context_today", "Break-even by context length"),
        ("break_even_by_gap", "Break-even against the gap between questions"),
    ):
        figure(lines, png(getattr(view.run.figure, name)), view.run.root, caption)
    return lines + _today_details(view)


def _today_details(view: RunView) -> list[str]:
    return _by_dataset_time(view) + _long_context_tier(view) + _batch_write(view)


def _by_dataset_time(view: RunView) -> list[str]:
    lines: list[str] = []
    by_dataset = read_csv(view.run.table.break_even_by_dataset_time)
    if by_dataset is not None and not by_dataset.empty:
        rows = [
            [
                DATASET_NAMES.get(r.dataset, r.dataset),
                r.scenario,
                str(r.policy).replace("_", "-"),  # OpenAI's word: in-memory retention
                r.users,
                f"{r.median_gap_hours:,.1f}",
                f"{int(r.context_tokens):,}",
                "never" if pd.isna(r.break_even_median) else f"{r.break_even_median:g}",
            ]
            for r in by_dataset.itertuples()
        ]
        rows = merge_rows(rows, column=2)  # retentions with the same break-even: one row
        lines += [
            "**Break-even under each dataset's own dates** (one question per dated "
            "session; median over users)",
            "",
            md_table(
                rows,
                [
                    "dataset",
                    "prices",
                    "retention",
                    "users",
                    "median gap (h, this run's data)",
                    "L (the paper's mean)",
                    "break-even N",
                ],
            ),
            "",
            "How to read it: the gaps between questions are those of this run's data"
            + _invented_dates(view, set(by_dataset["dataset"]))
            + ", the history length is the paper's Table 1 mean for the dataset; a gap longer "
            "than the cache's retention makes every long-context question pay its history in "
            "full again.",
            "",
        ]
    return lines


def _invented_dates(view: RunView, datasets: set[str]) -> str:
    """`` (invented dates on the bundled samples of …)`` where a dataset ran on its sample."""
    samples = [ds.title for ds in view.datasets if ds.name in datasets and ds.origin == "sample"]
    return f" (invented dates on the bundled samples of {', '.join(samples)})" if samples else ""


def _long_context_tier(view: RunView) -> list[str]:
    lines: list[str] = []
    tier = read_csv(view.run.table.break_even_long_context_tier)
    if tier is not None and not tier.empty:
        rows = [
            [
                r.scenario,
                f"{int(r.context_tokens):,}",
                "yes" if r.above_tier else "no",
                usd(r.lc_turn1_usd),
                _n(r.break_even_n),
                _n(r.break_even_n_no_tier),
            ]
            for r in tier.itertuples()
        ]
        row = today.CURRENT.price(today.CURRENT.lc_model)
        terms = (
            f"above {row.long_context_threshold:,} prompt tokens the whole request costs "
            f"{row.long_context_input_multiplier:g}× input and cache, "
            f"{row.long_context_output_multiplier:g}× output on {row.model}'s row"
            if row.long_context_threshold
            else f"{row.model}'s row has no tier"
        )
        lines += [
            f"**The long-context tier** ({terms})",
            "",
            md_table(
                rows, ["prices", "L", "above tier", "LC turn 1", "break-even N", "without the tier"]
            ),
            "",
            "How to read it: *LC turn 1* is long context's first question with the whole "
            "history uncached; *without the tier* is the break-even were the request billed "
            "at the base rates: where the two break-evens differ, the tier moved it.",
            "",
        ]
    return lines


def _batch_write(view: RunView) -> list[str]:
    lines: list[str] = []
    batch = read_csv(view.run.table.break_even_batch_write)
    if batch is not None and not batch.empty:
        pivot = batch.pivot_table(
            index=["scenario", "variant"],
            columns="context_tokens",
            values="break_even_n",
            sort=False,
        )
        rows = [[s, v, *[_n(x) for x in row]] for (s, v), row in pivot.iterrows()]
        lines += [
            "**Batch write** (extraction and embeddings on the Batch API; answering "
            "stays interactive)",
            "",
            md_table(rows, ["prices", "variant", *[f"L = {int(c):,}" for c in pivot.columns]]),
            "",
            "How to read it: at half price for writing, memory's first question "
            "(the whole history extracted once, plus one read) can cost less than long "
            "context's first (the whole history read uncached), so N = 1 appears even at "
            "the paper's prices.",
            "",
        ]
    return lines


# One line under the break-even table: what its values mean.
READ_N = (
    "How to read it: N is the first question after which memory is cheaper for one user "
    "and stays so. N = 1 means memory's first question (writing the whole history once, "
    "plus one read) already costs less than long context's first (the whole history, "
    'uncached, plus its cache write where the model bills one). "never" means long context '
    'stays cheaper within the questions computed; "not sold" is a retention the model does '
    "not offer."
)
