"""Model lifecycle: is each model a run will call still served today, and what replaces it.

The paper's models (``gpt-5``, ``gpt-5-mini``, ``gpt-5-nano`` and their dated snapshots) are
shut down on 2026-12-11 (https://developers.openai.com/api/docs/deprecations, notice of
2026-06-11; checked 2026-11-30). The registry (:mod:`memcost.models`) holds each model's
``shutdown_date`` and ``successor``; ``GET /v1/models`` may report a ``shutdown_date`` too (the
caller fetches it, this module only compares). Today's date can be injected (``MEMCOST_TODAY``
in the environment, YYYY-MM-DD, or the ``today`` argument) so the check can be tried before the
day comes.

A ``paper_<dataset>`` preset keeps the paper's exact snapshots; after their shutdown it refuses
to start and names ``current_<dataset>``, the same run with the recommended successors.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from memcost.models import PAPER_SETTINGS, canonical_name, is_known, model_info

TODAY_ENV = "MEMCOST_TODAY"
WARN_DAYS = 30  # say so when a model has fewer days left than this
# Notebook parameters that name a model the run calls (lists: every entry).
MODEL_PARAMETERS = (
    "extraction_model", "reader_model", "embedding_model", "judge_model", "models",
)  # fmt: skip
BASELINE_SWITCHES = ("include_rolling_window", "include_no_context", "include_oracle")


def today(value: str | date | None = None) -> date:
    """``value``, else ``$MEMCOST_TODAY``, else the system date."""
    value = value if value is not None else os.environ.get(TODAY_ENV) or None
    if value is None:
        return date.today()
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value).strip())
    except ValueError:
        raise ValueError(f"{TODAY_ENV} must be a date as YYYY-MM-DD, got {value!r}") from None


@dataclass(frozen=True)
class ModelStatus:
    model: str
    shutdown_date: date | None
    successor: str | None
    source: str  # "registry" | "/v1/models"
    days_left: int | None

    @property
    def shut_down(self) -> bool:
        return self.days_left is not None and self.days_left <= 0

    def describe(self) -> str:
        when = "was shut down on" if self.shut_down else "shuts down on"
        instead = f"; its successor is {self.successor}" if self.successor else ""
        return f"{self.model} {when} {self.shutdown_date} ({self.source}){instead}"


def status(model: str, on: date, served: Mapping[str, str | None] | None = None) -> ModelStatus:
    """``model``'s lifecycle on day ``on``. ``served`` is ``GET /v1/models``' answer
    (``{id: shutdown_date}``), which wins over the registry when it names a date."""
    info = model_info(model) if is_known(model) else None
    reported = _served_date(model, served)
    registered = info.shutdown_date if info else None
    chosen, source = (reported, "/v1/models") if reported else (registered, "registry")
    when = date.fromisoformat(chosen) if chosen else None
    return ModelStatus(
        model, when, info.successor if info else None, source,
        (when - on).days if when else None,
    )  # fmt: skip


def _served_date(model: str, served: Mapping[str, str | None] | None) -> str | None:
    for name, when in (served or {}).items():
        if when and (name == model or canonical_name(name) == canonical_name(model)):
            return str(when)[:10]
    return None


def run_models(params: Mapping[str, Any]) -> list[str]:
    """The models a notebook's parameters call (baseline models only when a baseline runs)."""
    names: list[str] = []
    keys = list(MODEL_PARAMETERS)
    if any(params.get(switch) for switch in BASELINE_SWITCHES):
        keys.append("baseline_models")
    for key in keys:
        value = params.get(key)
        for name in [value] if isinstance(value, str) else list(value or []):
            if name and str(name) not in names:
                names.append(str(name))
    return names


def successor_preset(preset_name: str, available: Iterable[str]) -> str | None:
    """``paper_locomo`` → ``current_locomo``, ``verify_locomo`` → ``verify_current_locomo``,
    when that preset exists."""
    if preset_name.startswith("paper_"):
        candidate = "current_" + preset_name.removeprefix("paper_")
    elif preset_name.startswith("verify_") and not preset_name.startswith("verify_current_"):
        candidate = "verify_current_" + preset_name.removeprefix("verify_")
    else:
        return None
    return candidate if candidate in set(available) else None


def refusal(preset_name: str, gone: list[ModelStatus], successor: str | None, on: date) -> str:
    """The message a preset stops with when a model it calls is shut down."""
    lines = [f"preset {preset_name}: {len(gone)} model(s) it calls are no longer served "
             f"(today is {on}; set {TODAY_ENV}=YYYY-MM-DD to check another day). Nothing has "
             "been sent or spent."]  # fmt: skip
    lines += [f"  - {s.describe()}" for s in gone]
    if successor:
        lines.append(f"Run the same study with the recommended successors: "
                     f"python -m memcost run --params {successor}")  # fmt: skip
    else:
        lines.append("Name the successor models in the preset (or override them with -p).")
    return "\n".join(lines)


def paper_models() -> set[str]:
    """Every model the paper's settings name (snapshot names as the paper wrote them)."""
    found: set[str] = set()
    for settings in PAPER_SETTINGS.values():
        found.update(run_models(settings))
    return found


def stands_in_for(model: str) -> str | None:
    """The paper model whose registered successor ``model`` is (``None`` if none)."""
    for paper_model in sorted(paper_models()):
        if is_known(paper_model) and model_info(paper_model).successor:
            if canonical_name(model_info(paper_model).successor) == canonical_name(model):
                return paper_model
    return None


def stand_ins(parameters_by_step: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """``{paper model: the successor this run used instead}`` over every step's parameters."""
    found: dict[str, str] = {}
    for params in parameters_by_step.values():
        for model in run_models(params or {}):
            paper_model = stands_in_for(model)
            if paper_model is not None:
                found[paper_model] = model
    return found
