"""Sustained break-even on hand-made cumulative curves (the rule of memcost.costs.break_even)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from memcost.costs.break_even import stays_below_from as sustained_break_even
from memcost_serving.analysis import break_even_by_cell, cumulative_curves


def test_cheaper_from_the_start_is_zero():
    assert sustained_break_even([1, 2, 3], [2, 4, 6]) == 0


def test_never_cheaper_is_never():
    assert sustained_break_even([5, 10, 15], [1, 2, 3]) is None
    assert sustained_break_even([1, 2, 3], [1, 2, 3]) is None  # equal is not cheaper


def test_a_crossing_that_crosses_back_is_never():
    memory = [5, 6, 7, 8, 20]
    full = [1, 4, 9, 16, 18]  # memory cheaper at turns 2-3, dearer again at turn 4
    assert sustained_break_even(memory, full) is None


def test_crossing_back_and_forth_counts_from_the_last_crossing():
    memory = [5, 6, 7, 30, 31, 32, 33]
    full = [1, 4, 9, 16, 35, 50, 70]  # cheaper at 2, dearer at 3, cheaper from 4 on
    assert sustained_break_even(memory, full) == 4


def test_curves_must_match():
    with pytest.raises(ValueError, match="series lengths differ"):
        sustained_break_even([1, 2], [1, 2, 3])
    assert sustained_break_even([], []) is None


def test_both_studies_share_one_sustained_rule():
    """The serving study's turn 0 is the main study's question 1: one rule, two numberings."""
    from memcost.costs import sustained_break_even as per_question

    per_turn_memory, per_turn_full = [5, 1, 1, 1, 1], [2, 2, 2, 2, 2]  # cheaper at the 5th
    cumulative = (np.cumsum(per_turn_memory), np.cumsum(per_turn_full))
    assert sustained_break_even(*cumulative) == 4
    assert per_question(per_turn_memory, per_turn_full) == 5


def test_table_averages_seeds_before_deciding():
    rows = []
    for system, seed, per_turn in [
        ("full_history", 0, [1, 2, 3, 4]),
        ("full_history", 1, [1, 2, 3, 4]),
        ("mem0", 0, [3, 0.5, 0.5, 0.5]),
        ("mem0", 1, [3, 3, 0.5, 0.5]),
    ]:
        for t, usd in enumerate(per_turn):
            rows.append(
                {
                    "source": "synthetic",
                    "model": "m",
                    "reasoning_effort": "low",
                    "cell": "4×10",
                    "n_turns": 4,
                    "mean_tokens": 10,
                    "system": system,
                    "run": f"{system}-{seed}",
                    "turn": t,
                    "usd": usd,
                }
            )
    curves = cumulative_curves(pd.DataFrame(rows))
    mem = curves[curves["system"] == "mem0"]["cumulative"].to_numpy()
    assert np.allclose(mem, [3, 4.75, 5.25, 5.75])
    table = break_even_by_cell(curves)
    # full history: 1, 3, 6, 10; the mean memory curve is below it from turn 2 on (seed 1 on
    # its own would only be from turn 3)
    assert table[["system", "break_even"]].values.tolist() == [["mem0", "2"]]
    assert table["t_be"].iloc[0] == 2
