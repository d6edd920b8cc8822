"""Notebook parameters as data: what each notebook's parameters cell declares, checked as one
pydantic model (docs/architecture.md, "Presets and parameters")."""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    create_model,
)

from memcost.calls import STAGES
from memcost.catalog import checked_override, per_model, price_problem
from memcost.paper import EMBEDDING_MODEL, EXTRACTION_MODEL, JUDGE_MODEL, READER_MODEL

# The client parameters every notebook that calls a model declares on their own: where calls go
# and what they may cost (docs/architecture.md, "Parameters every notebook shares").
SHARED_PARAMETERS: tuple[str, ...] = ("backend", "base_url", "max_cost_usd", "price_overrides")
# How the run's store of calls serves answers: reads and writes (read_write), only reads (a
# call without a stored answer is an error: replay_only), or never (every call is sent: off).
CACHE_MODES = ("read_write", "replay_only", "off")
# What becomes of requests a batch did not answer: batched again, or sent interactively.
BATCH_RETRY_MODES = ("batch", "interactive")
# How a stage's model calls are sent (``execution``): ``interactive`` (one request at a time,
# list price), ``batch`` (the OpenAI Batch API: a file of requests, results within 24 h, half
# price) or ``flex`` (OpenAI Flex processing: interactive requests, slower, half price).
EXECUTION_MODES: tuple[str, ...] = ("interactive", "batch", "flex")
_STRICT = ConfigDict(extra="forbid", strict=True)


def _number_as_text(value: Any) -> Any:
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    return str(value) if is_number else value


def _int_as_float(value: Any) -> Any:
    is_int = isinstance(value, int) and not isinstance(value, bool)
    return float(value) if is_int else value


Text = Annotated[str, BeforeValidator(_number_as_text)]
Number = Annotated[float, Strict(), BeforeValidator(_int_as_float)]


class ClientSettings(BaseModel):
    """The client's settings besides the shared ones, in one ``client`` mapping."""

    model_config = _STRICT

    api_key_env: Text = Field("", description="variable holding the key; empty: the provider's")
    model_backends: dict[str, str] = Field(
        {}, description="per-model provider, e.g. {openai/gpt-oss-120b: openrouter}"
    )
    cache_mode: Literal[CACHE_MODES] = Field(
        "read_write", description="how the run's store of calls serves stored answers"
    )
    reuse_runs: list[str] = Field([], description="other runs whose stored answers may serve")
    max_concurrency: int = Field(
        32, ge=1, description="the most requests in flight (pacing decides how many below it)"
    )
    request_timeout_s: float = Field(
        0.0, ge=0, description="seconds one attempt may take; 0 sizes it per request"
    )
    model_capabilities: dict[str, dict] = Field(
        {},
        description="models the catalog does not know, e.g. {llama3.1:8b: {context_window: 32768}}",
    )
    provider_routing: dict[str, Any] = Field({}, description="OpenRouter provider pinning")
    rate_limits: dict[str, Any] = Field(
        {}, description="the account's limits per model, e.g. {gpt-5-mini: {rpm: 500, tpm: 500000}}"
    )
    max_retries: int = Field(8, ge=0, description="retries of a failed attempt (the openai SDK's)")
    prefix_requests_per_minute: int = Field(15, ge=1, description="per conversation prefix")
    execution: dict[str, Any] = Field(
        {}, description="per stage: interactive | batch | flex, e.g. {judge: batch}"
    )
    batch_retry: Literal[BATCH_RETRY_MODES] = Field("batch", description="unanswered requests")
    max_wait_hours: float = Field(24.0, gt=0, description="the longest wait for batches")
    batch_poll_s: float = Field(60.0, gt=0, description="seconds between looks at a batch")
    batch_queue_tokens: dict[str, Any] = Field({}, description="enqueued-token limit per model")


CLIENT_SETTINGS: tuple[str, ...] = tuple(ClientSettings.model_fields)


def client_option(params: Mapping[str, Any], name: str) -> Any:
    """A client setting of the parameters, else its default."""
    return (params.get("client") or {}).get(name, ClientSettings.model_fields[name].default)


def merge_parameters(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``extra`` over ``base``, mappings merged key by key (a per-dataset block, ``-p
    'client={...}'``, a settings group), ``price_overrides`` replaced whole."""
    merged = {**base, **extra}
    for name, value in extra.items():
        if (
            name != "price_overrides"
            and isinstance(value, Mapping)
            and isinstance(base.get(name), Mapping)
        ):
            merged[name] = {**base[name], **value}
    return merged


# --- One model of a run's parameters -----------------------------------------------------------

_TYPES: dict[str, Any] = {
    "int": Annotated[int, Strict()],
    "float": Number,
    "bool": Annotated[bool, Strict()],
    "str": Text,
    "list": list,
    "dict": dict,
}
_EXPECTED = {
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "string_type": "a string",
    "list_type": "a list (YAML, e.g. [a, b])",
    "dict_type": "a dict (YAML, e.g. {a: b})",
    "model_type": "a mapping of its settings",
}


def _field(
    name: str,
    annotation: str,
    default: Any,
    choices: Mapping[str, tuple[Any, ...]],
    ranges: Mapping[str, tuple[float, float]],
) -> tuple[Any, Any]:
    kind = _TYPES.get(annotation.split("[", 1)[0].strip(), Any)
    constraints: dict[str, Any] = {}
    if name in choices:
        allowed = Literal[tuple(choices[name])]
        kind, constraints = (list[allowed], {"min_length": 1}) if kind is list else (allowed, {})
    if name in ranges:
        low, high = ranges[name]
        constraints = {"ge": low, **({"le": high} if high != math.inf else {})}
    if name == "client":
        kind = ClientSettings
    elif kind is dict and isinstance(default, dict) and default:  # a settings group
        kind = group_model(name, default)
    return kind, Field(default, **constraints)


def group_model(name: str, default: Mapping[str, Any]) -> type[BaseModel]:
    fields = {
        key: (_TYPES.get(type(value).__name__, Any) if value is not None else Any, value)
        for key, value in default.items()
    }
    return create_model(name, __config__=_STRICT, **fields)


def parameters_model(
    paths: tuple[Path, ...],
    choices: Mapping[str, tuple[Any, ...]] | None = None,
    ranges: Mapping[str, tuple[float, float]] | None = None,
) -> type[BaseModel]:
    """The parameters the notebooks at ``paths`` declare as one model (the first declaration wins),
    with the study's ``choices`` and ``ranges``."""
    fields: dict[str, tuple[Any, Any]] = {}
    for path in paths:
        defaults = notebook_defaults(path)
        for name, info in notebook_parameters(path).items():
            if name not in fields:
                annotation = info["inferred_type_name"]
                default = defaults.get(name)
                fields[name] = _field(name, annotation, default, choices or {}, ranges or {})
    return create_model("RunParameters", __config__=_STRICT, **fields)


def validate_parameters(
    model: type[BaseModel], values: Mapping[str, Any], choices: Mapping[str, tuple] | None = None
) -> dict[str, Any]:
    """``values`` checked by ``model``, settings groups completed; :class:`ValueError` in
    one line."""
    try:
        checked = model.model_validate(dict(values))
    except ValidationError as exc:
        raise ValueError(one_line(exc, model, choices or {}, values)) from None
    out = {}
    for name in values:
        value = getattr(checked, name)
        if isinstance(value, ClientSettings):
            value = value.model_dump(exclude_unset=True)  # only what was given: the rest default
        elif isinstance(value, BaseModel):
            value = value.model_dump()
        out[name] = value
    return out


def one_line(
    exc: ValidationError,
    model: type[BaseModel],
    choices: Mapping[str, tuple],
    values: Mapping[str, Any] | None = None,
) -> str:
    """pydantic's first problem as one line: the parameter, the value, what is expected, the valid
    choices or names."""
    error = exc.errors()[0]
    loc = [str(part) for part in error["loc"] if not isinstance(part, int)]
    where, value, kind = ".".join(loc), error.get("input"), error["type"]
    owner: Any = model
    for part in loc[:-1]:
        owner = owner.model_fields[part].annotation
    if kind == "extra_forbidden":
        known = ", ".join(owner.model_fields)
        group = ".".join(loc[:-1])
        whose = "the client's" if group == "client" else "its"
        if not group:
            return f"unknown parameter {loc[-1]!r}; the parameters are {known}"
        return f"parameter {group}: unknown setting(s) [{loc[-1]!r}]; {whose} settings are {known}"
    if kind in ("literal_error", "too_short"):
        listed = isinstance(value, list) or len(error["loc"]) > len(loc)
        top = loc[-1]
        if listed and not isinstance(value, list):
            value = (values or {}).get(top) if len(loc) == 1 else None
        expected = "a list of names" if listed else "one of the choices"
        shown = f"={value!r}" if value is not None else ""
        literal = owner.model_fields[top].annotation
        allowed = choices.get(top) or get_args(get_args(literal)[0] if listed else literal)
        return f"parameter {where}{shown}: expected {expected}; valid choices: " + ", ".join(
            map(str, allowed)
        )
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        limits = {
            key: getattr(m, key)
            for m in owner.model_fields[loc[-1]].metadata
            for key in ("ge", "gt", "le")
            if getattr(m, key, None) is not None
        }
        if "le" in limits:
            bound = f"from {limits.get('ge', limits.get('gt', 0)):g} to {limits['le']:g}"
        elif "gt" in limits:
            bound = f"above {limits['gt']:g}"
        else:
            bound = f"at least {limits.get('ge', 0):g}"
        return f"parameter {where}={value!r}: expected a number {bound}"
    if kind == "model_type":
        settings = ", ".join(owner.model_fields[loc[-1]].annotation.model_fields)
        return f"parameter {where}={value!r}: expected a mapping of its settings ({settings})"
    expected = _EXPECTED.get(kind, error["msg"])
    return f"parameter {where}={value!r}: expected {expected}"


def settings_groups(path: Path) -> dict[str, dict[str, Any]]:
    """The parameters of ``path`` that are settings groups (a ``dict`` whose default names its keys,
    not an open mapping such as ``client``)."""
    declared = notebook_parameters(path)
    return {
        name: value
        for name, value in notebook_defaults(path).items()
        if isinstance(value, dict) and value and declared[name]["inferred_type_name"] == "dict"
    }


def current_values(namespace: dict[str, Any], path: Path) -> dict[str, Any]:
    """The values of the parameters ``path`` declares, read from ``namespace`` (``globals()``),
    settings groups given in part completed there too."""
    for name, default in settings_groups(path).items():
        if name in namespace:
            namespace[name] = validate_parameters(
                create_model(
                    "Group", __config__=_STRICT, **{name: (group_model(name, default), ...)}
                ),
                {name: namespace[name]},
            )[name]
    return {name: namespace[name] for name in notebook_parameters(path) if name in namespace}


def shared_params(namespace: Mapping[str, Any]) -> dict[str, Any]:
    """The client parameters a notebook holds, its ``client`` mapping checked, ``price_overrides``
    and ``execution`` in full."""
    shared = {name: namespace[name] for name in SHARED_PARAMETERS if name in namespace}
    model = create_model("Client", __config__=_STRICT, client=(ClientSettings, ...))
    shared.update(
        validate_parameters(model, {"client": dict(namespace.get("client") or {})})["client"]
    )
    if "price_overrides" in shared:
        shared["price_overrides"] = normalise_price_overrides(shared["price_overrides"])
    if "execution" in shared:
        shared["execution"] = normalise_execution(shared["execution"])
    return shared


class NotebookError(ValueError): ...


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
    """The parameters a notebook declares (name → type, default, help), read with ``ast``."""
    return _declared(path, path.stat().st_mtime)


def notebook_defaults(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, info in notebook_parameters(path).items():
        try:
            out[name] = ast.literal_eval(info["default"]) if info["default"] else None
        except (ValueError, SyntaxError):
            continue
    return out


def normalise_execution(value: Any) -> dict[str, str]:
    """``execution`` as ledger stage → mode for every stage (``{"*": "batch"}`` sets all; named
    stages win); ``ValueError`` naming the entry."""
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
    """``price_overrides`` as mappings of fields; a bare number prices input, cached input and
    output alike (``{"llama3.1:8b": 0}``: free)."""
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
            out[str(model)] = checked_override(model, price)
        elif problem := price_problem("input", price):
            raise ValueError(f"price_overrides[{model!r}]={price!r} {problem}")
        else:
            # every token at that price: cached input too (a free model's cache costs nothing)
            out[str(model)] = dict.fromkeys(("input", "cached_input", "output"), float(price))
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
    for name, default in STAGE_MODEL_PARAMETERS.get(stage, ()):
        value = params.get(name, default)
        for model in value if isinstance(value, (list, tuple)) else [value]:
            if model:
                yield str(model)


def backend_of(model: str, params: Mapping[str, Any]) -> str:
    return str(
        per_model(client_option(params, "model_backends"), model, params.get("backend", "offline"))
    )
