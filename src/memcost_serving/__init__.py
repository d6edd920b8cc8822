"""The serving-cost study (notebook 06), after *Total Recall at What Cost?*: memory as a service,
replayed turn by turn (docs/architecture.md, "The serving-cost study")."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memcost.plugins import Plugin, Section
from memcost_serving.report import section_serving, serving_brief
from memcost_serving.systems import check_served

HERE = Path(__file__).parent


def check_parameters(params: Mapping[str, Any]) -> None:
    """Notebook 06's ``systems`` are served systems (notebook 04's are answer systems)."""
    if isinstance(params.get("systems"), list):
        try:
            check_served(params["systems"])
        except ValueError as exc:
            raise ValueError(f"systems: {exc}") from None


PLUGIN = Plugin(
    name="serving",
    notebooks=(HERE / "notebooks" / "06_serving_cost_study.ipynb",),
    presets=tuple(sorted((HERE / "presets").glob("*.yaml"))),
    report_sections=(
        Section(
            "serving", lines=section_serving, after="headline", brief=serving_brief, leads=True
        ),
    ),
    parameter_checks=(check_parameters,),
    hints={
        "estimate": "notebook 06 prices its own calls: before any paid call it replays its grid "
        "offline, prints the bill and stops if it exceeds max_cost_usd"
    },
)
