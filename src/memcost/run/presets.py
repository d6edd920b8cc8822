"""Presets: ``papermill_params/<name>.yaml`` read, checked against the notebooks, resolved.

A preset has runner keys and notebook parameters::

    description: what this preset is for              # shown in the manifest and the report
    datasets: [locomo, longmemeval, personamem]    # per-dataset notebooks run once for each
    steps: ["00", "01", "02", "03", "04", "05"]       # optional: which notebooks, by number
    parameters: {backend: offline, ...}               # given to every notebook that declares them
                                                      # (the client's settings: client: {...})
    per_dataset: {personamem: {mode: multiple_choice}}  # overrides for one dataset
    allow_failures: 0.0                               # fraction of a stage's items that may fail

Unknown parameter keys are an error (papermill itself only warns).
"""

from __future__ import annotations

import copy
import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from memcost.params import (
    CLIENT_SETTINGS,
    merge_parameters,
    moved_into_group,
    moved_to_client,
    notebook_parameters,
)
from memcost.paths import NOTEBOOKS_DIR, PARAMS_DIR, REPO_ROOT

RUNNER_KEYS = ("description", "datasets", "steps", "parameters", "per_dataset", "allow_failures")
# Parameters the runner fills in itself; a preset must not set them.
RUNNER_FILLED = ("run_dir", "dataset")
# Parameters that name a file or folder: a relative one is read from where the command was
# typed (the notebooks run in notebooks/, where it would mean something else).
PATH_PARAMETERS = ("data_path",)


class PresetError(ValueError):
    """A preset file that cannot be run as written."""


# Notebooks that run only when a preset names them in ``steps`` (a preset without ``steps`` runs
# the others): 06, the serving-cost study, is a study of its own on synthetic conversations.
OPT_IN_STEPS = ("06",)


def default_steps(notebooks: Mapping[str, Path]) -> list[str]:
    """The steps of a preset that names none: every notebook but the opt-in ones."""
    return [s for s in notebooks if s not in OPT_IN_STEPS]


def selected_steps(preset: Preset, notebooks: Mapping[str, Path]) -> list[str]:
    """The steps a preset runs: the ones it names, else :func:`default_steps`."""
    return preset.steps or default_steps(notebooks)


@dataclass
class Preset:
    name: str
    path: Path
    description: str = ""
    datasets: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)
    per_dataset: dict[str, dict[str, Any]] = field(default_factory=dict)
    allow_failures: float = 0.0  # fraction of a stage's items that may fail without stopping
    notes: list[str] = field(default_factory=list)  # lines the runner prints once at the start

    def parameters_for(self, dataset: str | None) -> dict[str, Any]:
        merged = copy.deepcopy(self.parameters)
        if dataset is not None:
            merged = merge_parameters(merged, copy.deepcopy(self.per_dataset.get(dataset, {})))
        return merged

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.path),
            "description": self.description,
            "datasets": self.datasets,
            "steps": self.steps,
            "parameters": self.parameters,
            "per_dataset": self.per_dataset,
            "allow_failures": self.allow_failures,
        }


def resolve_preset_path(params: str | os.PathLike[str]) -> Path:
    path = Path(params)
    candidates = [path, REPO_ROOT / path, PARAMS_DIR / path, PARAMS_DIR / f"{path}.yaml"]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    available = ", ".join(sorted(p.stem for p in PARAMS_DIR.glob("*.yaml")))
    raise PresetError(f"preset not found: {params} (available in {PARAMS_DIR}: {available})")


def load_preset(params: str | os.PathLike[str]) -> Preset:
    path = resolve_preset_path(params)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise PresetError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, Mapping):
        raise PresetError(f"{path}: a preset must be a mapping of keys, got {type(raw).__name__}")
    unknown = [key for key in raw if key not in RUNNER_KEYS]
    if unknown:
        raise PresetError(
            f"{path}: unknown top-level key(s) {unknown}; a preset has {list(RUNNER_KEYS)} "
            "(notebook parameters go under 'parameters:')"
        )
    preset = Preset(
        name=path.stem,
        path=path,
        description=str(raw.get("description", "")),
        datasets=[str(d) for d in raw.get("datasets") or []],
        steps=[normalise_step(s) for s in raw.get("steps") or []],
        parameters=dict(raw.get("parameters") or {}),
        per_dataset={str(k): dict(v or {}) for k, v in (raw.get("per_dataset") or {}).items()},
        allow_failures=check_fraction(raw.get("allow_failures", 0.0), f"{path}: allow_failures"),
    )
    stray = [d for d in preset.per_dataset if d not in preset.datasets]
    if stray:
        raise PresetError(
            f"{path}: per_dataset names {stray}, which are not in datasets {preset.datasets}"
        )
    return preset


def validate_preset(preset: Preset, notebooks: Mapping[str, Path]) -> None:
    """Every parameter key must be declared by at least one notebook the preset runs."""
    steps = selected_steps(preset, notebooks)
    missing = [s for s in steps if s not in notebooks]
    if missing:
        raise PresetError(
            f"{preset.path}: steps {missing} have no notebook in {NOTEBOOKS_DIR} "
            f"(available: {sorted(notebooks)})"
        )
    declared: dict[str, set[str]] = {s: set(notebook_parameters(notebooks[s])) for s in steps}
    valid = set().union(*declared.values()) if declared else set()
    blocks = [("parameters", preset.parameters)] + [
        (f"per_dataset.{name}", values) for name, values in preset.per_dataset.items()
    ]
    for where, values in blocks:
        for key in values:
            if key in CLIENT_SETTINGS:
                raise PresetError(moved_to_client(key, f"{preset.path}: '{where}.{key}': "))
            if key in RUNNER_FILLED:
                raise PresetError(
                    f"{preset.path}: '{where}.{key}' is set by the runner; remove it "
                    "(use --run-name for the run directory and 'datasets:' for datasets)"
                )
            if key not in valid and moved_into_group(key, ""):
                raise PresetError(moved_into_group(key, f"{preset.path}: '{where}.{key}': "))
            if key not in valid:
                raise PresetError(
                    f"{preset.path}: unknown parameter '{where}.{key}'; no "
                    f"notebook in this preset declares it{suggestion(key, valid)}"
                )
    per_dataset_steps = [s for s in steps if "dataset" in declared[s]]
    if per_dataset_steps and not preset.datasets:
        raise PresetError(
            f"{preset.path}: steps {per_dataset_steps} run per dataset but 'datasets:' is empty"
        )


def suggestion(key: str, valid: set[str]) -> str:
    """``"; did you mean top_k? (...)"``: the nearest declared name, and where names are listed."""
    near = difflib.get_close_matches(key, sorted(valid - set(RUNNER_FILLED)), n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]}?" if near else ""
    return f"{hint} (each notebook's parameters cell lists its own)"


def check_overrides(
    preset: Preset, overrides: Mapping[str, Any], notebooks: Mapping[str, Path]
) -> None:
    """Names typed with ``-p``: refused in one line that names ``-p``, not the preset file."""
    valid = set().union(
        *(
            notebook_parameters(notebooks[s])
            for s in selected_steps(preset, notebooks)
            if s in notebooks
        )
    )
    for key in overrides:
        if key in CLIENT_SETTINGS:
            raise PresetError(moved_to_client(key, f"-p {key}=...: "))
        if key not in valid and moved_into_group(key, ""):
            raise PresetError(moved_into_group(key, f"-p {key}=...: "))
        if key not in valid and key not in RUNNER_FILLED:
            raise PresetError(
                f"-p {key}=...: no notebook of preset {preset.name} declares "
                f"{key}{suggestion(key, valid)}"
            )


def check_fraction(value: Any, where: str) -> float:
    """``allow_failures``: a number from 0 to 1 (the fraction of a stage's items)."""
    try:
        fraction = float(value)
    except (TypeError, ValueError):
        fraction = -1.0
    if isinstance(value, bool) or not 0.0 <= fraction <= 1.0:
        raise PresetError(f"{where}={value!r}: expected a fraction from 0 to 1 (e.g. 0.05)")
    return fraction


def normalise_step(step: str) -> str:
    """``"1"`` → ``"01"``: steps are named by their notebook's two-digit number."""
    return f"{int(step):02d}" if str(step).isdigit() else str(step)


def resolve_preset(
    params: str | os.PathLike[str],
    notebooks: Mapping[str, Path],
    *,
    steps: list[str] | None = None,
    datasets: list[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Preset:
    """The preset as this run will execute it: the command line's datasets, overrides and steps
    applied, every key checked against the notebooks. Raises :class:`PresetError`."""
    preset = load_preset(params)
    if datasets:
        preset.datasets = list(datasets)
    if overrides:  # typed on the command line: a message names -p, not the preset file
        check_overrides(preset, overrides, notebooks)
        preset.parameters = merge_parameters(preset.parameters, overrides)
        # the command line wins over the preset's per-dataset blocks too
        preset.per_dataset = {
            name: merge_parameters(block, overrides) for name, block in preset.per_dataset.items()
        }
    for block in (preset.parameters, *preset.per_dataset.values()):
        for name in PATH_PARAMETERS:
            if isinstance(block.get(name), str) and block[name]:
                block[name] = str(Path(block[name]).expanduser().absolute())
    # Keys are checked against every notebook the preset names, so running a subset of its
    # steps does not turn the other notebooks' keys into errors.
    validate_preset(preset, notebooks)
    note = offline_means_offline(preset)
    if note:
        preset.notes.append(note)
    if steps:
        chosen = [normalise_step(s) for s in steps]
        outside = [s for s in chosen if s not in (selected_steps(preset, notebooks))]
        if outside:
            raise PresetError(
                f"{preset.path}: steps {outside} are not part of this preset "
                f"(its steps: {selected_steps(preset, notebooks)})"
            )
        preset.steps = chosen
    return preset


def offline_means_offline(preset: Preset) -> str | None:
    """``backend: offline`` runs every model offline: the preset's ``model_backends`` (a paid
    preset routes gpt-oss to OpenRouter) is dropped, so ``-p backend=offline`` alone tries any
    preset without a key. Returns the line that says so (``None``: nothing was dropped)."""
    dropped: dict[str, Any] = {}
    for dataset in [None, *preset.datasets]:
        params = preset.parameters_for(dataset)
        routes = (params.get("client") or {}).get("model_backends")
        if params.get("backend") != "offline" or not routes:
            continue
        dropped.update(routes)
        block = preset.parameters if dataset is None else preset.per_dataset.setdefault(dataset, {})
        block["client"] = {**(block.get("client") or {}), "model_backends": {}}
    if not dropped:
        return None
    routes = ", ".join(f"{model} -> {backend}" for model, backend in dropped.items())
    return f"backend=offline: every model runs offline; model_backends ({routes}) is ignored"
