"""Running the study: presets, papermill execution, the checks before spending, the report."""

# ruff: noqa: F401 - the public names
from memcost.run.presets import PresetError, load_preset, resolve_preset
from memcost.run.runner import NotebookFailed, discover_notebooks, run_preset
