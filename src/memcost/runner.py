"""The runner's former module name: the same names, now defined in :mod:`memcost.run`.

New code imports from :mod:`memcost.run`; this module only keeps older imports working.
"""

from memcost.run import (
    OPT_IN_STEPS,
    RUNNER_FILLED,
    RUNNER_KEYS,
    NotebookFailed,
    Preset,
    PresetError,
    default_run_name,
    default_steps,
    discover_notebooks,
    load_preset,
    notebook_parameters,
    resolve_preset,
    run_preset,
    validate_preset,
)

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
