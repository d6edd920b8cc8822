"""Generation settings of a chat request, by model family (shared by memory and retrieval)."""

from __future__ import annotations

from typing import Any

from memcost.models import is_gpt5_family


def generation_params(model: str, reasoning_effort: str) -> dict[str, Any]:
    """GPT-5 models take a reasoning effort and no temperature; others get temperature 0."""
    params: dict[str, Any] = {}
    if reasoning_effort:
        params["reasoning_effort"] = reasoning_effort
    if not is_gpt5_family(model):
        params["temperature"] = 0.0
    return params
