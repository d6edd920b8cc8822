"""Notebook 05 on a run with no ledger at all, as the paper_cost_model preset runs it: the measured
sections are skipped with a note, and the paper's tables still come out whole."""

from __future__ import annotations

import pandas as pd
import pytest

from memcost.io import read_json
from memcost.run import run_preset

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def test_paper_preset_without_a_ledger(tmp_path):
    run = run_preset(
        "paper_cost_model",
        run_name=str(tmp_path / "paper"),
        stream=False,
        overrides={"repo_figures_dir": ""},
    )
    metrics = read_json(run.root / "metrics" / "05_analyse_costs.json")["metrics"]
    assert metrics["ledger_records"] == 0
    assert metrics["paper_cells_matched"] == metrics["paper_cells"] == 26
    assert metrics["loop_break_even"] == 10
    assert pd.read_csv(run.table.table5)["break_even_n"].tolist() == [13, 10, 9, 9]
    assert not run.table.cost_summary.exists()  # nothing measured without calls
    assert (run.figures / f"{run.figure.figure1.name}.png").is_file()
