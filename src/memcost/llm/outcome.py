"""What one call produced before the stage's parsing: the value every serving path returns."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memcost.llm.requests import Usage


@dataclass
class Outcome:
    """One call's outcome (offline, cached or sent), before the stage's parsing."""

    key: str
    backend: str
    provider: str
    usage: Usage
    cached: bool
    latency_s: float
    attempts: int
    text: str = ""
    vectors: np.ndarray | None = None
    error: str | None = None
    served_model: str | None = None
    finish_reason: str | None = None
    failure_kind: str | None = None  # length | content_filter | refusal | rejected (HTTP 4xx)
    billed_usd: float | None = None  # the provider's own charge (OpenRouter's usage.cost)
    served_by: str | None = None  # the upstream that served it (OpenRouter's provider)
    execution: str = "interactive"  # how it was sent: interactive | batch | flex (its price)
