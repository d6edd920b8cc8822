"""Flex processing: ordinary requests with ``service_tier: "flex"``, at half the list price.

A stage whose ``execution`` is ``flex`` sends every request with ``service_tier: "flex"``, waits
:data:`memcost.execution.FLEX_TIMEOUT_FACTOR` times the request timeout for an answer (Flex
answers are slower), and records its ledger records with ``execution: flex`` so that they are
priced at the model's ``flex_multiplier``.

OpenAI answers a Flex request it has no capacity for with HTTP 429 ``resource_unavailable`` and
bills nothing. Such a request is retried with the client's exponential backoff, like any
transient error, but it does not pause the other workers the way a rate limit does (it is a
shortage of Flex capacity, not a limit of this account). A request still refused after all its
retries fails like any other: it counts toward the consecutive-failure stop, whose message then
says that Flex capacity is short and how to switch the stage to another mode. Stopping is the
honest answer to a Flex tier that stays unavailable: nothing finished is lost and a rerun
resumes from the cache.

A stage set to ``flex`` for a model or provider that has no Flex processing is refused before
its first call (:func:`memcost.execution.execution_problem`); the runner checks the same rule
before notebook 00.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memcost.execution import FLEX_TIMEOUT_FACTOR, FLEX_UNAVAILABLE_CODE, execution_problem
from memcost.llm.errors import LLMError, TransientError

FLEX = "flex"


class ExecutionUnsupported(LLMError, ValueError):
    """A stage's execution mode cannot serve its model on its backend (found before any call)."""


def check_flex(
    stage: str, model: str, backend: str, overrides: Mapping[str, Mapping[str, Any]] | None
) -> None:
    """Raise :class:`ExecutionUnsupported` (one line: stage, model, what to do) when Flex
    processing cannot serve ``stage``'s calls to ``model`` on ``backend``."""
    problem = execution_problem(stage, FLEX, model, backend, overrides)
    if problem is not None:
        raise ExecutionUnsupported(problem)


def flex_timeout(timeout_s: float) -> float:
    """Seconds a Flex request may take (the interactive timeout times the Flex factor)."""
    return float(timeout_s) * FLEX_TIMEOUT_FACTOR


def is_flex_unavailable(exc: TransientError) -> bool:
    """Is this OpenAI's Flex 429 ``resource_unavailable`` (no capacity; nothing billed)?"""
    return exc.status == 429 and getattr(exc, "code", None) == FLEX_UNAVAILABLE_CODE


def outage_hint(stage: str, mode: str) -> str:
    """What to add to the consecutive-failure stop when the failing stage runs on Flex."""
    if mode != FLEX:
        return ""
    return (
        f" The {stage} stage runs on Flex processing, whose capacity may be short (HTTP 429 "
        f"{FLEX_UNAVAILABLE_CODE}): rerun later, or set execution {stage}: interactive "
        "(full price) or batch."
    )
