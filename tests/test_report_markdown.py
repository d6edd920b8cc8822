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


def test_the_dates_are_called_invented_only_for_datasets_that_ran_on_a_bundled_sample(smoke_run):
    import dataclasses

    from memcost.run.report.costs import _invented_dates
    from memcost.run.report.view import RunView

    view = RunView.load(smoke_run)
    both = {"locomo", "longmemeval"}
    assert _invented_dates(view, both) == (
        " (invented dates on the bundled samples of LongMemEval, LoCoMo)"  # the run's order
    )
    # the same run had LoCoMo come from the real file: only LongMemEval's dates are invented
    view.datasets = [
        dataclasses.replace(d, provenance={**d.provenance, "origin": "local"})
        if d.name == "locomo"
        else d
        for d in view.datasets
    ]
    assert _invented_dates(view, both) == " (invented dates on the bundled samples of LongMemEval)"
    assert _invented_dates(view, {"locomo"}) == ""


def test_the_bill_names_the_stages_the_estimate_missed_each_way():
    # the explanation once read as if the estimate were always the higher
    import pandas as pd

    from memcost.run.report.headline import _stage_differences

    estimate = pd.DataFrame(
        {"ledger_stage": ["judge", "judge", "extract", "read"], "usd": [4.0, 2.58, 0.0034, 0.1]}
    )
    ledger = pd.DataFrame(
        {"stage": ["judge", "extract", "read", "embed"], "cost_usd": [0.517, 0.0107, 0.1, 0.0001]}
    )
    lower, higher = _stage_differences(estimate, ledger)
    assert lower == ["judge $6.58 estimated, $0.5170 in the ledger"]
    assert higher == ["extract $0.0034 estimated, $0.0107 in the ledger"]  # read, embed: equal
