"""Running the study: presets, papermill execution, the checks before spending, the report.

``python -m memcost run --params papermill_params/smoke.yaml`` (see :mod:`memcost.cli`) calls
:func:`run_preset`.
"""

from memcost.params import notebook_parameters
from memcost.run.presets import (
    OPT_IN_STEPS,
    RUNNER_FILLED,
    RUNNER_KEYS,
    Preset,
    PresetError,
    default_steps,
    load_preset,
    resolve_preset,
    validate_preset,
)
from memcost.run.runner import NotebookFailed, default_run_name, discover_notebooks, run_preset

__all__ = [
    "OPT_IN_STEPS",
    "RUNNER_FILLED",
    "RUNNER_KEYS",
    "NotebookFailed",
    "Preset",
    "PresetError",
    "default_run_name",
    "default_steps",
    "discover_notebooks",
    "load_preset",
    "notebook_parameters",
    "resolve_preset",
    "run_preset",
    "validate_preset",
]
