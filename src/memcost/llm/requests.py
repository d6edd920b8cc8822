"""Requests, results and errors of the model-call client, as values; the forgiving JSON parser and
the re-ask."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from memcost.calls import RESERVED_FIELDS, STAGES, canonical_json, sha256_hex
from memcost.catalog import rejects_temperature
from memcost.prompts import JSON_REASK

ROLES = ("system", "developer", "user", "assistant")
# Bumped whenever the key material changes shape, so old cache entries can never be misread.
KEY_SCHEME = "memcost-llm-v1"


_CHUNK_CHARS = 8_192


@lru_cache(maxsize=1_024)
def _escaped_chunk(chunk: str) -> str:
    return canonical_json(chunk)[1:-1]


def json_text(text: str) -> str:
    """``canonical_json(text)``, escaped in remembered chunks: a conversation's questions share
    their prompt's long start, escaped once (whole prompts took a fifth of the offline
    long-context stage)."""
    if len(text) <= _CHUNK_CHARS:
        return canonical_json(text)
    chunks = (text[i : i + _CHUNK_CHARS] for i in range(0, len(text), _CHUNK_CHARS))
    return '"' + "".join(map(_escaped_chunk, chunks)) + '"'


def _key(kind: str, provider: str, material: str) -> str:
    return sha256_hex(f"{KEY_SCHEME}\n{kind}\n{provider}\n{material}")


def _check_common(
    stage: str, prompt_version: str, sample_index: int, tags: Mapping[str, Any]
) -> None:
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; the ledger knows {', '.join(STAGES)}")
    if not prompt_version:
        raise ValueError("prompt_version must be set: every ledger record carries it")
    if not isinstance(sample_index, int) or sample_index < 0:
        raise ValueError(f"sample_index must be a non-negative int, got {sample_index!r}")
    clash = sorted(set(tags) & set(RESERVED_FIELDS))
    if clash:
        raise ValueError(f"tags {clash} would overwrite ledger fields; rename them")


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion, as a value; ``max_output_tokens`` is the output limit whatever the model
    calls it, and a registered model that rejects ``temperature`` is an error here, not an HTTP
    400."""

    model: str  # as sent, with snapshot date where there is one ("gpt-5-mini-2025-08-07")
    messages: tuple[tuple[str, str], ...]  # ((role, content), ...), in the order sent
    stage: str  # ledger stage label: extract | update | read | long_context | judge
    prompt_version: str  # the prompt's id (name@version), carried into every record
    sample_index: int = 0  # repeated samples of the same prompt (judge votes) differ here
    reasoning_effort: str | None = None  # GPT-5 family (and gpt-oss where the host accepts it)
    max_output_tokens: int | None = None
    temperature: float | None = None  # not for GPT-5 models
    json_mode: bool = False  # response_format={"type": "json_object"}
    # response_format={"type": "json_schema", "json_schema": <this, parsed>}: a library's
    # structured output through the gateway, kept as canonical JSON text (the request stays a
    # hashable value and the schema is part of its cache key)
    json_schema: str | None = None
    # the reply's shape for json_mode (the prompt's ``reply_schema``), sent as json_schema only
    # to a server of your own that declares it; the prompt's version already names it, so it
    # takes no part in the request's identity
    reply_schema: str | None = field(default=None, compare=False, repr=False)
    payload: Any = field(default=None, compare=False, repr=False)  # offline method's inputs
    tags: Mapping[str, Any] = field(default_factory=dict, compare=False)  # copied to the ledger

    def __post_init__(self) -> None:
        messages = as_messages(self.messages)
        object.__setattr__(self, "messages", messages)
        object.__setattr__(self, "tags", dict(self.tags))
        if not self.model:
            raise ValueError("model must be set")
        if not messages:
            raise ValueError("a chat request needs at least one message")
        bad = sorted({role for role, _ in messages} - set(ROLES))
        if bad:
            raise ValueError(f"unknown message roles {bad}; use {', '.join(ROLES)}")
        _check_common(self.stage, self.prompt_version, self.sample_index, self.tags)
        if self.temperature is not None and rejects_temperature(self.model):
            raise ValueError(
                f"{self.model} is a reasoning model that rejects temperature; control it with "
                "reasoning_effort (and max_output_tokens) instead"
            )
        if self.max_output_tokens is not None and self.max_output_tokens <= 0:
            raise ValueError("max_output_tokens must be positive")

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.reasoning_effort is not None:
            out["reasoning_effort"] = self.reasoning_effort
        if self.max_output_tokens is not None:
            out["max_output_tokens"] = self.max_output_tokens
        if self.temperature is not None:
            out["temperature"] = float(self.temperature)
        if self.json_mode:
            out["json_mode"] = True
        if self.json_schema is not None:
            out["json_schema"] = self.json_schema
        return out

    @cached_property
    def _material(self) -> str:
        """The key's canonical JSON, written out in sorted order so that long contents are escaped a
        chunk at a time."""
        messages = ",".join(
            f"[{json_text(role)},{json_text(text)}]" for role, text in self.messages
        )
        return (
            f'{{"messages":[{messages}],"model":{canonical_json(self.model)},'
            f'"params":{canonical_json(self.params())},'
            f'"sample_index":{canonical_json(self.sample_index)}}}'
        )

    def key(self, provider: str) -> str:
        """Cache key and ledger ``request_hash`` for this request sent to ``provider``."""
        if provider not in self._keys:  # asked several times per call: hashed once
            self._keys[provider] = _key("chat", provider, self._material)
        return self._keys[provider]

    @cached_property
    def _keys(self) -> dict[str, str]:
        return {}

    def excerpt(self, chars: int = 120) -> str:
        text = next((c for r, c in reversed(self.messages) if r == "user"), self.messages[-1][1])
        text = " ".join(text.split())
        return text if len(text) <= chars else text[: chars - 3] + "..."

    def replace(self, **changes: Any) -> ChatRequest:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class EmbeddingRequest:
    """One embeddings call: a batch of texts within the API's limits."""

    model: str
    inputs: tuple[str, ...]
    dimensions: int | None = None  # None: the model's native size (1,536 for 3-small)
    stage: str = "embed"
    prompt_version: str = "raw"  # texts are embedded as given
    sample_index: int = 0
    tags: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(str(t) for t in self.inputs))
        object.__setattr__(self, "tags", dict(self.tags))
        if not self.model:
            raise ValueError("model must be set")
        if not self.inputs:
            raise ValueError("an embedding request needs at least one input")
        _check_common(self.stage, self.prompt_version, self.sample_index, self.tags)

    @cached_property
    def _material(self) -> str:
        return canonical_json(
            {
                "model": self.model,
                "inputs": list(self.inputs),
                "dimensions": self.dimensions,
                "sample_index": self.sample_index,
            }
        )

    def key(self, provider: str) -> str:
        return _key("embed", provider, self._material)

    def excerpt(self, chars: int = 120) -> str:
        text = " ".join(self.inputs[0].split())
        return text if len(text) <= chars else text[: chars - 3] + "..."


def request_record(request: ChatRequest | EmbeddingRequest) -> dict[str, Any]:
    """A request as JSON (no ``payload``) that :func:`request_from_record` gives back."""
    if isinstance(request, EmbeddingRequest):
        return {
            "kind": "embedding",
            "model": request.model,
            "inputs": list(request.inputs),
            "dimensions": request.dimensions,
            "stage": request.stage,
            "prompt_version": request.prompt_version,
            "sample_index": request.sample_index,
            "tags": dict(request.tags),
        }
    return {
        "kind": "chat",
        "model": request.model,
        "messages": [list(m) for m in request.messages],
        "stage": request.stage,
        "prompt_version": request.prompt_version,
        "sample_index": request.sample_index,
        "reasoning_effort": request.reasoning_effort,
        "max_output_tokens": request.max_output_tokens,
        "temperature": request.temperature,
        "json_mode": request.json_mode,
        "json_schema": request.json_schema,
        "tags": dict(request.tags),
    }


def request_from_record(record: Mapping[str, Any]) -> ChatRequest | EmbeddingRequest:
    fields = {k: v for k, v in record.items() if k != "kind"}
    if record.get("kind") == "embedding":
        return EmbeddingRequest(**{**fields, "inputs": tuple(fields["inputs"])})
    return ChatRequest(**{**fields, "messages": tuple(tuple(m) for m in fields["messages"])})


@dataclass(frozen=True)
class Usage:
    """Token usage of one call as billed (reasoning tokens are part of completion)."""

    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.cached_prompt_tokens + other.cached_prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        return cls(**{f.name: int(data.get(f.name) or 0) for f in dataclasses.fields(cls)})


@dataclass
class CallResult:
    """One call's result, as the client serves it (offline, from the store or sent) and as every
    stage gets it. For a chat item ``usage``, ``attempts`` and ``calls`` add up every request
    made for it (a retry with a larger output limit, the JSON re-asks), ``latency_s`` is the
    last call's, and on an error ``text`` is ``""``."""

    request: ChatRequest | EmbeddingRequest
    request_hash: str
    backend: str  # offline | openai | openrouter | custom
    provider: str  # endpoint host, or "offline"
    usage: Usage
    cached: bool  # served from the store of calls (no request sent)
    latency_s: float
    attempts: int
    calls: int = 1
    text: str = ""
    vectors: np.ndarray | None = None  # an embedding's (len(inputs), d), L2-normalised rows
    error: str | None = None
    served_model: str | None = None  # the snapshot the API reports
    finish_reason: str | None = None
    failure_kind: str | None = None  # length | content_filter | refusal | rejected (HTTP 4xx)
    billed_usd: float | None = None  # the provider's own charge (OpenRouter's usage.cost)
    served_by: str | None = None  # the upstream that served it (OpenRouter's provider)
    execution: str = "interactive"  # interactive | batch | flex: how it was sent (its price)
    parsed: Any = None
    parse_error: str | None = None
    retried_output_limit: int | None = None  # the larger limit of the one retry after "length"

    @property
    def ok(self) -> bool:
        return self.error is None and self.parse_error is None

    def record_fields(self) -> dict[str, Any]:
        """The per-answer fields every output record carries."""
        return {
            "model": self.request.model,
            "backend": self.backend,
            "prompt_version": self.request.prompt_version,
            **self.usage.as_dict(),
            "latency_s": round(self.latency_s, 4),
            "error": self.error or self.parse_error,
        }


def as_messages(
    messages: Sequence[tuple[str, str]] | Sequence[Mapping[str, str]],
) -> tuple[tuple[str, str], ...]:
    out = []
    for m in messages:
        if isinstance(m, Mapping):
            out.append((str(m["role"]), str(m["content"])))
        else:
            role, content = m
            out.append((str(role), str(content)))
    return tuple(out)


# --- Errors ---------------------------------------------------------------------------------


class LLMError(RuntimeError): ...


class MissingCredentials(LLMError): ...


class FatalAPIError(LLMError):
    """An error retrying cannot fix (HTTP 400, 401, 403, 404, ...): the stage stops."""

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status


class CacheMiss(LLMError): ...


class BudgetExceeded(LLMError):
    """The next call would take the spend past ``max_cost_usd``; raised once the calls in flight are
    recorded, ``results`` holding what completed."""

    def __init__(
        self, message: str, *, spent_usd: float, limit_usd: float, results: list[Any] | None = None
    ):
        super().__init__(message)
        self.spent_usd = spent_usd
        self.limit_usd = limit_usd
        self.results: list[Any] = results or []


class TransientError(Exception):
    """Still failing after the SDK's retries, or a reply that does not parse: the item fails, a
    rerun asks again."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None):
        super().__init__(message)
        self.status = status
        self.code = code  # the API's error code (e.g. Flex's "resource_unavailable")


class ModelCapabilityError(LLMError, ValueError): ...


class QuotaExhausted(FatalAPIError):
    """HTTP 429 ``insufficient_quota``: no credit; the run stops at once."""


class ItemRejected(FatalAPIError):
    """A non-retryable 4xx for one item (``context_length_exceeded``, ...): it fails, the stage goes
    on."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None):
        super().__init__(message, status=status)
        self.code = code


# --- JSON answers -----------------------------------------------------------------------------

_FENCE = re.compile(r"^```[a-zA-Z0-9_-]*\s*\n(.*?)\n?```\s*$", re.DOTALL)


def parse_json(text: str) -> Any:
    """JSON from a reply: a bare value, a fenced block, or the outermost ``{...}``/``[...]`` in
    prose; ``ValueError`` when none."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError as exc:
        # a reply that opens a JSON value is judged whole: cut off (its output limit) or broken
        why = f"{exc} of {len(stripped)} characters" if stripped[:1] in ("{", "[") else ""
    for open_, close in (("{", "}"), ("[", "]")):
        start, end = stripped.find(open_), stripped.rfind(close)
        if 0 <= start < end:
            try:
                return json.loads(stripped[start : end + 1])
            except json.JSONDecodeError as exc:
                why = why or f"{exc} of {end + 1 - start} characters"
                continue
    error = ValueError(f"no JSON value in the reply (starts {stripped[:60]!r})")
    if why:
        # for the person reading the failure; a re-ask shows the model the message alone, as
        # it always has (and so finds its recorded re-asks again); an error at the last
        # character is a reply cut off at its output limit
        error.add_note(f"the JSON does not parse: {why}")
    raise error


def parse_json_object(text: str) -> dict[str, Any]:
    value = parse_json(text)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value


def reask_request(previous: ChatRequest, bad_reply: str, error: str, number: int) -> ChatRequest:
    """The ``number``-th re-ask: ``previous`` with the bad reply and a correction appended (each
    extends the last, so no two are the same request)."""
    correction = JSON_REASK.messages(error=error[:300])
    suffix = f"+{JSON_REASK.id}"
    version = previous.prompt_version
    return previous.replace(
        messages=(*previous.messages, ("assistant", bad_reply), *correction),
        prompt_version=version if version.endswith(suffix) else version + suffix,
        tags={**previous.tags, "reask": number},
    )
