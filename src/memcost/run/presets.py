"""Presets, ``papermill_params/<name>.yaml`` and the plugins': read, checked against the notebooks
before anything runs, resolved (docs/architecture.md, "Presets and parameters")."""

from __future__ import annotations

import copy
import difflib
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import yaml

from memcost.answers import is_system_name
from memcost.catalog import (
    UnknownPriceError,
    execution_problem,
    is_known,
    per_model,
    price_for,
    run_models,
)
from memcost.data.sources import resolve_source
from memcost.io import yaml_problem
from memcost.judge.votes import check_votes
from memcost.llm.batch import batch_refusal
from memcost.llm.providers import public_url
from memcost.llm.transport import parse_rate_limits
from memcost.memory import parse_systems, system_class
from memcost.memory.base import MAX_SEARCHED, SEARCH_SIZES
from memcost.paper import PAPER_MEMORY
from memcost.params import (
    CLIENT_SETTINGS,
    MODEL_PARAMETERS,
    STAGE_MODEL_PARAMETERS,
    backend_of,
    client_option,
    merge_parameters,
    normalise_execution,
    normalise_price_overrides,
    notebook_defaults,
    notebook_parameters,
    parameters_model,
    stage_models,
    validate_parameters,
)
from memcost.paths import DATASETS, NOTEBOOKS_DIR, PARAMS_DIR, REPO_ROOT, DataError, RunPaths
from memcost.plugins import contributed, plugins
from memcost.prompts import JUDGE_PROMPTS

RUNNER_KEYS = (
    "description",
    "include",
    "datasets",
    "steps",
    "parameters",
    "per_dataset",
    "allow_failures",
)
# Parameters the runner fills in itself; a preset must not set them.
RUNNER_FILLED = ("run_dir", "dataset")
# Parameters that name a file or folder: a relative one is read from where the command was
# typed (the notebooks run in notebooks/, where it would mean something else), as is the
# client's env_file. Plugins add their own (Plugin.path_parameters). Run directories are
# resolved only when given as a path: a bare name means runs/<name>.
PATH_PARAMETERS = ("data_path",)
RUN_DIR_LISTS = (((), "extra_run_dirs"), (("client",), "reuse_runs"))


class PresetError(ValueError): ...


def _typed_run_dir(value: Any) -> Any:
    """A run directory typed as a path, made absolute; a bare name (runs/<name>) as it is."""
    if isinstance(value, str) and ("/" in value or os.sep in value):
        return str(Path(value).expanduser().absolute())
    return value


def default_steps(notebooks: Mapping[str, Path]) -> list[str]:
    """Every notebook but the plugins' (opt-in)."""
    theirs = {path.name for path in contributed("notebooks")}
    return [s for s, path in notebooks.items() if path.name not in theirs]


def selected_steps(preset: Preset, notebooks: Mapping[str, Path]) -> list[str]:
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
    command_line: dict[str, Any] = field(default_factory=dict)  # the -p values, as typed

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
            # what the report says changed: the description is the preset file's, not this run's
            **({"command_line": self.command_line} if self.command_line else {}),
        }


def preset_files() -> dict[str, Path]:
    found = {path.stem: path for path in sorted(PARAMS_DIR.glob("*.yaml"))}
    for path in contributed("presets"):
        found.setdefault(path.stem, path)
    return found


def resolve_preset_path(params: str | os.PathLike[str]) -> Path:
    path = Path(params)
    for candidate in (path, REPO_ROOT / path):
        if candidate.is_file():
            return candidate.resolve()
    named = preset_files()
    if path.name.removesuffix(".yaml") in named:
        return named[path.name.removesuffix(".yaml")].resolve()
    near = difflib.get_close_matches(path.stem, list(named), n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]}?" if near else ""
    raise PresetError(f"preset not found: {params}{hint} (the presets: {', '.join(sorted(named))})")


def read_preset(path: Path, including: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The preset's keys over those of the one it ``include:``s (parameters and per-dataset blocks
    merged setting by setting)."""
    if path in including:
        chain = " -> ".join(p.stem for p in (*including, path))
        raise PresetError(f"{path}: presets include each other in a circle ({chain})")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise PresetError(f"{path}: not valid YAML at {yaml_problem(exc)}") from None
    except UnicodeDecodeError as exc:
        raise PresetError(
            f"{path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at position {exc.start}): "
            "save it as UTF-8"
        ) from None
    if not isinstance(raw, Mapping):
        raise PresetError(f"{path}: a preset must be a mapping of keys, got {type(raw).__name__}")
    unknown = [key for key in raw if key not in RUNNER_KEYS]
    if unknown:
        raise PresetError(
            f"{path}: unknown top-level key(s) {unknown}; a preset has {list(RUNNER_KEYS)} "
            "(notebook parameters go under 'parameters:')"
        )
    raw = dict(raw)
    if "include" not in raw:
        return raw
    included = str(raw.pop("include"))
    beside = path.parent / f"{included.removesuffix('.yaml')}.yaml"
    base = read_preset(
        beside if beside.is_file() else resolve_preset_path(included), (*including, path)
    )
    merged = {**base, **raw}
    for key in ("parameters", "per_dataset"):
        merged[key] = merge_parameters(base.get(key) or {}, raw.get(key) or {})
    merged["per_dataset"] = {
        name: merge_parameters((base.get("per_dataset") or {}).get(name) or {}, block or {})
        for name, block in merged["per_dataset"].items()
    }
    return merged


def _shaped(path: Path, raw: Mapping[str, Any], key: str, shape: type, example: str) -> Any:
    """``raw[key]`` when it has the ``shape`` a preset's key has (``None``: empty), else one line
    with an example; a single name stands for a list of one."""
    value = raw.get(key)
    if value is None:
        return shape()
    if shape is list and isinstance(value, (str, int)):
        return [value]
    if not isinstance(value, shape if shape is list else Mapping):
        kind = "a list" if shape is list else "a mapping"
        raise PresetError(f"{path}: {key} must be {kind}, e.g. {example}; got {value!r}")
    return value


def load_preset(params: str | os.PathLike[str]) -> Preset:
    path = resolve_preset_path(params)
    raw = read_preset(path)
    per_dataset = _shaped(path, raw, "per_dataset", dict, "{locomo: {top_k: 20}}")
    for name, block in per_dataset.items():
        _shaped(path, {f"per_dataset.{name}": block}, f"per_dataset.{name}", dict, "{top_k: 20}")
    preset = Preset(
        name=path.stem,
        path=path,
        description=str(raw.get("description", "")),
        datasets=[str(d) for d in _shaped(path, raw, "datasets", list, "[locomo, longmemeval]")],
        steps=[normalise_step(s) for s in _shaped(path, raw, "steps", list, '["00", "01"]')],
        parameters=dict(_shaped(path, raw, "parameters", dict, "{top_k: 20}")),
        per_dataset={str(k): dict(v or {}) for k, v in per_dataset.items()},
        allow_failures=check_fraction(raw.get("allow_failures", 0.0), f"{path}: allow_failures"),
    )
    stray = [d for d in preset.per_dataset if d not in preset.datasets]
    if stray:
        raise PresetError(
            f"{path}: per_dataset names {stray}, which are not in datasets {preset.datasets}"
        )
    return preset


def validate_preset(preset: Preset, notebooks: Mapping[str, Path]) -> None:
    """Every parameter key is declared by a notebook the preset runs."""
    steps = selected_steps(preset, notebooks)
    twice = sorted({n for n in preset.datasets if preset.datasets.count(n) > 1})
    if twice:
        raise PresetError(
            f"datasets names {', '.join(twice)} more than once ({', '.join(preset.datasets)}): "
            "each runs once, so name each once"
        )
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
            if key in RUNNER_FILLED:
                raise PresetError(
                    f"{preset.path}: '{where}.{key}' is set by the runner; remove it "
                    "(use --run-name for the run directory and 'datasets:' for datasets)"
                )
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
    """``"; did you mean top_k? (...)"``: the nearest declared name, or the ``client`` mapping."""
    if key in CLIENT_SETTINGS:
        return f"; it is one of the client's settings: client: {{{key}: ...}}"
    near = difflib.get_close_matches(key, sorted(valid - set(RUNNER_FILLED)), n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]}?" if near else ""
    return f"{hint} (each notebook's parameters cell lists its own)"


def check_overrides(
    preset: Preset, overrides: Mapping[str, Any], notebooks: Mapping[str, Path]
) -> None:
    """Names typed with ``-p``: refused in one line that names ``-p``."""
    valid = set().union(
        *(
            notebook_parameters(notebooks[s])
            for s in selected_steps(preset, notebooks)
            if s in notebooks
        )
    )
    for key in overrides:
        if key not in valid and key not in RUNNER_FILLED:
            raise PresetError(
                f"-p {key}=...: no notebook of preset {preset.name} declares "
                f"{key}{suggestion(key, valid)}"
            )


def check_fraction(value: Any, where: str) -> float:
    try:
        fraction = float(value)
    except (TypeError, ValueError):
        fraction = -1.0
    if isinstance(value, bool) or not 0.0 <= fraction <= 1.0:
        raise PresetError(f"{where}={value!r}: expected a fraction from 0 to 1 (e.g. 0.05)")
    return fraction


def normalise_step(step: str) -> str:
    return f"{int(step):02d}" if str(step).isdigit() else str(step)


def resolve_preset(
    params: str | os.PathLike[str],
    notebooks: Mapping[str, Path],
    *,
    steps: list[str] | None = None,
    datasets: list[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Preset:
    """The preset as this run executes it: the command line's datasets, overrides and steps applied,
    every key checked."""
    preset = load_preset(params)
    if datasets:
        preset.datasets = list(datasets)
    if overrides:  # typed on the command line: a message names -p, not the preset file
        check_overrides(preset, overrides, notebooks)
        preset.command_line = copy.deepcopy(dict(overrides))
        preset.parameters = merge_parameters(preset.parameters, overrides)
        # the command line wins over the preset's per-dataset blocks too
        preset.per_dataset = {
            name: merge_parameters(block, overrides) for name, block in preset.per_dataset.items()
        }
    paths = (*PATH_PARAMETERS, *(name for p in plugins() for name in p.path_parameters))
    for block in (preset.parameters, *preset.per_dataset.values()):
        client = block.get("client") if isinstance(block.get("client"), dict) else {}
        for holder, name in [*((block, n) for n in paths), (client, "env_file")]:
            if isinstance(holder.get(name), str) and holder[name]:
                holder[name] = str(Path(holder[name]).expanduser().absolute())
        for within, name in RUN_DIR_LISTS:
            holder = block
            for key in within:
                holder = holder.get(key) if isinstance(holder.get(key), dict) else {}
            if isinstance(holder.get(name), list):
                holder[name] = [_typed_run_dir(r) for r in holder[name]]
    # Keys are checked against every notebook the preset names, so running a subset of its
    # steps does not turn the other notebooks' keys into errors.
    validate_preset(preset, notebooks)
    if steps:
        chosen = [normalise_step(s) for s in steps]
        outside = [s for s in chosen if s not in (selected_steps(preset, notebooks))]
        if outside:
            raise PresetError(
                f"{preset.path}: steps {outside} are not part of this preset "
                f"(its steps: {selected_steps(preset, notebooks)})"
            )
        preset.steps = chosen
    for block in (preset.parameters, *preset.per_dataset.values()):
        check_secrets(block, preset.description)  # before a note names a route
    for note in (offline_means_offline(preset), unused_routes(preset, notebooks)):
        if note:
            preset.notes.append(note)
    return preset


def called_models(preset: Preset, notebooks: Mapping[str, Path]) -> dict[str, dict[str, Any]]:
    """``{model: the parameters it runs under}`` for every model the preset's steps call."""
    found: dict[str, dict[str, Any]] = {}
    for step in selected_steps(preset, notebooks):
        defaults = notebook_defaults(notebooks[step])
        for dataset in preset.datasets or [None]:
            given = preset.parameters_for(dataset)
            params = {**defaults, **{k: v for k, v in given.items() if k in defaults}}
            for model in run_models(params):
                found.setdefault(model, params)
    return found


def unused_routes(preset: Preset, notebooks: Mapping[str, Path]) -> str | None:
    """Drop ``model_backends`` routes of models no step calls (a run that leaves a model out needs
    no key for its provider); returns the line that says so."""
    called = dict.fromkeys(called_models(preset, notebooks), True)
    dropped = drop_routes(preset, lambda model, _params: not per_model(called, model))
    if not dropped:
        return None
    routes = ", ".join(f"{model} -> {backend}" for model, backend in dropped.items())
    return f"model_backends ({routes}) is ignored: no notebook of this run calls that model"


def offline_means_offline(preset: Preset) -> str | None:
    """``backend: offline`` drops the preset's routes, so ``-p backend=offline`` tries any preset
    without a key; returns the line that says so."""
    dropped = drop_routes(preset, lambda _model, params: params.get("backend") == "offline")
    if not dropped:
        return None
    routes = ", ".join(f"{model} -> {backend}" for model, backend in dropped.items())
    return f"backend=offline: every model runs offline; model_backends ({routes}) is ignored"


def drop_routes(preset: Preset, drop: Callable[[str, Mapping[str, Any]], bool]) -> dict[str, Any]:
    """Remove the routes ``drop(model, parameters)`` names, the run's and each dataset's; returns
    them."""
    dropped: dict[str, Any] = {}
    for dataset in [None, *preset.datasets]:
        params = preset.parameters_for(dataset)
        client = params.get("client")
        routes = client.get("model_backends") if isinstance(client, Mapping) else None
        if not isinstance(routes, Mapping):
            continue
        gone = {m: b for m, b in routes.items() if drop(str(m), params)}
        if not gone:
            continue
        dropped.update(gone)
        block = preset.parameters if dataset is None else preset.per_dataset.setdefault(dataset, {})
        kept = {m: b for m, b in routes.items() if m not in gone}
        block["client"] = {**(block.get("client") or {}), "model_backends": kept}
    return dropped


EFFORTS = ("minimal", "low", "medium", "high")
CHOICES: dict[str, tuple[Any, ...]] = {
    "dataset": DATASETS,
    "backend": ("offline", "openai", "openrouter", "custom"),
    "longmemeval_file": ("s", "m", "oracle"),
    "mode": ("open_ended", "multiple_choice"),
    "overflow": ("error", "truncate_oldest"),
    "cost_model": ("paper", "measured"),
    "extraction_reasoning_effort": EFFORTS,
    "reader_reasoning_effort": EFFORTS,
    "reasoning_effort": EFFORTS,
    "judge_prompts": tuple(JUDGE_PROMPTS),  # each element
}


def all_choices() -> dict[str, tuple[Any, ...]]:
    stores = ("faiss", *(name for p in plugins() for name in p.vector_stores))
    return {
        **CHOICES,
        "vector_store": stores,
        **{k: v for p in plugins() for k, v in p.choices.items()},
    }


# Lowest (and highest) value of numeric parameters.
RANGES: dict[str, tuple[float, float]] = {
    **dict.fromkeys(
        (
            "limit_conversations",
            "limit_questions",
            "sample_conversations",
            "sample_questions",
            "sample_seed",
            "bootstrap_seed",
            "failure_examples",
            "window_turns",
        ),
        (0, math.inf),
    ),
    **dict.fromkeys(
        (
            "batch_size",
            "max_segment_chars",
            "n_votes",
            "bootstrap_resamples",
            "max_turns",
            "today_max_turns",
        ),
        (1, math.inf),
    ),
    **dict.fromkeys(SEARCH_SIZES, (1, MAX_SEARCHED)),
    "max_cost_usd": (0, math.inf),
    "lc_cached_share": (0, 1),
}
# What a step reads, and the step that writes it: (file under <ds>/, writer).
PREREQUISITES: dict[str, tuple[tuple[str, str], ...]] = {
    "01": (("data/conversations.parquet", "00"),),
    "02": (("data/questions.parquet", "00"), ("memory/facts.parquet", "01")),
    "03": (("data/questions.parquet", "00"),),
    "04": (("data/questions.parquet", "00"),),
}


def _problem(name: str, value: Any, expected: str, choices: Any = None) -> PresetError:
    text = f"parameter {name}={value!r}: expected {expected}"
    if choices:
        text += f"; valid choices: {', '.join(map(str, choices))}"
    return PresetError(text)


def check_block(values: dict[str, Any], model: type) -> None:
    """Check and complete one block of parameters in place against the notebooks' declarations
    (type, range, choices, settings groups), then what a type cannot say."""
    # names only the preset's other steps declare were checked by validate_preset
    ours = {name: value for name, value in values.items() if name in model.model_fields}
    try:
        values.update(validate_parameters(model, ours, all_choices()))
    except ValueError as exc:
        raise PresetError(str(exc)) from None
    if "price_overrides" in values:
        try:
            values["price_overrides"] = normalise_price_overrides(values["price_overrides"])
        except ValueError as exc:
            raise PresetError(f"parameter {exc}") from None
    if "client" in values:
        check_client(values["client"], str(values.get("backend", "offline")))
    if "memory_systems" in values:
        try:
            named = [name for name, _ in parse_systems(values["memory_systems"])]
        except ValueError as exc:
            raise PresetError(f"parameter memory_systems: {exc}") from None
        if "mem0_style" not in named:
            raise PresetError(
                f"parameter memory_systems={values['memory_systems']!r}: list mem0_style, the "
                "paper's memory (notebooks 01-02 walk through it; the study's tables are its), "
                "e.g. [mem0_style, rag]"
            )


def check_client(settings: Mapping[str, Any], backend: str) -> None:
    """An execution mode the backend sells, rate limits for known models."""
    if "execution" in settings:
        try:
            modes = normalise_execution(settings["execution"])
        except ValueError as exc:
            raise PresetError(f"parameter client.{exc}") from None
        refused = batch_refusal(backend)
        if "batch" in modes.values() and refused:
            raise PresetError(refused)
    if "rate_limits" in settings:
        declared = settings.get("model_capabilities") or {}
        try:
            parse_rate_limits(settings["rate_limits"], known=lambda m: is_known(m, declared))
        except ValueError as exc:
            raise PresetError(f"parameter client.{exc}") from None


def unknown_price_line(model: str, parameter: str) -> str:
    return (
        f"no price for model {model!r} ({parameter}) in the price table; declare it: "
        f"-p 'price_overrides={{\"{model}\": 0}}' for a free model (a local server), or "
        f"-p 'price_overrides={{\"{model}\": {{input: 0.2, output: 0.6}}}}' "
        "(USD per 1M tokens)"
    )


def unknown_model_line(model: str, parameter: str) -> str:
    return (
        f"unknown model {model!r} ({parameter}): memcost.catalog has no capabilities for it; "
        f"for a model on your own server (Ollama, vLLM, llama.cpp) declare it: "
        f"-p 'client={{model_capabilities: {{\"{model}\": {{context_window: 32768}}}}}}' "
        "(a plain chat model: temperature and max_tokens)"
    )


def _named_models(preset: Preset, notebooks: Mapping[str, Path], steps: list[str]):
    for dataset in preset.datasets or [None]:
        params = preset.parameters_for(dataset)
        for step in steps:
            defaults = notebook_defaults(notebooks[step])
            if "price_overrides" not in defaults:
                continue
            # the notebook's own price_overrides apply where the preset sets none (notebook 06
            # prices its open-weight models there)
            step_params = {
                **params,
                "price_overrides": normalise_price_overrides(
                    params.get("price_overrides", defaults["price_overrides"])
                ),
            }
            for name in MODEL_PARAMETERS:
                if name not in defaults:
                    continue
                value = params.get(name, defaults[name])
                for model in value if isinstance(value, list) else [value]:
                    yield str(model), name, step_params


def check_prices(preset: Preset, notebooks: Mapping[str, Path], steps: list[str]) -> None:
    """Every model a paid step names has a price and is known (or declared)."""
    for model, name, params in _named_models(preset, notebooks, steps):
        try:
            price_for(model, params.get("price_overrides"))
        except UnknownPriceError:
            raise PresetError(unknown_price_line(model, name)) from None
        except ValueError as exc:
            raise PresetError(f"parameter {exc}") from None
        if params.get("backend", "offline") != "offline" and not is_known(
            model, client_option(params, "model_capabilities") or None
        ):
            raise PresetError(unknown_model_line(model, name))


def check_execution(preset: Preset, notebooks: Mapping[str, Path], steps: list[str]) -> None:
    """Every stage sent in batch or flex has a model and provider that sell it, else one line saying
    what to change."""
    defaults: dict[str, Any] = {}
    for step in steps:
        defaults.update(notebook_defaults(notebooks[step]))
    for dataset in preset.datasets or [None]:
        params = {**defaults, **preset.parameters_for(dataset)}
        for stage, mode in normalise_execution(client_option(params, "execution")).items():
            if not any(name in defaults for name, _ in STAGE_MODEL_PARAMETERS[stage]):
                continue  # no selected step calls this stage
            for model in stage_models(stage, params):
                problem = execution_problem(
                    stage, mode, model, backend_of(model, params), params.get("price_overrides")
                )
                if problem is not None:
                    raise PresetError(problem)
        if "01" in steps:
            problem = batched_in_turn(
                normalise_execution(client_option(params, "execution")), params
            )
            if problem is not None:
                raise PresetError(problem)


def batched_in_turn(modes: Mapping[str, str], params: Mapping[str, Any]) -> str | None:
    """A batch stage whose calls come one after another (each wave a batch of up to 24 hours: some
    70 for the paper's update phase on LoCoMo): the line saying what to set instead."""
    batched = {stage for stage, mode in modes.items() if mode == "batch"}
    if not batched:
        return None
    try:
        systems = parse_systems(params.get("memory_systems") or ["mem0_style"])
    except ValueError:
        return None  # said by the memory_systems check, in its own words
    for name, given in systems:
        cls = system_class(name)
        settings = cls.settings_from(given, params)
        if backend_of(str(settings.get(cls.write_model_setting)), params) == "offline":
            continue  # the offline backend ignores batch: it calls no model
        stage = next((s for s in cls.in_turn(settings) if s in batched), None)
        if stage is not None:
            return (
                f"execution: {{{stage}: batch}} with memory system {name}: its {stage} calls "
                "come one after another (each waits for the one before), so each would be a "
                f"batch of its own, up to 24 hours apiece; send {stage} interactive or flex "
                f"(-p 'client={{execution: {{{stage}: flex}}}}') or leave {name} out"
            )
    return None


def is_study(notebooks: Mapping[str, Path], steps: list[str]) -> bool:
    """The study's notebooks (dataset names and prerequisites are checked only then)."""
    defaults = {
        str(notebook_parameters(notebooks[s]).get("dataset", {}).get("default")).strip("\"'")
        for s in steps
    }
    return bool(defaults & set(DATASETS))


def check_datasets(preset: Preset) -> None:
    for name in preset.datasets:
        if name not in DATASETS:
            raise _problem("datasets", name, "a dataset name", DATASETS)


def check_data_paths(preset: Preset, steps: list[str]) -> None:
    """A ``data_path`` notebook 00 would read exists: a typo stops in seconds."""
    if "00" not in steps:
        return
    for dataset in preset.datasets:
        params = preset.parameters_for(dataset)
        if not params.get("data_path"):
            continue
        try:
            resolve_source(
                dataset,
                params["data_path"],
                download=bool(params.get("download")),  # data_path wins: nothing fetched
                longmemeval_file=str(params.get("longmemeval_file") or "s"),
            )
        except DataError as exc:
            raise PresetError(f"{preset.path}: {exc}") from None


def check_prerequisites(preset: Preset, run_dir: Path, steps: list[str]) -> None:
    """Each selected step's inputs come from an earlier selected step or are in the run
    directory."""
    run = RunPaths(run_dir)
    for step in steps:
        for dataset in preset.datasets:
            for relative, writer in PREREQUISITES.get(step, ()):
                if writer in steps and steps.index(writer) < steps.index(step):
                    continue
                if not (run.root / dataset / relative).is_file():
                    raise PresetError(
                        f"step {step} needs {dataset}/{relative}, written by step {writer}, "
                        f"which is neither selected before it nor in {run.root}; add step "
                        f"{writer} (e.g. --steps {writer},{step}) or resume a run that has it"
                    )


def check_answer_files(preset: Preset, run_dir: Path) -> None:
    """A run written by an earlier version, whose answers files name systems this version does
    not know, is refused before a notebook mixes the two namings."""
    run = RunPaths(run_dir)
    for dataset in preset.datasets:
        for path in sorted(run.dataset(dataset).answers.glob("answers_*.jsonl")):
            system = path.name.removeprefix("answers_").removesuffix(".jsonl")
            if is_system_name(system):
                continue
            renamed = f" (the paper's memory is now {PAPER_MEMORY!r})" if system == "memory" else ""
            raise PresetError(
                f"{path}: {system!r} is not a system name of this version{renamed}; this run was "
                f"written by an earlier version: start a new run (--run-name)"
            )


def check_store(preset: Preset, run_dir: Path) -> None:
    """A run whose store of calls is gone but whose work is there would leave that work's calls
    out of its cost tables. Offline, the resume makes them again (free, each said in one line);
    with a paid backend it would pay again, so it is refused."""
    run = RunPaths(run_dir)
    if run.calls.exists():
        return
    work = [
        path
        for dataset in preset.datasets
        for pattern in ("answers/answers_*.jsonl", "judgments.jsonl", "memory/**/done.json")
        for path in run.dataset(dataset).root.glob(pattern)
    ]
    blocks = (preset.parameters, *preset.per_dataset.values())
    routes = [
        v for b in blocks for v in ((b.get("client") or {}).get("model_backends") or {}).values()
    ]
    paid = any(b.get("backend", "offline") != "offline" for b in blocks) or any(
        r != "offline" for r in routes
    )
    if work and paid:
        raise PresetError(
            f"{run.calls}, the run's store of calls, is missing but the run holds answers, votes "
            f"or memories ({work[0]}): its cost tables would leave their calls out, and a resume "
            "would pay for them again. Put the file back, or start a new run (--run-name)"
        )


def check_plugins(preset: Preset, steps: list[str]) -> None:
    for plugin in plugins():
        if plugin.notebooks and not {p.name[:2] for p in plugin.notebooks} & set(steps):
            continue
        for check in plugin.parameter_checks:
            for block in (preset.parameters, *preset.per_dataset.values()):
                try:
                    check(block)
                except ValueError as exc:
                    raise PresetError(f"parameter {exc}") from None


def validate_run(preset: Preset, notebooks: Mapping[str, Path], run_dir: Path) -> None:
    """Everything a run needs, checked before anything is created."""
    steps = selected_steps(preset, notebooks)
    model = parameters_model(tuple(notebooks[s] for s in steps), all_choices(), RANGES)
    for block in (preset.parameters, *preset.per_dataset.values()):
        check_secrets(block, preset.description)  # first: no later message may repeat a secret
    check_plugins(preset, steps)
    study = is_study(notebooks, steps)
    if study:
        check_datasets(preset)
    check_block(preset.parameters, model)
    for values in preset.per_dataset.values():
        check_block(values, model)
    for block in (preset.parameters, *preset.per_dataset.values()):
        if "n_votes" in block:
            try:
                check_votes(int(block["n_votes"]))
            except ValueError as exc:
                raise PresetError(f"parameter {exc}") from None
    if study:
        check_prices(preset, notebooks, steps)
        check_execution(preset, notebooks, steps)
        check_data_paths(preset, steps)
        check_prerequisites(preset, run_dir, steps)
        check_answer_files(preset, run_dir)
        check_store(preset, run_dir)


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KEY_PREFIX = re.compile(r"^(sk|pk|rk|ghp|xox[a-z])[-_]")
# A key-shaped token inside any text: a provider prefix and a long run of key characters.
_KEY_TOKEN = re.compile(r"(?<![A-Za-z0-9])(?:sk|pk|rk|ghp|xox[a-z])[-_][A-Za-z0-9_-]{16,}")
_SECRET_QUERY = re.compile(r"key|token|secret|sig|auth|pass|credential|access", re.IGNORECASE)
HOW = (
    "keys never go in parameters (they are recorded in the manifest and the executed "
    "notebooks): put the key in an environment variable (or .env) and pass that variable's "
    "name as api_key_env, e.g. -p 'client={api_key_env: MY_PROXY_KEY}'"
)


def looks_like_key(value: str) -> bool:
    """A key rather than a variable name: invalid as a name, a key prefix, or a long mix of letters
    and digits."""
    if not _ENV_NAME.match(value) or _KEY_PREFIX.match(value):
        return True
    return len(value) >= 24 and bool(re.search(r"[a-z]", value)) and bool(re.search(r"\d", value))


def check_base_url(url: str) -> None:
    parts = urlsplit(url)
    secret_params = [
        name
        for name, _ in parse_qsl(parts.query, keep_blank_values=True)
        if _SECRET_QUERY.search(name)
    ]
    if parts.username or parts.password:
        where = "user info (user:key@host)"
    elif secret_params:
        where = f"the query parameter {secret_params[0]!r}"
    else:
        return
    raise PresetError(
        f"parameter base_url carries a credential in {where}; refused, nothing "
        f"ran. Pass base_url={public_url(url)} and the secret through the "
        f"environment: {HOW}"
    )


def check_api_key_env(value: str) -> None:
    if value and looks_like_key(value):
        raise PresetError(
            "parameter api_key_env holds what looks like a key (not shown), not "
            f"the name of an environment variable; refused, nothing ran. {HOW}"
        )


def texts(value: Any, where: str) -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(where, value)]
    if isinstance(value, Mapping):
        return [t for k, v in value.items() for t in [*texts(k, where), *texts(v, f"{where}.{k}")]]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in texts(v, where)]
    return []


def check_no_key(value: Any, where: str) -> None:
    """A key-shaped token anywhere in ``value`` is refused, naming where (never it)."""
    for place, text in texts(value, where):
        if _KEY_TOKEN.search(text):
            raise PresetError(
                f"{place} holds what looks like a key (not shown); refused, nothing ran. {HOW}"
            )


def check_secrets(values: Mapping[str, Any], description: str = "") -> None:
    check_no_key(description, "description")
    settings = values.get("client") if isinstance(values.get("client"), Mapping) else {}
    if isinstance(settings.get("api_key_env"), str):
        check_api_key_env(settings["api_key_env"])
    if isinstance(values.get("base_url"), str):
        check_base_url(values["base_url"])
    for name, value in values.items():
        check_no_key(value, f"parameter {name}")
