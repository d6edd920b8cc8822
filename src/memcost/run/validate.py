"""Every parameter checked before the first notebook runs, and before the run directory exists.

A bad ``-p`` or preset value used to surface as a raw traceback, late (``-p top_k=abc`` ran
notebooks 00-01 and failed in 02). :func:`validate_run` checks every value a selected notebook
will receive against the type its parameters cell declares (``memcost.params``), coerces the
harmless cases (an int where a float is declared), checks ranges and choices where they exist,
the dataset names, and the steps' prerequisites; a problem is one line naming the parameter, the
value, the expected type and the valid choices (:class:`PresetError`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memcost.catalog import UnknownPriceError, execution_problem, is_known, price_for
from memcost.llm.batch import BATCH_RETRY_MODES, batch_refusal
from memcost.llm.transport import parse_rate_limits
from memcost.memory import parse_systems
from memcost.memory.pgvector import ITERATIVE_SCANS
from memcost.memory.vectors import LAYOUTS, STORES
from memcost.params import (
    CLIENT_SETTINGS,
    MODEL_PARAMETERS,
    STAGE_MODEL_PARAMETERS,
    backend_of,
    client_option,
    complete_group,
    normalise_execution,
    normalise_price_overrides,
    notebook_defaults,
    notebook_parameters,
    settings_groups,
    stage_models,
)
from memcost.paths import DATASETS, RunPaths
from memcost.prompts import JUDGE_PROMPTS
from memcost.run.presets import Preset, PresetError, selected_steps
from memcost.run.secrets import check_secrets

EFFORTS = ("minimal", "low", "medium", "high")
CHOICES: dict[str, tuple[Any, ...]] = {
    "dataset": DATASETS,
    "backend": ("offline", "openai", "openrouter", "custom"),
    "cache_mode": ("read_write", "replay_only", "off"),
    "longmemeval_file": ("s", "m", "oracle"),
    "mode": ("open_ended", "multiple_choice"),
    "overflow": ("error", "truncate_oldest"),
    "cost_model": ("paper", "measured"),
    "extraction_reasoning_effort": EFFORTS,
    "reader_reasoning_effort": EFFORTS,
    "reasoning_effort": EFFORTS,
    "judge_prompts": tuple(JUDGE_PROMPTS),  # each element
    "batch_retry": BATCH_RETRY_MODES,
    "vector_store": STORES,
    "pgvector_layout": LAYOUTS,
    "pgvector_iterative_scan": ITERATIVE_SCANS,
}
_DSN_URI = re.compile(r"^postgres(?:ql)?://[^\s]*$")
_DSN_PAIRS = re.compile(r"^\s*(?:[A-Za-z_]+\s*=\s*(?:'[^']*'|\S+)\s*)+$")
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
            "max_concurrency",
            "batch_size",
            "max_segment_chars",
            "update_top_k",
            "hnsw_m",
            "ef_construction",
            "top_k",
            "ef_search",
            "n_votes",
            "bootstrap_resamples",
            "max_turns",
            "today_max_turns",
        ),
        (1, math.inf),
    ),
    **dict.fromkeys(("max_wait_hours", "batch_poll_s"), (1e-6, math.inf)),
    "max_cost_usd": (0, math.inf),
    "request_timeout_s": (0, math.inf),  # 0: sized to each request's model and prompt
    "lc_cached_share": (0, 1),
}
# What a step reads, and the step that writes it: (file under <ds>/, writer).
PREREQUISITES: dict[str, tuple[tuple[str, str], ...]] = {
    "01": (("data/conversations.parquet", "00"),),
    "02": (("data/questions.parquet", "00"), ("memory/facts.parquet", "01")),
    "03": (("data/questions.parquet", "00"),),
    "04": (("data/questions.parquet", "00"),),
}
# Parameters that name models (their prices must be known before anything is spent).
_SCALARS = {"int": int, "float": float, "str": str, "bool": bool, "list": list, "dict": dict}


def _problem(name: str, value: Any, expected: str, choices: Any = None) -> PresetError:
    text = f"parameter {name}={value!r}: expected {expected}"
    if choices:
        text += f"; valid choices: {', '.join(map(str, choices))}"
    return PresetError(text)


def coerce(name: str, value: Any, annotation: str) -> Any:
    """``value`` as the declared type (an int for a float, a scalar for a one-item list is
    *not* guessed); :class:`PresetError` naming the parameter when it is not that type."""
    base = annotation.split("[", 1)[0].strip()
    kind = _SCALARS.get(base)
    if kind is None:
        return value  # an annotation the notebooks do not use: taken as given
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if kind is bool and not isinstance(value, bool):
        raise _problem(name, value, "true or false")
    if kind in (int, float) and (isinstance(value, bool) or not isinstance(value, kind)):
        raise _problem(name, value, f"{'an integer' if kind is int else 'a number'}")
    if kind in (list, dict) and not isinstance(value, kind):
        example = "[a, b]" if kind is list else "{a: b}"
        raise _problem(name, value, f"a {base} (YAML, e.g. {example})")
    if kind is str and not isinstance(value, str):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        raise _problem(name, value, "a string")
    return value


def check_value(name: str, value: Any, annotation: str) -> Any:
    """Type, range and choices of one parameter; returns the coerced value."""
    value = coerce(name, value, annotation)
    if name in RANGES and isinstance(value, (int, float)):
        low, high = RANGES[name]
        if not (low <= value <= high) or (isinstance(value, float) and math.isnan(value)):
            bound = f"at least {low:g}" if high == math.inf else f"from {low:g} to {high:g}"
            raise _problem(name, value, f"a number {bound}")
    if name in CHOICES:
        items = value if isinstance(value, list) else [value]
        bad = [v for v in items if v not in CHOICES[name]]
        if bad or (isinstance(value, list) and not value):
            expected = "a list of names" if isinstance(value, list) else "one of the choices"
            raise _problem(name, value, expected, CHOICES[name])
    return value


def check_dsn(dsn: str) -> None:
    """``pgvector_dsn``: empty, a ``postgresql://`` URI or ``key=value`` pairs. The message never
    repeats the value (it may hold a password)."""
    if dsn and not (_DSN_URI.match(dsn) or _DSN_PAIRS.match(dsn)):
        raise PresetError(
            "parameter pgvector_dsn: expected a PostgreSQL connection URI "
            "(postgresql://user@host:5432/db) or key=value pairs (host=... dbname=...); "
            "empty for the private server inside the run directory"
        )


def check_block(
    values: dict[str, Any],
    declared: Mapping[str, str],
    groups: Mapping[str, dict[str, Any]] | None = None,
) -> None:
    """Check and coerce, in place, the values of one block that some notebook declares; a
    settings group (``groups``: its default) is completed from its default."""
    for name in list(values):
        if name in declared:
            values[name] = check_value(name, values[name], declared[name])
        if name in (groups or {}):
            try:
                values[name] = complete_group(name, values[name], groups[name])
            except ValueError as exc:
                raise PresetError(str(exc)) from None
    if isinstance(values.get("pgvector_dsn"), str):
        check_dsn(values["pgvector_dsn"])
    if "price_overrides" in values:
        try:
            values["price_overrides"] = normalise_price_overrides(values["price_overrides"])
        except ValueError as exc:
            raise PresetError(f"parameter {exc}") from None
    if "client" in values:
        values["client"] = check_client(values["client"], str(values.get("backend", "offline")))
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


def check_client(settings: Any, backend: str) -> dict[str, Any]:
    """The ``client`` mapping: known settings only, each of its type, range and choices."""
    if not isinstance(settings, Mapping):
        raise PresetError(
            f"parameter client={settings!r}: expected a mapping of the client's "
            "settings, e.g. client: {max_concurrency: 16, execution: {judge: batch}}"
        )
    unknown = sorted(set(settings) - set(CLIENT_SETTINGS))
    if "tpm_limit" in unknown:
        raise PresetError(
            "parameter client.tpm_limit: limits are per model now: client: "
            "{rate_limits: {MODEL: {rpm: N, tpm: N}}}"
        )
    if unknown:
        raise PresetError(
            f"parameter client: unknown setting(s) {', '.join(map(str, unknown))}; "
            f"the client's settings are {', '.join(CLIENT_SETTINGS)}"
        )
    try:
        checked = {
            name: check_value(name, value, CLIENT_SETTINGS[name][0])
            for name, value in settings.items()
        }
    except PresetError as exc:  # "parameter client.max_concurrency=0: ..."
        raise PresetError(str(exc).replace("parameter ", "parameter client.", 1)) from None
    if "execution" in checked:
        try:
            modes = normalise_execution(checked["execution"])
        except ValueError as exc:
            raise PresetError(f"parameter client.{exc}") from None
        refused = batch_refusal(backend)
        if "batch" in modes.values() and refused:
            raise PresetError(refused)
    if "rate_limits" in checked:
        declared = checked.get("model_capabilities") or {}
        try:
            parse_rate_limits(checked["rate_limits"], known=lambda m: is_known(m, declared))
        except ValueError as exc:
            raise PresetError(f"parameter client.{exc}") from None
    return checked


def unknown_price_line(model: str, parameter: str) -> str:
    """One line that says how to declare a price (and works when followed)."""
    return (
        f"no price for model {model!r} ({parameter}) in the price table; declare it: "
        f"-p 'price_overrides={{\"{model}\": 0}}' for a free model (a local server), or "
        f"-p 'price_overrides={{\"{model}\": {{input: 0.2, output: 0.6}}}}' "
        "(USD per 1M tokens)"
    )


def unknown_model_line(model: str, parameter: str) -> str:
    """One line that says how to declare a model the registry does not know (and works when
    followed): a plain chat model on the user's own server."""
    return (
        f"unknown model {model!r} ({parameter}): memcost.catalog has no capabilities for it; "
        f"for a model on your own server (Ollama, vLLM, llama.cpp) declare it: "
        f"-p 'client={{model_capabilities: {{\"{model}\": {{context_window: 32768}}}}}}' "
        "(a plain chat model: temperature and max_tokens)"
    )


def _named_models(preset: Preset, notebooks: Mapping[str, Path], steps: list[str]):
    """``(model, parameter, parameters)`` for every model a model-calling step names."""
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
    """Every model a paid step names has a price (the table's, or ``price_overrides``) and is
    known to the model registry (or declared in ``model_capabilities``)."""
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
    """Every stage run in batch or flex has a model and provider that sell it (OpenAI's own
    API, a price with that mode's multiplier): else one line naming the stage, the model and
    what to change, before anything runs (memcost.catalog)."""
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


def is_study(notebooks: Mapping[str, Path], steps: list[str]) -> bool:
    """Are these the study's notebooks (their ``dataset`` parameter defaults to one of its
    datasets)? Dataset names and prerequisites are checked only then."""
    defaults = {
        str(notebook_parameters(notebooks[s]).get("dataset", {}).get("default")).strip("\"'")
        for s in steps
    }
    return bool(defaults & set(DATASETS))


def check_datasets(preset: Preset) -> None:
    for name in preset.datasets:
        if name not in DATASETS:
            raise _problem("datasets", name, "a dataset name", DATASETS)


def check_prerequisites(preset: Preset, run_dir: Path, steps: list[str]) -> None:
    """Each selected step's inputs are either written by an earlier selected step or already in
    the run directory (a resumed run)."""
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


def validate_run(preset: Preset, notebooks: Mapping[str, Path], run_dir: Path) -> None:
    """Everything a run needs, checked before anything is created or executed."""
    steps = selected_steps(preset, notebooks)
    declared: dict[str, str] = {}
    groups: dict[str, dict[str, Any]] = {}
    for step in steps:
        for name, info in notebook_parameters(notebooks[step]).items():
            declared.setdefault(name, info["inferred_type_name"])
        for name, default in settings_groups(notebooks[step]).items():
            groups.setdefault(name, default)
    for block in (preset.parameters, *preset.per_dataset.values()):
        check_secrets(block, preset.description)  # first: no later message may repeat a secret
    study = is_study(notebooks, steps)
    if study:
        check_datasets(preset)
    check_block(preset.parameters, declared, groups)
    for values in preset.per_dataset.values():
        check_block(values, declared, groups)
    if study:
        check_prices(preset, notebooks, steps)
        check_execution(preset, notebooks, steps)
        check_prerequisites(preset, run_dir, steps)
