"""Every shipped preset passes the checks a run makes before it creates anything."""

from __future__ import annotations

import pytest

from memcost.paths import PARAMS_DIR
from memcost.run import discover_notebooks, load_preset
from memcost.run.presets import validate_run

PRESETS = sorted(p.stem for p in PARAMS_DIR.glob("*.yaml"))


def test_the_presets_are_the_documented_ones():
    assert {"smoke", "paper_locomo", "current_locomo", "serving_smoke"} <= set(PRESETS)


@pytest.mark.parametrize("name", PRESETS)
def test_a_shipped_preset_validates_without_creating_its_run(name, tmp_path):
    """A preset's models are priced (by the table, the preset's or the notebook's own
    ``price_overrides``) and its parameters are valid, so ``make reproduce PRESET=<name>`` gets
    past validation (serving_smoke once failed here: notebook 06 prices its models itself)."""
    run_dir = tmp_path / "run"
    validate_run(load_preset(name), discover_notebooks(), run_dir)
    assert not run_dir.exists()
