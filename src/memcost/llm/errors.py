"""Errors that stop a stage, each with a message that says what to do next.

Transient trouble (rate limits, 5xx, timeouts, dropped connections, malformed bodies) is retried
inside the client and never surfaces as one of these unless the retries run out, in which case
the item carries the error and the stage carries on.
"""

from __future__ import annotations

from typing import Any


class LLMError(RuntimeError):
    """Base class of every error the model-call client raises on purpose."""


class MissingCredentials(LLMError):
    """No API key where the chosen backend needs one (raised before anything is sent)."""


class FatalAPIError(LLMError):
    """An error that retrying cannot fix (HTTP 400, 401, 403, 404, ...): the stage stops."""

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status


class CacheMiss(LLMError):
    """``cache_mode="replay_only"`` and the response is not in the cache."""


class BudgetExceeded(LLMError):
    """The next call would take the run's spend past ``max_cost_usd``.

    Raised after the calls already in flight have finished and been recorded; ``results`` holds
    what completed (``None`` where an item was not run), in input order.
    """

    def __init__(
        self, message: str, *, spent_usd: float, limit_usd: float, results: list[Any] | None = None
    ):
        super().__init__(message)
        self.spent_usd = spent_usd
        self.limit_usd = limit_usd
        self.results: list[Any] = results or []


class TransientError(Exception):
    """One failed attempt that may succeed if repeated (internal: the retry loop consumes it)."""

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        status: int | None = None,
        code: str | None = None,
    ):
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status
        self.code = code  # the API's error code (e.g. Flex's "resource_unavailable")
        self.reading: Any = None  # a 429's x-ratelimit-* headers (memcost.llm.pacing.Reading)


class ModelCapabilityError(LLMError, ValueError):
    """A request carries a parameter its model does not accept (found before it is sent)."""


class QuotaExhausted(FatalAPIError):
    """HTTP 429 ``insufficient_quota``: the account has no credit; the run stops at once."""


class ItemRejected(FatalAPIError):
    """A non-retryable 4xx for one item (``invalid_prompt``, ``context_length_exceeded``, ...):
    that item fails with the error and the stage goes on."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None):
        super().__init__(message, status=status)
        self.code = code
