"""The paper's settings agree everywhere they are written down.

They are written down once, in :data:`memcost.catalog.PAPER_SETTINGS`, which the report's check
of whether a run used the paper's settings reads; each notebook's parameters cell and the paper
presets in ``papermill_params/`` (and the smoke preset, which keeps the paper's memory and judge
settings) must agree with it. Change one and this test names the others.
"""

from __future__ import annotations

import pytest

from memcost.paper import PAPER_SETTINGS
from memcost.params import notebook_defaults
from memcost.paths import NOTEBOOKS_DIR, PARAMS_DIR
from memcost.run.presets import read_preset
from memcost.run.report.view import same_setting

PAPER_PRESETS = sorted(PARAMS_DIR.glob("paper_*.yaml"))
# The paper presets that run the datasets through notebooks 00-05 (paper_cost_model runs 05 only).
PAPER_DATASET_PRESETS = [p for p in PAPER_PRESETS if read_preset(p).get("datasets")]
SETTINGS = [
    (notebook, name, value)
    for notebook, values in PAPER_SETTINGS.items()
    for name, value in values.items()
]


def _preset_values(path) -> list[tuple[str, dict]]:
    """The parameter blocks of a preset (with those of the preset it includes): its
    ``parameters`` and each ``per_dataset`` block."""
    raw = read_preset(path)
    blocks = [("parameters", raw.get("parameters") or {})]
    blocks += [(f"per_dataset.{k}", v or {}) for k, v in (raw.get("per_dataset") or {}).items()]
    return blocks


def test_the_settings_name_real_notebook_parameters():
    for notebook, values in PAPER_SETTINGS.items():
        path = NOTEBOOKS_DIR / f"{notebook}.ipynb"
        assert path.is_file(), notebook
        assert set(values) <= set(notebook_defaults(path)), notebook


@pytest.mark.parametrize(("notebook", "name", "value"), SETTINGS)
def test_notebook_defaults_are_the_papers(notebook, name, value):
    defaults = notebook_defaults(NOTEBOOKS_DIR / f"{notebook}.ipynb")
    assert defaults[name] == value, f"{notebook}: {name} = {defaults[name]!r}, paper {value!r}"


def test_there_are_paper_presets():
    assert {p.stem for p in PAPER_DATASET_PRESETS} >= {
        "paper_locomo", "paper_longmemeval", "paper_personamem",
    }  # fmt: skip


@pytest.mark.parametrize(
    "preset", [*PAPER_PRESETS, PARAMS_DIR / "smoke.yaml"], ids=lambda p: p.stem
)
def test_presets_that_set_a_paper_setting_set_the_papers(preset):
    wrong = []
    for where, values in _preset_values(preset):
        for _, name, value in SETTINGS:
            if name in values and values[name] != value:
                wrong.append(f"{where}.{name} = {values[name]!r}, paper {value!r}")
    assert not wrong, f"{preset.name}: " + "; ".join(wrong)


@pytest.mark.parametrize("preset", PAPER_DATASET_PRESETS, ids=lambda p: p.stem)
def test_paper_presets_name_the_papers_models_and_efforts(preset):
    values = dict(_preset_values(preset)[0][1])
    for name in ("extraction_model", "extraction_reasoning_effort", "reader_model",
                 "reader_reasoning_effort", "judge_model", "reasoning_effort", "n_votes", "top_k",
                 "models"):  # fmt: skip
        assert name in values, f"{preset.name} leaves {name} to the notebook's default"


def test_the_report_checks_the_papers_settings_by_model_not_snapshot():
    assert same_setting("gpt-5-mini-2025-08-07", "gpt-5-mini-2025-08-07")
    assert same_setting("gpt-5-mini", "gpt-5-mini-2025-08-07")  # another snapshot, same model
    assert not same_setting("gpt-6-luna", "gpt-5-mini-2025-08-07")
    assert same_setting(["openai/gpt-oss-120b", "gpt-5-mini"], ["gpt-oss-120b", "gpt-5-mini"])
    assert not same_setting(["gpt-5-mini"], ["gpt-oss-120b", "gpt-5-mini"])
    assert same_setting(3, 3) and not same_setting(2, 3)
