"""The report's table helpers."""

from __future__ import annotations

from memcost.run.report.markdown import merge_rows


def test_rows_that_differ_in_one_column_become_one():
    rows = [
        ["LoCoMo", "paper", "always", 24],
        ["LoCoMo", "paper", "in_memory", 2],
        ["LoCoMo", "paper", "extended", 2],
        ["LoCoMo", "current", "none", 2],
        ["LoCoMo", "paper", "none", 2],
    ]
    assert merge_rows(rows, column=2) == [
        ["LoCoMo", "paper", "always", 24],
        ["LoCoMo", "paper", "in_memory, extended, none", 2],
        ["LoCoMo", "current", "none", 2],
    ]
    assert rows[1][2] == "in_memory"  # the caller's rows are left as they were
