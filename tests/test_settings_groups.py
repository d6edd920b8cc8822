"""Settings groups: a parameter whose default is a mapping of named settings
(``figure1_grid: dict = {"min_tokens": 10000, ...}``). A preset, ``-p`` or papermill may give a
few of its settings; the rest keep their defaults, and an unknown or mistyped one is one line."""

from __future__ import annotations

import pytest
import yaml

from memcost.params import (
    current_values,
    group_model,
    notebook_parameters,
    parameters_model,
    settings_groups,
    validate_parameters,
)
from memcost.paths import NOTEBOOKS_DIR
from memcost.run import PresetError
from memcost.run.presets import resolve_preset, validate_run
from memcost.run.runner import discover_notebooks

NOTEBOOK_07 = NOTEBOOKS_DIR / "07_costs_today.ipynb"


def test_every_notebook_holds_at_most_twenty_parameters():
    counts = {p.name: len(notebook_parameters(p)) for p in discover_notebooks().values()}
    assert set(counts) >= {
        "05_analyse_costs.ipynb",
        "06_serving_cost_study.ipynb",
        "07_costs_today.ipynb",
    }
    assert max(counts.values()) <= 20, counts


def test_groups_are_the_mappings_that_name_their_settings():
    groups = settings_groups(NOTEBOOK_07)
    assert set(groups) == {"assumptions", "figure1_grid", "gap_grid", "explorer"}
    assert groups["gap_grid"] == {"min_seconds": 60.0, "max_seconds": 604800.0, "points": 33}
    # an open mapping (empty default) is not a group: its keys are the user's
    assert "client" not in settings_groups(NOTEBOOKS_DIR / "02_answer_from_memory.ipynb")


def test_a_partial_group_is_completed_and_checked_setting_by_setting():
    model = parameters_model((NOTEBOOK_07,))
    default = settings_groups(NOTEBOOK_07)["gap_grid"]
    assert validate_parameters(model, {"gap_grid": {"points": 13}}) == {
        "gap_grid": {**default, "points": 13}
    }
    assert validate_parameters(model, {"gap_grid": {"min_seconds": 1}})["gap_grid"][
        "min_seconds"
    ] == pytest.approx(1.0)  # an int for a float
    assert group_model("g", {"x": 0.5}).model_validate({"x": 1}).x == 1.0
    with pytest.raises(
        ValueError,
        match=r"^parameter gap_grid: unknown setting\(s\) \['pts'\]; its "
        r"settings are min_seconds, max_seconds, points$",
    ):
        validate_parameters(model, {"gap_grid": {"pts": 13}})
    with pytest.raises(
        ValueError, match=r"^parameter gap_grid.points='many': expected an integer$"
    ):
        validate_parameters(model, {"gap_grid": {"points": "many"}})
    with pytest.raises(ValueError, match=r"^parameter gap_grid.points=True: expected an integer$"):
        validate_parameters(model, {"gap_grid": {"points": True}})
    with pytest.raises(ValueError, match=r"gap_grid=13: expected a mapping of its settings"):
        validate_parameters(model, {"gap_grid": 13})


def test_a_notebook_reads_every_setting_of_a_group_given_in_part():
    """What papermill alone does: it injects the partial mapping after the parameters cell;
    the notebook's first call (manifest.start_step, through current_values) completes it."""
    namespace = {"explorer": {"questions": 30}, "run_dir": ""}
    recorded = current_values(namespace, NOTEBOOK_07)
    assert namespace["explorer"]["questions"] == 30
    assert namespace["explorer"]["scenario"] == "current"  # the cell's default
    assert recorded["explorer"] == namespace["explorer"]


def test_minus_p_changes_one_setting_and_keeps_the_presets_others():
    preset = resolve_preset(
        "serving_smoke", discover_notebooks(), overrides={"system_settings": {"window": 5}}
    )
    assert preset.parameters["system_settings"] == {
        "window": 5,
        "ingest_interval": 10,
        "mem0_top_k": 10,
        "om_top_k": 1,
        "observer_tokens": 1500,
        "reflector_tokens": 1000,
    }  # the preset's gates, not 30,000


def test_an_unknown_setting_stops_the_run_before_it_starts(tmp_path):
    notebooks = discover_notebooks()
    preset = resolve_preset("paper_cost_model", notebooks, overrides={"explorer": {"questons": 30}})
    with pytest.raises(
        PresetError,
        match=r"^parameter explorer: unknown setting\(s\) "
        r"\['questons'\]; its settings are context_tokens",
    ):
        validate_run(preset, notebooks, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_name_that_is_not_a_parameter_is_one_line_naming_the_nearest():
    with pytest.raises(PresetError) as caught:
        resolve_preset("paper_cost_model", discover_notebooks(), overrides={"explorr": 1})
    assert str(caught.value) == (
        "-p explorr=...: no notebook of preset paper_cost_model declares explorr; did you mean "
        "explorer? (each notebook's parameters cell lists its own)"
    )


def test_a_preset_with_a_name_no_notebook_declares_is_refused_in_one_line(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump({"steps": ["06"], "parameters": {"window": 10}}))
    with pytest.raises(
        PresetError,
        match=r"old.yaml: unknown parameter 'parameters.window'; no notebook in this preset "
        r"declares it",
    ):
        resolve_preset(path, discover_notebooks())
