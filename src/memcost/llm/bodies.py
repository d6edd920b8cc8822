"""Request bodies built from the model registry's facts, and what a reply means.

A body carries only what the model accepts (:class:`memcost.models.ModelInfo`): the output limit
under the model's own field name, ``temperature`` where accepted, ``reasoning_effort`` among the
model's values, ``response_format`` of a kind it supports. A parameter the model would reject is
an error before anything is sent; an effort asked of a model that does not reason is left out
(there is nothing to set). ``prompt_cache_key`` (the conversation) goes to OpenAI models that
route by it; OpenRouter gets the preset's provider routing and is asked for its usage accounting
(``usage.cost``, the billed dollars). A stage run on Flex processing sends ``service_tier``.

A reply that finished by ``length`` without content, by ``content_filter``, or with a
``refusal`` is a failure (:func:`reply_failure`), never an answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from memcost.llm.errors import ModelCapabilityError
from memcost.llm.requests import ChatRequest
from memcost.models import ModelInfo

# Fields the SDK's ``chat.completions.create`` takes by name; the rest go in ``extra_body``.
SDK_FIELDS = frozenset({
    "model", "messages", "temperature", "reasoning_effort", "max_tokens",
    "max_completion_tokens", "response_format", "prompt_cache_key",
})  # fmt: skip
# Failure kinds of a reply that arrived (HTTP 200) but holds no usable answer.
REPLY_FAILURES = ("length", "content_filter", "refusal")


def _refuse(info: ModelInfo, what: str) -> ModelCapabilityError:
    return ModelCapabilityError(
        f"{info.name} does not accept {what} (memcost.models: {info.source or 'registry'}); "
        "change the request's settings, or correct the model's entry if the provider changed it"
    )


def chat_body(
    request: ChatRequest,
    info: ModelInfo,
    *,
    backend: str = "openai",
    routing: Mapping[str, Any] | None = None,
    service_tier: str | None = None,
) -> dict[str, Any]:
    """The JSON body for ``/chat/completions``, from ``info``'s capabilities; ``service_tier``
    ``"flex"`` asks for Flex processing (memcost.llm.flex)."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": [{"role": role, "content": content} for role, content in request.messages],
    }
    if request.temperature is not None:
        if not info.temperature:
            raise _refuse(info, "temperature (a reasoning model: use reasoning_effort)")
        body["temperature"] = request.temperature
    effort = request.reasoning_effort
    if effort is not None and info.reasoning_efforts:
        if effort not in info.reasoning_efforts:
            raise _refuse(
                info, f"reasoning_effort={effort!r} (it takes {', '.join(info.reasoning_efforts)})"
            )
        body["reasoning_effort"] = effort
    elif effort is not None and info.reasoning:
        raise _refuse(info, "reasoning_effort (it reasons at a fixed effort)")
    if request.max_output_tokens is not None:
        if info.max_output_tokens and request.max_output_tokens > info.max_output_tokens:
            raise _refuse(info, f"an output limit above {info.max_output_tokens:,} tokens")
        body[info.output_limit_param] = request.max_output_tokens
    if request.json_schema is not None:
        if "json_schema" not in info.response_formats:
            raise _refuse(info, "response_format json_schema")
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": json.loads(request.json_schema),
        }
    elif request.json_mode:
        if "json_object" not in info.response_formats:
            raise _refuse(info, "response_format json_object")
        body["response_format"] = {"type": "json_object"}
    conversation = request.tags.get("conversation_id")
    if info.prompt_cache_key and backend == "openai" and conversation is not None:
        body["prompt_cache_key"] = str(conversation)
    if service_tier is not None:
        body["service_tier"] = service_tier
    if backend == "openrouter":
        body["usage"] = {"include": True}  # OpenRouter's usage accounting: usage.cost
        if routing:
            body["provider"] = dict(routing)
    return body


def sdk_arguments(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` as keyword arguments of the SDK (provider-specific fields in ``extra_body``)."""
    known = {k: v for k, v in body.items() if k in SDK_FIELDS}
    extra = {k: v for k, v in body.items() if k not in SDK_FIELDS}
    if extra:
        known["extra_body"] = extra
    return known


def reply_failure(reply: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(kind, reason)`` when an HTTP-200 reply holds no usable answer, else ``None``."""
    finish = reply.get("finish_reason")
    refusal = reply.get("refusal")
    text = str(reply.get("text") or "")
    usage = reply.get("usage") or {}
    if refusal:
        return "refusal", f"refusal: the model declined to answer: {str(refusal)[:300]}"
    if finish == "content_filter":
        return "content_filter", "content_filter: the provider's filter withheld the reply"
    if finish == "length" and not text.strip():
        spent = usage.get("reasoning_tokens") or 0
        return "length", (
            "length: the output limit was reached before any answer "
            f"({spent} reasoning tokens used)"
        )
    return None


def larger_output_limit(request: ChatRequest, info: ModelInfo) -> int | None:
    """The one retry's output limit after a ``length`` failure (``None``: none is possible)."""
    current = request.max_output_tokens
    if current is None:
        return None
    ceiling = info.max_output_tokens or current * 4
    larger = min(ceiling, max(current * 4, current + 4_000))
    return larger if larger > current else None
