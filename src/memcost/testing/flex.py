"""Flex processing on the local test server: ``service_tier`` echoed, capacity that runs out.

A chat request with ``service_tier: "flex"`` is answered like any other, with ``service_tier``
``"flex"`` in the reply (the API echoes the tier that served it; ``"default"`` otherwise). Set
:attr:`FlexTier.unavailable` to answer the next that many Flex requests with OpenAI's HTTP 429
``resource_unavailable`` (nothing billed), and :attr:`FlexTier.models` to the models that offer
Flex (others get the API's 400 for an unsupported ``service_tier``). :attr:`FlexTier.events`
logs what happened to each Flex request, in arrival order: ``("unavailable" | "served" |
"unsupported", model)``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from memcost.catalog import FLEX_UNAVAILABLE_CODE

FLEX = "flex"


@dataclass
class FlexTier:
    unavailable: int = 0  # answer this many more Flex requests with 429 resource_unavailable
    models: frozenset[str] | None = None  # models that offer Flex (None: every model)
    events: list[tuple[str, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def refuse(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """``(status, error body)`` when this request is refused, else ``None`` (answer it)."""
        if body.get("service_tier") != FLEX:
            return None
        model = str(body.get("model"))
        with self._lock:
            if self.models is not None and model not in self.models:
                self.events.append(("unsupported", model))
                return 400, _error(
                    f"service_tier 'flex' is not supported for model {model}.",
                    "invalid_request_error",
                    "unsupported_value",
                    "service_tier",
                )
            if self.unavailable > 0:
                self.unavailable -= 1
                self.events.append(("unavailable", model))
                return 429, _error(
                    "Resource unavailable: Flex processing lacks capacity for this request; "
                    "retry later or use the default service tier.",
                    "rate_limit_error",
                    FLEX_UNAVAILABLE_CODE,
                    None,
                )
            self.events.append(("served", model))
        return None

    @staticmethod
    def tier(body: dict[str, Any]) -> str:
        """The ``service_tier`` of the reply: the one that served the request."""
        return FLEX if body.get("service_tier") == FLEX else "default"

    def count(self, what: str) -> int:
        with self._lock:
            return sum(1 for event, _ in self.events if event == what)


def _error(message: str, type_: str, code: str, param: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}
