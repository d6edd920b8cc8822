"""The report's section on the memory systems beside the paper's: cost and latency per system."""

from __future__ import annotations

import pandas as pd

from memcost.costs import today
from memcost.paths import RUN_FIGURES, RUN_TABLES
from memcost.plugins import Section, Table
from memcost.run.report.markdown import usd
from memcost.run.report.view import RunView


def _never(value) -> str:
    return "never" if pd.isna(value) else f"{int(value)}"


def short_of_top_k(view: RunView) -> list[str]:
    """A warning per system whose questions got fewer items than they asked for."""
    lines = []
    for ds in view.datasets:
        short = ds.metrics.get("02_answer_from_memory", {}).get("questions_short_of_top_k") or {}
        for system, n in ((s, n) for s, n in short.items() if n):
            lines += [
                f"> ⚠ **{ds.title}, {system}: {n} questions got fewer facts than they asked "
                "for** although the user's memory holds enough (a shared vector index that "
                "filters by user after its scan; README, \"The paper's store at the paper's "
                'scale").',
                "",
            ]
    return lines


MEMORY_SYSTEMS = Section(
    "memory_systems",
    "Memory systems side by side",
    tables=(
        Table(
            f"tables/{RUN_TABLES['cost_per_memory_system']}.csv",
            {
                "dataset": "dataset",
                "memory_system": "memory system",
                "prices": "prices",
                "write_usd": "write / user",
                "read_usd": "read / question",
                "break_even_vs_long_context_gpt-5-mini": "break-even N",
            },
            caption="Measured on this run's ledger (an estimate for offline records, which have "
            "no provider cache: a user's later long-context questions, and what a memory shows "
            "each question of a user first, are priced as a prompt cache serves them): write "
            "per user, read per question, and the break-even against long context in questions "
            "per user, at the paper's prices (GPT-5-mini) and with the same tokens at today's "
            f"rows of the successors ({today.CURRENT.lc_model}, "
            f"{today.CURRENT.extraction_model}).",
            formats={
                "write_usd": usd,
                "read_usd": usd,
                "break_even_vs_long_context_gpt-5-mini": _never,
            },
            min_rows=2,  # the paper's memory alone is in the cost tables already
        ),
    ),
    figures=(
        (
            f"figures/{RUN_FIGURES['latency']}.png",
            "Latency per question (p50, p95) with Mem0's published p95",
        ),
    ),
    lines=short_of_top_k,
    after="accuracy",
)
