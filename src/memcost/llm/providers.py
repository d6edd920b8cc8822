"""Endpoints that speak the OpenAI API, through the ``openai`` SDK: request bodies from each model's
capabilities, keys, replies, errors (docs/architecture.md, "Model calls"). The only importer of
``openai``."""

from __future__ import annotations

import email.utils
import json
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from memcost.catalog import (
    FLEX_TIMEOUT_FACTOR,
    FLEX_UNAVAILABLE_CODE,
    ModelInfo,
    execution_problem,
    model_info,
)
from memcost.llm.requests import (
    ChatRequest,
    EmbeddingRequest,
    FatalAPIError,
    ItemRejected,
    LLMError,
    MissingCredentials,
    ModelCapabilityError,
    QuotaExhausted,
    TransientError,
    Usage,
)
from memcost.paths import REPO_ROOT

# --- Flex processing ----------------------------------------------------------------------

FLEX = "flex"


class ExecutionUnsupported(LLMError, ValueError): ...


def check_flex(
    stage: str, model: str, backend: str, overrides: Mapping[str, Mapping[str, Any]] | None
) -> None:
    problem = execution_problem(stage, FLEX, model, backend, overrides)
    if problem is not None:
        raise ExecutionUnsupported(problem)


def flex_timeout(timeout_s: float) -> float:
    return float(timeout_s) * FLEX_TIMEOUT_FACTOR


def outage_hint(stage: str, mode: str) -> str:
    if mode != FLEX:
        return ""
    return (
        f" The {stage} stage runs on Flex processing, whose capacity may be short (HTTP 429 "
        f"{FLEX_UNAVAILABLE_CODE}): rerun later, or set execution {stage}: interactive "
        "(full price) or batch."
    )


# --- Rate-limit headers ------------------------------------------------------------------

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: str) -> float | None:
    """``"6m0s"`` → 360.0, ``"20ms"`` → 0.02, ``"2"`` → 2.0; else ``None``."""
    value = str(value).strip().lower()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def hold_s(headers: Mapping[str, str], *, resets: bool) -> float | None:
    """How long a 429 holds its model: ``retry-after-ms``, ``Retry-After``, else (``resets``) the
    longer of OpenAI's ``x-ratelimit-reset-*``; ``None`` when none says."""
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        seconds = parse_duration(value)
        if seconds is None and name == "retry-after":
            when = email.utils.parsedate_tz(value)
            seconds = None if when is None else email.utils.mktime_tz(when) - time.time()
        if seconds is not None and math.isfinite(seconds):
            return max(0.0, seconds / divisor)
    names = ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")
    found = [parse_duration(headers[n]) for n in names if resets and n in headers]
    found = [f for f in found if f is not None and math.isfinite(f)]
    return max(found) if found else None


@dataclass(frozen=True)
class Reading:
    """What one reply's ``x-ratelimit-*`` headers say (``None``: not sent)."""

    limit_requests: float | None = None
    limit_tokens: float | None = None
    remaining_requests: float | None = None
    remaining_tokens: float | None = None

    @classmethod
    def from_headers(cls, headers: Mapping[str, str] | None) -> Reading | None:
        if not headers:
            return None

        def number(name: str) -> float | None:
            value = headers.get(name)
            if value is None:
                return None
            seconds = parse_duration(str(value))  # plain numbers parse as themselves
            return seconds if seconds is not None and math.isfinite(seconds) else None

        reading = cls(
            number("x-ratelimit-limit-requests"),
            number("x-ratelimit-limit-tokens"),
            number("x-ratelimit-remaining-requests"),
            number("x-ratelimit-remaining-tokens"),
        )
        return None if reading == cls() else reading


# --- Request bodies and replies ------------------------------------------------------------

# Fields the SDK's ``chat.completions.create`` takes by name; the rest go in ``extra_body``.
SDK_FIELDS = frozenset({
    "model", "messages", "temperature", "reasoning_effort", "max_tokens",
    "max_completion_tokens", "response_format", "prompt_cache_key",
})  # fmt: skip
# Failure kinds of a reply that arrived (HTTP 200) but holds no usable answer.
REPLY_FAILURES = ("length", "content_filter", "refusal")


def _refuse(info: ModelInfo, what: str) -> ModelCapabilityError:
    return ModelCapabilityError(
        f"{info.name} does not accept {what} (memcost.catalog: {info.source or 'registry'}); "
        "change the request's settings, or correct the model's entry if the provider changed it"
    )


def _build_body(
    request: ChatRequest,
    info: ModelInfo,
    *,
    backend: str = "openai",
    routing: Mapping[str, Any] | None = None,
    service_tier: str | None = None,
) -> dict[str, Any]:
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
    elif info.source == "model_capabilities":
        # a model on your own server: without a limit a small model may write until its
        # window is full, holding one of the server's few slots for minutes
        body[info.output_limit_param] = info.max_output_tokens
    if request.json_schema is not None:
        if "json_schema" not in info.response_formats:
            raise _refuse(info, "response_format json_schema")
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": json.loads(request.json_schema),
        }
    elif request.json_mode and request.reply_schema and _constrains(info):
        # a server of your own turns the schema into a grammar: even a small model's reply
        # then parses (llama.cpp, vLLM's guided decoding)
        schema = json.loads(request.reply_schema)
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": request.stage, "schema": schema},
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


def _constrains(info: ModelInfo) -> bool:
    """A declared model whose server takes a JSON schema."""
    return info.source == "model_capabilities" and "json_schema" in info.response_formats


def sdk_arguments(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` as the SDK's keyword arguments (provider fields in ``extra_body``)."""
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
    """The one retry's output limit after a ``length`` failure (``None``: none)."""
    current = request.max_output_tokens
    if current is None:
        return None
    ceiling = info.max_output_tokens or current * 4
    larger = min(ceiling, max(current * 4, current + 4_000))
    return larger if larger > current else None


# --- Endpoints and keys --------------------------------------------------------------------

BACKENDS = ("offline", "openai", "openrouter", "custom")
DEFAULT_ENV_FILE = REPO_ROOT / ".env"
OFFLINE_HINT = "or run without a key and at no cost with the offline backend (backend: offline)"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class ProviderSpec:
    name: str
    base_url: str  # "" for custom: the preset's base_url
    key_env: str  # default key variable; "" when none is needed
    docs: str


PROVIDERS: dict[str, ProviderSpec] = {
    "openai": ProviderSpec(
        "openai",
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
        "https://platform.openai.com/api-keys",
    ),
    "openrouter": ProviderSpec(
        "openrouter",
        "https://openrouter.ai/api/v1",
        "OPENROUTER_API_KEY",
        "https://openrouter.ai/settings/keys",
    ),
    # Local servers (vLLM, Ollama, llama.cpp) usually need no key; name one with api_key_env.
    "custom": ProviderSpec("custom", "", "", ""),
}


LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class Endpoint:
    """Where one model's calls go; ``identity`` (no credentials) is part of every cache key, so
    answers from different hosts never mix. A server on this machine is identified without its
    port: a resumed run whose server had to take another port still finds its answers."""

    backend: str  # openai | openrouter | custom
    base_url: str
    key_env: str  # "" = no key needed

    @property
    def identity(self) -> str:
        parts = urlsplit(self.base_url.rstrip("/"))
        if parts.hostname in LOOPBACK:
            return f"{self.backend}|{parts.scheme}://{parts.hostname}{parts.path}"
        return f"{self.backend}|{public_url(self.base_url)}"

    @property
    def host(self) -> str:
        parts = urlsplit(self.base_url)
        return (
            parts.hostname + (f":{parts.port}" if parts.port else "")
            if parts.hostname
            else self.base_url
        )


def public_url(url: str) -> str:
    """The URL without user info, query or fragment (which could carry a secret)."""
    parts = urlsplit(url.rstrip("/"))
    if not parts.hostname:
        return url.rstrip("/")
    netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
    return f"{parts.scheme}://{netloc}{parts.path}"


def resolve_endpoint(
    backend: str,
    *,
    base_url: str = "",
    api_key_env: str = "",
    primary: bool = True,
    custom_routed: bool = False,
) -> Endpoint:
    """A backend's endpoint; a non-empty ``base_url`` redirects the primary backend (a proxy, a test
    server), or names the ``custom`` server when a model is routed there."""
    if backend not in PROVIDERS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    spec = PROVIDERS[backend]
    redirect = backend == "custom" or (primary and not custom_routed)
    url = base_url if (base_url and redirect) else spec.base_url
    if not url:
        raise ValueError(
            "backend 'custom' needs base_url (e.g. http://localhost:8000/v1 for vLLM, "
            "http://localhost:11434/v1 for Ollama)"
        )
    if not urlsplit(url).scheme.startswith("http"):
        raise ValueError(f"base_url must start with http:// or https://, got {public_url(url)!r}")
    key_env = api_key_env if (api_key_env and primary) else spec.key_env
    if key_env and not _ENV_NAME.match(key_env):
        # Most likely the key itself pasted where its variable's name goes: never echo it.
        raise ValueError(
            "api_key_env must be the name of an environment variable (letters, digits and "
            "underscores, e.g. MY_API_KEY), not the key: put the key in that variable or in "
            f"{DEFAULT_ENV_FILE}. Keys are never notebook parameters."
        )
    return Endpoint(backend, url.rstrip("/"), key_env)


# ---------------------------------------------------------------- keys


def _env_file_values(env_file: Path | None) -> dict[str, str]:
    path = DEFAULT_ENV_FILE if env_file is None else Path(env_file)
    if not path.is_file():
        return {}
    from dotenv import dotenv_values

    # Read without touching os.environ: nothing else in the process should see the key.
    return {k: v for k, v in dotenv_values(path).items() if v}


def lookup_key(var: str, env_file: Path | None = None) -> str | None:
    if not var:
        return None
    return os.environ.get(var) or _env_file_values(env_file).get(var) or None


def _missing_message(endpoint: Endpoint, models: Iterable[str] = ()) -> str:
    spec = PROVIDERS[endpoint.backend]
    which = f" (for {', '.join(sorted(set(models)))})" if models else ""
    where = f"; get one at {spec.docs}" if spec.docs else ""
    return (
        f"backend '{endpoint.backend}'{which} needs an API key: set {endpoint.key_env} in the "
        f"environment or in {DEFAULT_ENV_FILE}{where}, {OFFLINE_HINT}. Keys are never notebook "
        "parameters."
    )


def check_credentials(
    backend: str = "openai",
    *,
    base_url: str = "",
    api_key_env: str = "",
    model_backends: Mapping[str, str] | None = None,
    env_file: Path | None = None,
) -> dict[str, str]:
    """Fail before anything is spent if a backend the run uses has no key:
    :class:`MissingCredentials` names every missing variable; returns ``{backend: variable}``."""
    needed: dict[Endpoint, list[str]] = {}
    custom_routed = "custom" in (model_backends or {}).values()
    if backend != "offline":
        needed[
            resolve_endpoint(
                backend, base_url=base_url, api_key_env=api_key_env, custom_routed=custom_routed
            )
        ] = []
    for model, other in (model_backends or {}).items():
        if other == "offline":
            continue
        primary = other == backend
        ep = resolve_endpoint(
            other,
            base_url=base_url,
            api_key_env=api_key_env,
            primary=primary,
            custom_routed=custom_routed,
        )
        needed.setdefault(ep, []).append(model)
    found: dict[str, str] = {}
    problems: list[str] = []
    for ep, models in needed.items():
        if not ep.key_env:
            continue
        if lookup_key(ep.key_env, env_file) is None:
            problems.append(_missing_message(ep, models))
        else:
            found[ep.backend] = ep.key_env
    if problems:
        raise MissingCredentials("\n".join(problems))
    return found


# ---------------------------------------------------------------- request bodies


def chat_body(
    request: ChatRequest,
    info: ModelInfo | None = None,
    *,
    backend: str = "openai",
    routing: Mapping[str, Any] | None = None,
    service_tier: str | None = None,
) -> dict[str, Any]:
    """The JSON body for ``/chat/completions`` from the model's capabilities (``info``: a caller's
    declaration); ``service_tier="flex"``: Flex processing."""
    info = info if info is not None else model_info(request.model)
    return _build_body(request, info, backend=backend, routing=routing, service_tier=service_tier)


def embedding_body(request: EmbeddingRequest) -> dict[str, Any]:
    body: dict[str, Any] = {"model": request.model, "input": list(request.inputs)}
    if request.dimensions is not None:
        body["dimensions"] = request.dimensions
    return body


# ---------------------------------------------------------------- one request


class Hooks(Protocol):
    """What a transport adds to every attempt the SDK makes."""

    def on_request(self, request: Any) -> None: ...

    def on_response(self, response: Any) -> None: ...


class EndpointClient:
    """One SDK client per endpoint, shared by the worker threads, with the SDK's own retries
    (``max_retries``); each attempt passes ``hooks``. Raises :class:`TransientError` (still
    failing, or a body that does not parse) or :class:`FatalAPIError`."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        timeout_s: float,
        max_retries: int = 2,
        hooks: Hooks | None = None,
        connect_timeout_s: float = 10.0,
        env_file: Path | None = None,
    ):
        import openai

        self.endpoint = endpoint
        key = lookup_key(endpoint.key_env, env_file) if endpoint.key_env else None
        if endpoint.key_env and key is None:
            raise MissingCredentials(_missing_message(endpoint))
        self._secrets = tuple(s for s in (key,) if s)
        self._openai = openai
        self._connect_s = connect_timeout_s
        events = {"request": [hooks.on_request], "response": [hooks.on_response]} if hooks else {}
        self._sdk = openai.OpenAI(
            # Local servers that need no key still get a placeholder: the SDK insists on one.
            api_key=key or "no-key-needed",
            base_url=endpoint.base_url,
            max_retries=max_retries,
            timeout=openai.Timeout(timeout_s, connect=min(connect_timeout_s, timeout_s)),
            http_client=openai.DefaultHttpxClient(event_hooks=events),
        )

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[redacted]")
        return text

    def _timeout(self, timeout_s: float | None) -> dict[str, Any]:
        if not timeout_s:
            return {}
        return {"timeout": self._openai.Timeout(timeout_s, connect=min(self._connect_s, timeout_s))}

    def chat(
        self,
        request: ChatRequest,
        info: ModelInfo | None = None,
        routing: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
        service_tier: str | None = None,
    ) -> dict[str, Any]:
        """One chat request (Flex: the longer Flex timeout)."""
        openai = self._openai
        body = chat_body(
            request, info, backend=self.endpoint.backend, routing=routing, service_tier=service_tier
        )
        if service_tier == FLEX and timeout_s:
            timeout_s = flex_timeout(timeout_s)  # Flex answers are slower
        try:
            completion = self._sdk.chat.completions.create(
                **sdk_arguments(body), **self._timeout(timeout_s)
            )
        except openai.APIError as exc:
            raise self._classify(exc, request) from None
        except ValueError as exc:  # a body that is not JSON
            raise self._malformed(exc) from None
        try:
            if not completion.choices:
                raise ValueError("no choices in the response")
            choice = completion.choices[0]
            usage = _chat_usage(completion.usage)
            if usage is not None and info is not None and info.source == "model_capabilities":
                # a model declared by the run lives on a server of your own, which reuses its
                # prompt cache for speed and bills nothing for it: its "cached" tokens are not
                # a provider's discounted cache reads
                usage = replace(usage, cached_prompt_tokens=0)
        except Exception as exc:  # noqa: BLE001 - any unreadable body is the server's glitch
            raise self._malformed(exc) from None
        return {
            "text": choice.message.content or "",
            "usage": usage.as_dict() if usage else None,
            "served_model": completion.model,
            "finish_reason": choice.finish_reason,
            "refusal": getattr(choice.message, "refusal", None),
            "billed_usd": _billed_usd(completion.usage),
            "served_by": getattr(completion, "provider", None),  # OpenRouter's upstream
        }

    def embed(self, request: EmbeddingRequest, timeout_s: float | None = None) -> dict[str, Any]:
        import numpy as np

        openai = self._openai
        try:
            response = self._sdk.embeddings.create(
                **embedding_body(request), **self._timeout(timeout_s)
            )
        except openai.APIError as exc:
            raise self._classify(exc, request) from None
        except ValueError as exc:
            raise self._malformed(exc) from None
        try:
            data = sorted(response.data, key=lambda d: d.index)
            if len(data) != len(request.inputs):
                raise ValueError(f"{len(data)} vectors for {len(request.inputs)} inputs")
            vectors = np.asarray([d.embedding for d in data], dtype=np.float32)
            if vectors.ndim != 2:
                raise ValueError("ragged vectors")
            prompt_tokens = int(response.usage.prompt_tokens) if response.usage else None
        except Exception as exc:  # noqa: BLE001
            raise self._malformed(exc) from None
        return {"vectors": vectors, "prompt_tokens": prompt_tokens, "served_model": response.model}

    def list_models(self) -> dict[str, str | None]:
        """``GET /models``: ``{model id: shutdown_date or None}``."""
        found: dict[str, str | None] = {}
        for item in self.sdk_call("model listing", lambda sdk: sdk.models.list()).data:
            extra = getattr(item, "model_extra", None) or {}
            found[str(item.id)] = getattr(item, "shutdown_date", None) or extra.get("shutdown_date")
        return found

    def sdk_call(self, what: str, call: Callable[[Any], Any]) -> Any:
        """``call(sdk)`` for the Batch API's files and batches (``what`` names it in errors)."""
        try:
            return call(self._sdk)
        except self._openai.APIError as exc:
            raise self._classify(exc, None, what=what) from None

    def _malformed(self, exc: Exception) -> TransientError:
        return TransientError(f"malformed response from {self.endpoint.host}: {type(exc).__name__}")

    def _classify(
        self,
        exc: Exception,
        request: ChatRequest | EmbeddingRequest | None,
        what: str = "model listing",
    ) -> Exception:
        openai = self._openai
        host = self.endpoint.host
        if isinstance(exc, openai.APITimeoutError):
            return TransientError(f"timeout from {host}")
        if isinstance(exc, openai.APIConnectionError):
            return TransientError(f"connection error to {host}")
        if not isinstance(exc, openai.APIStatusError):
            return TransientError(self.redact(f"{type(exc).__name__} from {host}"))
        status = exc.status_code
        said = self.redact(_server_message(exc))
        code = getattr(exc, "code", None)
        if status == 429 and code == FLEX_UNAVAILABLE_CODE:
            return TransientError(
                f"Flex capacity unavailable at {host} (HTTP 429 {code}, nothing billed): {said}",
                status=429,
                code=code,
            )
        if status == 429 and code != "insufficient_quota":
            return TransientError(f"rate limited by {host} (HTTP 429): {said}", status=429)
        if status in (408, 409) or status >= 500:
            return TransientError(f"HTTP {status} from {host}: {said}", status=status)
        what = f"{request.stage} call to {request.model}" if request else what
        key_env = self.endpoint.key_env or "the key variable (api_key_env)"
        return _client_error(status, code, host, what, said, key_env, item=request is not None)


def _client_error(
    status: int, code: str | None, host: str, what: str, said: str, key_env: str, *, item: bool
) -> FatalAPIError:
    """The error for a 4xx that retrying cannot fix, with what to do."""
    if status == 401:
        msg = (
            f"{host} rejected the API key (HTTP 401) on a {what}: set {key_env} "
            f"(or use the offline backend). Server said: {said}"
        )
    elif status == 403:
        msg = (
            f"{host} refused the {what} (HTTP 403): the key's project may lack access to "
            f"this model or region; check its permissions ({OFFLINE_HINT}). Server said: {said}"
        )
    elif status == 404:
        msg = (
            f"{host} does not know the {what} (HTTP 404): check the model name and "
            f"snapshot, and base_url for a custom backend. Server said: {said}"
        )
    elif status == 429:
        return QuotaExhausted(
            f"{host} says the account has no quota left (HTTP 429 insufficient_quota): the "
            "run stops now (retrying cannot help). Add credit or raise the project's limit, "
            f"then rerun: finished calls come back from the cache ({OFFLINE_HINT}). "
            f"Server said: {said}",
            status=status,
        )
    elif status in ITEM_STATUSES and code not in RUN_LEVEL_CODES and item:
        return ItemRejected(
            f"{host} rejected this {what} (HTTP {status}{', ' + code if code else ''}); "
            f"retrying cannot help, the item is recorded as failed. Server said: {said}",
            status=status,
            code=code,
        )
    else:
        msg = (
            f"{host} rejected the {what} (HTTP {status}); retrying cannot help. Fix the "
            "request (a parameter this model does not accept, or a prompt longer than its "
            f"context window). Server said: {said}"
        )
    return FatalAPIError(msg, status=status)


# A 4xx about one item's content fails that item only; one about the request's shape (a
# parameter the model rejects, a model that does not exist) would fail every item: it stops.
ITEM_STATUSES = (400, 413, 422)
RUN_LEVEL_CODES = frozenset({
    "unsupported_parameter", "unsupported_value", "model_not_found", "invalid_api_key",
})  # fmt: skip


def _billed_usd(usage: Any) -> float | None:
    """OpenRouter's ``usage.cost``, when reported."""
    cost = getattr(usage, "cost", None) if usage is not None else None
    if cost is None and usage is not None:
        cost = (getattr(usage, "model_extra", None) or {}).get("cost")
    try:
        return float(cost) if cost is not None else None
    except (TypeError, ValueError):
        return None


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and inner.get("message"):
            return str(inner["message"])[:500]
        return json.dumps(body)[:500]
    return str(getattr(exc, "message", exc))[:500]


def _chat_usage(usage: Any) -> Usage | None:
    """``None`` when the server sent no usage (some local servers)."""
    if usage is None:
        return None
    prompt_details = getattr(usage, "prompt_tokens_details", None)
    completion_details = getattr(usage, "completion_tokens_details", None)
    return Usage(
        prompt_tokens=int(usage.prompt_tokens or 0),
        cached_prompt_tokens=int(getattr(prompt_details, "cached_tokens", None) or 0),
        completion_tokens=int(usage.completion_tokens or 0),
        reasoning_tokens=int(getattr(completion_details, "reasoning_tokens", None) or 0),
    )
