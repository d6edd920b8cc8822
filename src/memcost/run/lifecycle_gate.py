"""Before a run spends anything: is every model it will pay for still served, and known?

Reads the preset's parameters (over the notebooks' defaults), keeps the models an API backend
will serve, and compares their shutdown dates (the registry's, and ``GET /v1/models``' when a
key is present) with today (:mod:`memcost.catalog`, ``MEMCOST_TODAY`` to inject a date). A
shut-down model stops the run with a message naming the successor preset; a model the registry
does not know (and the preset does not declare in ``model_capabilities``) stops it with what to
add. Offline runs call no model and pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any

from memcost import catalog
from memcost.catalog import UnknownModelError, UnknownPriceError, model_info, price_for
from memcost.llm.providers import EndpointClient, lookup_key, resolve_endpoint
from memcost.params import backend_of, client_option, notebook_defaults
from memcost.paths import PARAMS_DIR
from memcost.run.presets import Preset, PresetError, selected_steps

LISTING_TIMEOUT_S = 10.0


def paid_models(
    preset: Preset, notebooks: Mapping[str, Path], *, paid_only: bool = True
) -> dict[str, dict[str, Any]]:
    """``{model: the parameters it runs under}`` for every model an API backend will serve
    (with ``paid_only=False``: every model the preset names, offline ones too)."""
    steps = selected_steps(preset, notebooks)
    found: dict[str, dict[str, Any]] = {}
    for step in steps:
        defaults = notebook_defaults(notebooks[step])
        for dataset in preset.datasets or [None]:
            given = preset.parameters_for(dataset)
            params = {**defaults, **{k: v for k, v in given.items() if k in defaults}}
            for model in catalog.run_models(params):
                if not paid_only or backend_of(model, params) != "offline":
                    found.setdefault(model, params)
    return found


def _served_dates(models: Mapping[str, Mapping[str, Any]]) -> dict[str, str | None]:
    """``GET /v1/models`` of each OpenAI endpoint a key is present for (``{}`` on any trouble:
    the registry's dates still apply)."""
    served: dict[str, str | None] = {}
    asked: set[str] = set()
    for model, params in models.items():
        backend = backend_of(model, params)
        if backend != "openai":
            continue
        endpoint = resolve_endpoint(
            backend, base_url=str(params.get("base_url", "")),
            api_key_env=str(client_option(params, "api_key_env")),
            primary=backend == params.get("backend"),
            custom_routed="custom" in (client_option(params, "model_backends") or {}).values(),
        )  # fmt: skip
        if endpoint.identity in asked or not lookup_key(endpoint.key_env):
            continue
        asked.add(endpoint.identity)
        try:
            served.update(EndpointClient(endpoint, timeout_s=LISTING_TIMEOUT_S).list_models())
        except Exception as exc:  # noqa: BLE001 - the listing is a second opinion only
            print(f"memcost: could not list models at {endpoint.host} ({exc}); "
                  "using the registry's shutdown dates", flush=True)  # fmt: skip
    return served


def check_lifecycle(
    preset: Preset, notebooks: Mapping[str, Path], *, on: str | date | None = None
) -> None:
    """Raise :class:`PresetError` before anything is sent when a paid model is shut down (or
    unknown); print a warning when one shuts down within :data:`catalog.WARN_DAYS` days."""
    day = catalog.today(on)
    models = paid_models(preset, notebooks)
    unknown = []
    for model, params in models.items():
        try:
            model_info(model, client_option(params, "model_capabilities") or None)
        except UnknownModelError as exc:
            unknown.append(str(exc))
    if unknown:
        raise PresetError(f"{preset.path}: cannot start.\n" + "\n".join(unknown))
    # A provider's shutdown ends its own service (and OpenRouter's, which resells it); a server
    # of your own (custom) serves whatever it holds.
    hosted = {m: p for m, p in models.items() if backend_of(m, p) != "custom"}
    statuses = [catalog.status(m, day) for m in hosted]
    if not any(s.shut_down for s in statuses):  # a second opinion from the provider itself
        served = _served_dates(hosted)
        statuses = [catalog.status(m, day, served) for m in hosted]
    gone = [s for s in statuses if s.shut_down]
    if gone:
        available = [p.stem for p in PARAMS_DIR.glob("*.yaml")]
        successor = catalog.successor_preset(preset.name, available)
        raise PresetError(catalog.refusal(preset.name, gone, successor, day))
    for s in statuses:
        if s.days_left is not None and s.days_left <= catalog.WARN_DAYS:
            print(f"memcost: warning: {s.describe()} ({s.days_left} days left)", flush=True)
    print(price_lines(list(paid_models(preset, notebooks, paid_only=False))), flush=True)


def price_lines(models: list[str]) -> str:
    """The list prices the run's estimates use, one line per model (USD per 1M tokens)."""
    lines = ["memcost: list prices used (USD per 1M tokens: input / cached input / output):"]
    for model in models:
        try:
            p = price_for(model)
        except UnknownPriceError as exc:
            lines.append(f"  {model}: {exc}")
            continue
        cached = "-" if p.cached_input is None else f"{p.cached_input:g}"
        lines.append(f"  {model}: {p.input:g} / {cached} / {p.output:g} (dated {p.date})")
    return "\n".join(lines)
