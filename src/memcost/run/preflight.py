"""Checks before a run spends anything: credentials for every backend, and the estimated bill.

Both stop the run with a :class:`PresetError` that says what to change.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from memcost.catalog import UnknownPriceError
from memcost.costs.estimate import (
    bill,
    estimate_run,
    fitting_change,
    over_budget_line,
    summary_text,
)
from memcost.io import write_csv
from memcost.llm.providers import check_credentials
from memcost.llm.requests import MissingCredentials
from memcost.params import client_option, merge_parameters, notebook_parameters
from memcost.paths import RunPaths
from memcost.run.lifecycle_gate import check_lifecycle
from memcost.run.presets import Preset, PresetError, selected_steps


def preflight_credentials(preset: Preset, notebooks: Mapping[str, Path]) -> None:
    """Stop before anything runs (or is paid for) when a backend the preset uses has no key.

    The message names each missing variable and the offline alternative.
    """
    steps = selected_steps(preset, notebooks)
    if not any("backend" in notebook_parameters(notebooks[s]) for s in steps):
        return
    problems: list[str] = []
    for dataset in preset.datasets or [None]:
        params = preset.parameters_for(dataset)
        try:
            check_credentials(
                str(params.get("backend", "offline")),
                base_url=str(params.get("base_url", "")),
                api_key_env=str(client_option(params, "api_key_env")),
                model_backends=client_option(params, "model_backends") or None,
            )
        except (MissingCredentials, ValueError) as exc:
            # ValueError: an endpoint that cannot be used (custom without base_url, ...)
            if str(exc) not in problems:
                problems.append(str(exc))
    if problems:
        raise PresetError(
            f"{preset.path}: cannot start, a backend is not set up.\n" + "\n".join(problems)
        )
    check_lifecycle(preset, notebooks)  # shut-down or unknown models: stop before any call


def uses_paid_backend(params: Mapping[str, Any]) -> bool:
    backends = {str(params.get("backend", "offline"))}
    backends |= {str(v) for v in (client_option(params, "model_backends") or {}).values()}
    return bool(backends - {"offline"})


def check_estimate(preset: Preset, run: RunPaths, steps: Collection[str] | None = None) -> None:
    """After notebook 00 (free): print what the rest of the run (its ``steps``) will cost and
    stop before any paid call when that exceeds ``max_cost_usd``."""
    prepared = {
        name: (run.dataset(name), preset.parameters_for(name))
        for name in preset.datasets
        if run.dataset(name).questions.is_file()
    }
    try:
        estimate = estimate_run(prepared, steps=steps)
    except UnknownPriceError as exc:  # validate_run checks the prices; a model it did not see
        raise PresetError(
            f"{exc}; declare it with -p 'price_overrides={{\"<model>\": 0}}' "
            '(free) or {"<model>": {input: ..., output: ...}} (USD per 1M '
            "tokens)"
        ) from None
    if estimate.empty:
        return
    write_csv(run.table.estimate_before_run, estimate)
    paid = any(uses_paid_backend(params) for _, params in prepared.values())
    budget = preset.parameters.get("max_cost_usd", 50.0)
    print("\n" + summary_text(estimate, max_cost_usd=budget if paid else None), flush=True)
    if not paid:
        print(
            "  (offline backend: nothing is spent; these are the configured models' prices)",
            flush=True,
        )
        return
    # the bill with the chosen execution modes (batch, flex) when every stage has its price
    total = bill(estimate)
    if budget is not None and total > float(budget):

        def recompute(overrides: Mapping[str, Any]) -> Any:
            return estimate_run(
                {
                    name: (ds, merge_parameters(params, overrides))
                    for name, (ds, params) in prepared.items()
                },
                steps=steps,
            )

        first = next(iter(prepared.values()))[1]
        raise PresetError(
            over_budget_line(
                preset.path, total, float(budget), fitting_change(recompute, first, float(budget))
            )
        )
