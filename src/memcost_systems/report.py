"""The report's section on the memory systems beside the paper's: cost and latency per system."""

from __future__ import annotations

import pandas as pd

from memcost.costs import today
from memcost.run.report.markdown import figure, md_table, png, usd
from memcost.run.report.view import DATASET_NAMES, RunView, read_csv


def _never(value) -> str:
    return "never" if pd.isna(value) else f"{int(value)}"


def section_memory_systems(view: RunView) -> list[str]:
    """Each memory system's write and read cost and break-even against the paper's long
    context (notebook 05, 6.7), and the latency figure (6.8); nothing when only the paper's
    memory ran and no answers were timed."""
    per_system = read_csv(view.run.table.cost_per_memory_system)
    latency = read_csv(view.run.table.latency)
    short = [
        (ds.title, system, n)
        for ds in view.datasets
        for system, n in (
            ds.metrics.get("02_answer_from_memory", {}).get("questions_short_of_top_k") or {}
        ).items()
        if n
    ]
    if (per_system is None or len(per_system) < 2) and latency is None and not short:
        return []
    lines = ["## Memory systems side by side", ""]
    for title, system, n in short:
        lines += [
            f"> ⚠ **{title}, {system}: {n} questions got fewer facts than they asked "
            "for** although the user's memory holds enough (a shared vector index that "
            "filters by user after its scan; README, \"The paper's store at the paper's "
            'scale").',
            "",
        ]
    if per_system is not None and len(per_system) >= 2:
        lc = "break_even_vs_long_context_gpt-5-mini"
        rows = [
            [
                DATASET_NAMES.get(r["dataset"], r["dataset"]),
                view.label(r["memory_system"]),
                r.get("prices", ""),
                usd(r["write_usd"]),
                usd(r["read_usd"]),
                _never(r[lc]) if lc in per_system else "—",
            ]
            for r in per_system.to_dict("records")
        ]
        lines += [
            "Measured on this run's ledger (an estimate for offline records, which have no "
            "provider cache: a user's later long-context questions, and what a memory shows "
            "each question of a user first, are priced as a prompt cache serves them): write per "
            "user, read per question, and the break-even against long context in "
            "questions per user, at the paper's prices (GPT-5-mini) and with the same "
            "tokens at today's rows of the successors "
            f"({today.CURRENT.lc_model}, {today.CURRENT.extraction_model}).",
            "",
            md_table(
                rows,
                [
                    "dataset",
                    "memory system",
                    "prices",
                    "write / user",
                    "read / question",
                    "break-even N",
                ],
            ),
            "",
        ]
    if latency is not None:
        figure(
            lines,
            png(view.run.figure.latency),
            view.run.root,
            "Latency per question (p50, p95) with Mem0's published p95",
        )
    return lines
