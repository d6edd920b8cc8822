"""Sustained break-even of a memory system against full history (study §4, Figure 2, Table 8).

``t_BE = min{t : Σ_{i≤u} C_mem(i) < Σ_{i≤u} C_full(i) for all u ≥ t}`` on the cumulative cost
averaged over seeds: the turn from which memory stays cheaper for the rest of the measured
conversation. It is 0 when memory is cheaper from the first turn and *never* (``None``) when it
is not cheaper at the last measured turn — also when it was cheaper for a while and crossed back.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from memcost.stats import stays_below_from

REFERENCE = "full_history"
NEVER = "never"


def sustained_break_even(
    memory_cumulative: Sequence[float], full_cumulative: Sequence[float]
) -> int | None:
    """The first turn (0-based, the study's numbering) from which memory's cumulative cost
    stays below full history's, or ``None`` when it is not below at the last turn: the rule of
    :func:`memcost.stats.stays_below_from`, which the main study's break-even uses too."""
    mem = np.asarray(memory_cumulative, dtype=float)
    if mem.size == 0:
        raise ValueError("two curves of the same non-zero length needed, got empty ones")
    return stays_below_from(mem, full_cumulative)


def label(t_be: int | None) -> str:
    return NEVER if t_be is None else str(t_be)


CURVE_KEYS = ["source", "model", "reasoning_effort", "cell", "n_turns", "mean_tokens", "system"]


def cumulative_curves(turns: pd.DataFrame, value: str = "usd") -> pd.DataFrame:
    """Mean over seeds of each run's cumulative ``value`` per turn (one row per turn)."""
    frame = turns.sort_values("turn").copy()
    frame["cumulative"] = frame.groupby("run")[value].cumsum()
    return frame.groupby([*CURVE_KEYS, "turn"], sort=True)["cumulative"].mean().reset_index()


def break_even_table(curves: pd.DataFrame, reference: str = REFERENCE) -> pd.DataFrame:
    """Per cell, model and memory system: ``t_be`` (the turn, or null) and its ``label``
    (``0``, ``never``, or the turn), and both cumulative costs at the last turn."""
    rows = []
    keys = [k for k in CURVE_KEYS if k != "system"]
    for key, part in curves.groupby(keys, sort=True):
        full = part[part["system"] == reference].set_index("turn")["cumulative"]
        if full.empty:
            continue
        for system, mine in part[part["system"] != reference].groupby("system"):
            mine = mine.set_index("turn")["cumulative"]
            turns = full.index.intersection(mine.index)
            t_be = sustained_break_even(mine.loc[turns].to_numpy(), full.loc[turns].to_numpy())
            rows.append(
                {
                    **dict(zip(keys, key, strict=True)),
                    "system": system,
                    "t_be": t_be,
                    "break_even": label(t_be),
                    "cumulative_memory": float(mine.loc[turns].iloc[-1]),
                    "cumulative_full_history": float(full.loc[turns].iloc[-1]),
                }
            )
    out = pd.DataFrame(rows)
    if not out.empty:
        out["t_be"] = out["t_be"].astype("Int64")
    return out
