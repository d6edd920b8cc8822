"""Notebook parameters: what each notebook declares, and the ones every notebook shares.

A notebook's ``parameters`` cell is the single declaration of its parameters (papermill injects
overrides after it). This module reads that cell with ``ast`` (no papermill import: a notebook
can list its own parameters in milliseconds), and names the parameters that configure the model
client in every notebook (a few shared ones and one ``client`` mapping), so that a notebook
builds its client with ``make_client(run, **shared_params(globals()))``.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from memcost.calls import STAGES
from memcost.catalog import per_model
from memcost.paper import EMBEDDING_MODEL, EXTRACTION_MODEL, JUDGE_MODEL, READER_MODEL

# The client parameters every notebook that calls a model declares on their own: where calls go
# and what they may cost (docs/architecture.md, "Parameters every notebook shares").
SHARED_PARAMETERS: tuple[str, ...] = ("backend", "base_url", "max_cost_usd", "price_overrides")
# The client's other settings, given together in one ``client`` mapping (a notebook declares
# ``client: dict = {}``; a preset writes ``client: {max_concurrency: 16}``; the command line
# ``-p 'client={execution: {judge: batch}}'``): name -> (type, default, what it does).
CLIENT_SETTINGS: dict[str, tuple[str, Any, str]] = {
    "api_key_env": ("str", "", "environment variable holding the key; empty for the provider's"),
    "model_backends": ("dict", {}, "per-model provider, e.g. {openai/gpt-oss-120b: openrouter}"),
    "cache_mode": (
        "str",
        "read_write",
        "read_write | replay_only | off: how the run's store of calls serves stored answers",
    ),
    "reuse_runs": ("list", [], "other runs whose stored answers this run may be served"),
    "max_concurrency": (
        "int",
        32,
        "the most requests in flight at once (pacing to the "
        "account's limits decides how many below it)",
    ),
    "request_timeout_s": ("float", 0.0, "seconds one attempt may take; 0 sizes it per request"),
    "model_capabilities": (
        "dict",
        {},
        "models the registry does not know, e.g. {llama3.1:8b: {context_window: 32768}}",
    ),
    "provider_routing": ("dict", {}, "OpenRouter provider pinning per model"),
    "rate_limits": (
        "dict",
        {},
        "the account's limits per model, e.g. {gpt-5-mini: {rpm: 500, "
        "tpm: 500000}} (replies' x-ratelimit-* headers correct them)",
    ),
    "max_backoff_s": ("float", 300.0, "the longest wait between retries"),
    "prefix_requests_per_minute": ("int", 15, "requests a minute per conversation prefix"),
    "execution": ("dict", {}, "per stage: interactive | batch | flex, e.g. {judge: batch}"),
    "batch_retry": ("str", "batch", "requests a batch did not answer: batch | interactive"),
    "max_wait_hours": ("float", 24.0, "the longest wait for batches"),
    "batch_poll_s": ("float", 60.0, "seconds between two looks at a running batch"),
    "batch_queue_tokens": (
        "dict",
        {},
        "enqueued-token limit per model (a batch file holds no more)",
    ),
}


def client_option(params: Mapping[str, Any], name: str) -> Any:
    """One client setting of a run's or a notebook's parameters: the ``client`` mapping's
    value, else its default."""
    return (params.get("client") or {}).get(name, CLIENT_SETTINGS[name][1])


def merge_parameters(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``extra`` over ``base``, with mappings merged key by key: a per-dataset block or
    ``-p 'client={...}'`` (or a settings group, ``-p 'explorer={questions: 30}'``) changes the
    settings it names and keeps the others. ``price_overrides`` is replaced whole: a price is
    one decision, not a merge of two."""
    merged = {**base, **extra}
    for name, value in extra.items():
        if (
            name != "price_overrides"
            and isinstance(value, Mapping)
            and isinstance(base.get(name), Mapping)
        ):
            merged[name] = {**base[name], **value}
    return merged


def moved_to_client(name: str, where: str) -> str:
    """The one line that refuses a client setting given as a parameter of its own."""
    return (
        f"{where}{name} is a setting of the client mapping now: write client: "
        f"{{{name}: ...}} in a preset, or -p 'client={{{name}: ...}}' on the command line"
    )


# How a stage's model calls are sent (``execution``): ``interactive`` (one request at a time,
# list price), ``batch`` (the OpenAI Batch API: a file of requests, results within 24 h, half
# price) or ``flex`` (OpenAI Flex processing: interactive requests, slower, half price).
EXECUTION_MODES: tuple[str, ...] = ("interactive", "batch", "flex")


# Parameters that became one setting of a settings group: old name -> (group, setting).
MOVED_INTO_GROUPS: dict[str, tuple[str, str]] = {
    "heatmap_min_tokens": ("figure1_grid", "min_tokens"),
    "heatmap_max_tokens": ("figure1_grid", "max_tokens"),
    "heatmap_points": ("figure1_grid", "points"),
    "growth_turns": ("growing_conversation", "turns"),
    "growth_message_tokens": ("growing_conversation", "message_tokens"),
    "growth_ingest_every": ("growing_conversation", "ingest_every"),
    "gap_min_seconds": ("gap_grid", "min_seconds"),
    "gap_max_seconds": ("gap_grid", "max_seconds"),
    "gap_points": ("gap_grid", "points"),
    "hnsw_m": ("hnsw", "m"),
    "ef_construction": ("hnsw", "ef_construction"),
    "reader_prompt_tokens": ("assumptions", "reader_prompt_tokens"),
    "facts_per_user": ("assumptions", "facts_per_user"),
    **{
        f"explorer_{key}": ("explorer", key)
        for key in ("context_tokens", "questions", "scenario", "retention", "gap_seconds", "batch")
    },
    **{
        key: ("system_settings", key)
        for key in (
            "window",
            "ingest_interval",
            "mem0_top_k",
            "om_top_k",
            "observer_tokens",
            "reflector_tokens",
        )
    },
    "baseline_cells": ("extra_cells", "baselines"),
    "baseline_repeats": ("extra_cells", "baseline_repeats"),
    "workload_generator": ("workload", "generator"),
    "generator_model": ("workload", "model"),
    "curve_cell": ("figure_cells", "curve"),
    "cpa_cells": ("figure_cells", "cost_per_accuracy"),
    "accuracy_run_dir": ("accuracy_subset", "run_dir"),
    "accuracy_system_map": ("accuracy_subset", "system_map"),
    "subset_size": ("accuracy_subset", "subset_size"),
    "subset_questions": ("accuracy_subset", "subset_questions"),
    "real_datasets": ("real_histories", "datasets"),
    "real_run_dir": ("real_histories", "run_dir"),
    "real_max_conversations": ("real_histories", "max_conversations"),
}


def moved_into_group(name: str, where: str) -> str | None:
    """The one line that refuses a parameter that is now a setting of a group, else ``None``."""
    if name not in MOVED_INTO_GROUPS:
        return None
    group, key = MOVED_INTO_GROUPS[name]
    return (
        f"{where}{name} is the setting {key} of {group} now: write {group}: {{{key}: ...}} "
        f"in a preset, or -p '{group}={{{key}: ...}}' on the command line (the other "
        "settings keep their defaults)"
    )


class NotebookError(ValueError):
    """A notebook file that cannot be read as a pipeline notebook."""


@cache
def _declared(path: Path, mtime: float) -> dict[str, dict[str, Any]]:
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise NotebookError(
            f"{path}: not a valid notebook (JSON error at line {exc.lineno})"
        ) from exc
    cells = [
        c for c in nb.get("cells", []) if "parameters" in c.get("metadata", {}).get("tags", [])
    ]
    if not cells:
        return {}
    source = cells[0]["source"]
    source = "".join(source) if isinstance(source, list) else source
    lines = source.splitlines()
    declared: dict[str, dict[str, Any]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            name, annotation = node.target.id, ast.unparse(node.annotation)
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name, annotation = node.targets[0].id, "None"
        else:
            continue
        line = lines[node.end_lineno - 1]
        comment = line.split("#", 1)[1].strip() if "#" in line[node.end_col_offset :] else ""
        declared[name] = {
            "name": name,
            "inferred_type_name": annotation,
            "default": ast.get_source_segment(source, node.value) if node.value else None,
            "help": comment,
        }
    return declared


def notebook_parameters(path: Path) -> dict[str, dict[str, Any]]:
    """The parameters a notebook declares in its ``parameters`` cell (name → type, default, help).

    Read with ``ast`` rather than papermill so that a notebook can list its own parameters
    without importing papermill (seconds per notebook); a test checks both agree.
    """
    return _declared(path, path.stat().st_mtime)


def notebook_defaults(path: Path) -> dict[str, Any]:
    """The default value of each parameter ``path`` declares (literals, evaluated safely)."""
    out: dict[str, Any] = {}
    for name, info in notebook_parameters(path).items():
        try:
            out[name] = ast.literal_eval(info["default"]) if info["default"] else None
        except (ValueError, SyntaxError):
            continue
    return out


def current_values(namespace: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """The current values of the parameters ``path`` declares, read from ``namespace`` (a
    notebook passes ``globals()``), so a record cannot drift from the parameters cell.

    A settings group given in part (``-p 'explorer={questions: 30}'``) is completed from the
    cell's default, in ``namespace`` too, so the notebook reads every key."""
    for name, default in settings_groups(path).items():
        if name in namespace:
            namespace[name] = complete_group(name, namespace[name], default)  # type: ignore[index]
    return {name: namespace[name] for name in notebook_parameters(path) if name in namespace}


def settings_groups(path: Path) -> dict[str, dict[str, Any]]:
    """The parameters of ``path`` that are settings groups: a ``dict`` whose default names its
    keys (``figure1_grid: dict = {"min_tokens": 10000, ...}``), as opposed to an open mapping
    such as ``client`` or ``price_overrides`` whose default is empty."""
    return {
        name: value
        for name, value in notebook_defaults(path).items()
        if isinstance(value, dict)
        and value
        and notebook_parameters(path)[name]["inferred_type_name"] == "dict"
    }


def complete_group(name: str, value: Any, default: Mapping[str, Any]) -> dict[str, Any]:
    """``value`` over ``default``, key by key; ``ValueError`` in one line for a value that is not
    a mapping, an unknown key (with the known ones) or a value of the wrong type."""
    if not isinstance(value, Mapping):
        raise ValueError(
            f"parameter {name}={value!r}: expected a mapping of its settings ({', '.join(default)})"
        )
    unknown = [key for key in value if key not in default]
    if unknown:
        raise ValueError(
            f"parameter {name}: unknown setting(s) {unknown}; its settings are {', '.join(default)}"
        )
    merged = {**default, **value}
    for key, given in value.items():
        merged[key] = _like(f"{name}[{key!r}]", given, default[key])
    return merged


def _like(where: str, value: Any, default: Any) -> Any:
    """``value`` checked against the type of ``default`` (an int is taken for a float)."""
    kind = type(default)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if default is None or isinstance(value, kind) and (kind is bool) == isinstance(value, bool):
        return value
    raise ValueError(
        f"parameter {where}={value!r}: expected {_KIND_NAMES.get(kind, kind.__name__)}"
        f", like the default {default!r}"
    )


_KIND_NAMES = {
    int: "an integer",
    float: "a number",
    bool: "true or false",
    str: "a string",
    list: "a list",
    dict: "a mapping",
}


def shared_params(namespace: Mapping[str, Any]) -> dict[str, Any]:
    """The client parameters a notebook holds (``make_client(run, **shared_params(globals()))``):
    the shared ones and its ``client`` mapping, ``price_overrides`` in its full form
    (:func:`normalise_price_overrides`). An unknown ``client`` key is an error naming the known
    ones."""
    shared = {name: namespace[name] for name in SHARED_PARAMETERS if name in namespace}
    settings = dict(namespace.get("client") or {})
    unknown = sorted(set(settings) - set(CLIENT_SETTINGS))
    if "tpm_limit" in unknown:
        raise ValueError(
            "client: tpm_limit is per model now: client: {rate_limits: {MODEL: {tpm: N, rpm: N}}}"
        )
    if unknown:
        raise ValueError(
            f"client: unknown setting(s) {unknown}; the client's settings are "
            f"{', '.join(CLIENT_SETTINGS)}"
        )
    shared.update(settings)
    if "price_overrides" in shared:
        shared["price_overrides"] = normalise_price_overrides(shared["price_overrides"])
    if "execution" in shared:
        shared["execution"] = normalise_execution(shared["execution"])
    return shared


def normalise_execution(value: Any) -> dict[str, str]:
    """``execution`` as a mapping of ledger stage to mode, every stage named.

    Stages left out are ``interactive``; ``{"*": "batch"}`` sets every stage at once (stages
    named beside it win). Raises ``ValueError`` naming the entry and the valid choices."""
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise ValueError(
            f"execution={value!r}: expected a mapping of stage to mode, e.g. "
            '{"extract": "batch", "judge": "batch"}'
        )
    out = dict.fromkeys(STAGES, "interactive")
    default = value.get("*")
    for stage, mode in value.items():
        if stage != "*" and stage not in STAGES:
            raise ValueError(
                f"execution[{stage!r}]: unknown stage; stages are "
                f"{', '.join(STAGES)} (or * for all)"
            )
        if mode not in EXECUTION_MODES:
            raise ValueError(
                f"execution[{stage!r}]={mode!r}: choose one of {', '.join(EXECUTION_MODES)}"
            )
    if default is not None:
        out = dict.fromkeys(STAGES, str(default))
    out.update({str(k): str(v) for k, v in value.items() if k != "*"})
    return out


def normalise_price_overrides(value: Any) -> dict[str, dict[str, Any]]:
    """``price_overrides`` with each model's price as a mapping of fields (USD per 1M tokens).

    A bare number is the shorthand for a model billed that much per token in and out, so
    ``{"llama3.1:8b": 0}`` declares a free local model. Raises ``ValueError`` naming the entry."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(
            f"price_overrides={value!r}: expected a mapping of model to price, "
            'e.g. {"llama3.1:8b": 0} or {"my-model": {"input": 0.2, "output": 0.6}}'
        )
    out: dict[str, dict[str, Any]] = {}
    for model, price in value.items():
        if isinstance(price, bool) or not isinstance(price, (int, float, Mapping)):
            raise ValueError(
                f"price_overrides[{model!r}]={price!r}: expected a number (USD per 1M "
                "tokens, 0 = free) or a mapping such as {input: 0.2, output: 0.6}"
            )
        if isinstance(price, Mapping):
            out[str(model)] = dict(price)
        elif price < 0:
            raise ValueError(f"price_overrides[{model!r}]={price!r}: a price cannot be negative")
        else:
            out[str(model)] = {"input": float(price), "output": float(price)}
    return out


# Which parameter names the model of each ledger stage (memcost.calls.STAGES), and its default.
STAGE_MODEL_PARAMETERS: dict[str, tuple[tuple[str, Any], ...]] = {
    "extract": (("extraction_model", EXTRACTION_MODEL),),
    "update": (("extraction_model", EXTRACTION_MODEL),),
    "embed": (("embedding_model", EMBEDDING_MODEL),),
    "read": (("reader_model", READER_MODEL),),
    "long_context": (("models", []), ("baseline_models", [])),
    "judge": (("judge_model", JUDGE_MODEL),),
}
# Every parameter that names a model some stage calls, in stage order.
MODEL_PARAMETERS: tuple[str, ...] = tuple(
    dict.fromkeys(name for pairs in STAGE_MODEL_PARAMETERS.values() for name, _ in pairs)
)


def stage_models(stage: str, params: Mapping[str, Any]) -> Iterator[str]:
    """The models ``stage``'s calls go to under ``params`` (the notebooks' defaults filled in)."""
    for name, default in STAGE_MODEL_PARAMETERS.get(stage, ()):
        value = params.get(name, default)
        for model in value if isinstance(value, (list, tuple)) else [value]:
            if model:
                yield str(model)


def backend_of(model: str, params: Mapping[str, Any]) -> str:
    """The backend ``params`` route ``model`` to (``model_backends`` first, then ``backend``)."""
    return str(
        per_model(client_option(params, "model_backends"), model, params.get("backend", "offline"))
    )
