""" "Run All" in a fresh kernel with the notebooks' defaults gives the runner's Table 3.

A workshop opens the notebooks and runs 00 to 05 and 07 with whatever their parameters cells
say; the batch user runs ``make reproduce`` (the smoke preset) on one dataset. Their Table 3
must agree row for row, so the notebooks' defaults are the smoke preset's values (the preset
also builds the other memory systems on LoCoMo: rows of their own).
"""

from __future__ import annotations

import pandas as pd
import pytest

from memcost.paths import RunPaths
from memcost.run import run_preset
from memcost.run.presets import default_steps
from memcost.run.runner import discover_notebooks, execute_notebook


@pytest.mark.slow
def test_notebook_defaults_reproduce_the_runners_table3(tmp_path):
    batch = run_preset("smoke", run_name=str(tmp_path / "batch"), datasets=["locomo"])
    by_hand = RunPaths(tmp_path / "by_hand").ensure()
    notebooks = discover_notebooks()
    # the smoke preset's steps: 06 and 08 run only where a preset names them
    for step in default_steps(notebooks):
        notebook = notebooks[step]
        # only where to write: every other value is the notebook's own default
        execute_notebook(
            notebook,
            by_hand.root / "executed" / notebook.name,
            {"run_dir": str(by_hand.root)},
        )
    ours = pd.read_csv(by_hand.dataset("locomo").table.table3)
    theirs = pd.read_csv(batch.dataset("locomo").table.table3)
    assert len(theirs) >= 5  # memory, two long-context models and the three baselines
    assert set(theirs["system"]) >= {"no_context_gpt-5-mini", "oracle_gpt-5-mini"}
    # the preset adds the other memory systems on LoCoMo; the notebooks' default is the paper's
    assert set(theirs["system"]) - set(ours["system"]) == {
        "memory_rag",
        "memory_graph",
        "memory_hierarchical",
        "memory_observational",
    }
    theirs = theirs.loc[theirs["system"].isin(ours["system"])].reset_index(drop=True)
    pd.testing.assert_frame_equal(ours, theirs)
    for table in ("table5_break_even", "table5_today", "break_even_headline"):
        pd.testing.assert_frame_equal(
            pd.read_csv(by_hand.tables / f"{table}.csv"), pd.read_csv(batch.tables / f"{table}.csv")
        )
