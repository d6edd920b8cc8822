"""A local HTTP server that speaks enough of the OpenAI API to test the client for real.

Chat completions, embeddings, the model list, Batch files and batches, Flex processing, and
per-model rate limits counted and reported the way OpenAI does (``x-ratelimit-*`` headers, 429s
with ``retry-after``). It misbehaves on request as real APIs do: slow replies, dropped
connections, 5xx and 429 bursts, malformed JSON, truncated replies, Flex capacity that runs out.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from fake_api.batches import BatchService
from memcost.catalog import FLEX_UNAVAILABLE_CODE, PrefixCache, is_known, model_info
from memcost.text import count_tokens, encode

CHAT_PATH = "/v1/chat/completions"
EMBEDDINGS_PATH = "/v1/embeddings"
REASONING_BY_EFFORT = {"minimal": 0, "low": 16, "medium": 64, "high": 256}


@dataclass(frozen=True)
class Action:
    """How to answer one request. The default is a normal 200 answer."""

    status: int = 200
    delay_s: float = 0.0  # wait before answering (a slow server, or a client timeout)
    retry_after: str | None = None  # Retry-After header value ("1", or an HTTP date)
    retry_after_ms: int | None = None
    malformed: bool = False  # 200 with a truncated JSON body
    drop: bool = False  # close the connection without answering
    text: str | None = None  # reply content instead of the responder's
    error_code: str | None = None  # "code" in the error body (e.g. "insufficient_quota")
    usage: dict[str, int] | None = None  # usage numbers to report instead of counted ones
    finish_reason: str = "stop"  # "length" | "content_filter" | ...
    content_null: bool = False  # message.content null (a reply cut off before any answer)
    refusal: str | None = None  # message.refusal text
    headers: dict[str, str] | None = None  # extra response headers (x-ratelimit-reset-*)
    message: str | None = None  # error message instead of the default one
    cost: float | None = None  # OpenRouter's usage.cost (dollars charged)
    served_by: str | None = None  # OpenRouter's top-level "provider"


@dataclass
class Received:
    """One request as the server saw it."""

    index: int  # arrival order, from 0
    path: str
    body: Any  # parsed JSON (None if unreadable)
    arrived: float  # time.monotonic() at arrival
    finished: float | None = None
    status: int | None = None
    authorized: bool | None = None  # None when the server checks no key

    @property
    def user_text(self) -> str:
        """The last user message (chat) or the first input (embeddings)."""
        body = self.body or {}
        if "messages" in body:
            users = [m.get("content", "") for m in body["messages"] if m.get("role") == "user"]
            return users[-1] if users else ""
        inputs = body.get("input")
        return inputs[0] if isinstance(inputs, list) and inputs else str(inputs or "")


def default_responder(body: dict[str, Any]) -> str:
    """A deterministic reply that names the question it answers."""
    question = ""
    for message in body.get("messages", []):
        if message.get("role") == "user":
            question = str(message.get("content", ""))
    digest = hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).hexdigest()[
        :8
    ]
    return f"answer-{digest}: {' '.join(question.split()[:12])}"


def fake_embedding(text: str, dims: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    vec = np.random.default_rng(seed).standard_normal(dims).astype(np.float32)
    return vec / np.linalg.norm(vec)


@dataclass
class _Rule:
    match: Callable[[str, dict[str, Any]], bool]
    action: Action
    times: int | None  # None = forever


@dataclass
class _AccountBucket:
    limit: float
    window_s: float
    level: float = math.nan
    at: float = 0.0

    def __post_init__(self) -> None:
        self.level, self.at = self.limit, time.monotonic()

    def refill(self, now: float) -> None:
        self.level = min(self.limit, self.level + (now - self.at) * self.limit / self.window_s)
        self.at = now

    def wait_s(self, amount: float) -> float:
        return max(0.0, (amount - self.level) * self.window_s / self.limit)

    def reset_s(self) -> float:
        return (self.limit - self.level) * self.window_s / self.limit


def duration(seconds: float) -> str:
    """``0.24`` → ``"240ms"``, ``75.5`` → ``"1m15.5s"``, as the API writes its resets."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60)
    rest = f"{rest:.3g}s"
    return f"{int(minutes)}m{rest}" if minutes else rest


@dataclass
class AccountLimits:
    """``limits``: ``{model: {"rpm": N, "tpm": N}}`` (either or both); other models are
    unlimited. ``admitted`` and ``refused`` count requests per model."""

    limits: dict[str, dict[str, float]] = field(default_factory=dict)
    window_s: float = 60.0
    admitted: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    _buckets: dict[tuple[str, str], _AccountBucket] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def set(self, model: str, *, rpm: float | None = None, tpm: float | None = None) -> None:
        """Limit ``model`` from now on (its buckets start full)."""
        with self._lock:
            self.limits[model] = {k: v for k, v in (("rpm", rpm), ("tpm", tpm)) if v}
            for kind in ("rpm", "tpm"):
                self._buckets.pop((model, kind), None)

    def admit(
        self, path: str, body: dict[str, Any]
    ) -> tuple[tuple[int, dict[str, Any]] | None, dict[str, str]]:
        """``(refusal or None, headers)`` for one request."""
        model = str(body.get("model"))
        limits = self.limits.get(model)
        if not limits:
            return None, {}
        tokens = _requested_tokens(path, body)
        with self._lock:
            now = time.monotonic()
            buckets = {}
            for kind, limit in limits.items():
                bucket = self._buckets.get((model, kind))
                if bucket is None:
                    bucket = _AccountBucket(float(limit), self.window_s)
                    self._buckets[(model, kind)] = bucket
                bucket.refill(now)
                buckets[kind] = bucket
            needs = {"rpm": 1.0, "tpm": float(tokens)}
            short = [(k, b) for k, b in buckets.items() if b.level < needs[k]]
            refusal = None
            if short:
                kind, bucket = short[0]
                self.refused[model] = self.refused.get(model, 0) + 1
                refusal = 429, _rate_limit_error(model, kind, bucket, needs[kind])
            else:
                for kind, bucket in buckets.items():
                    bucket.level -= needs[kind]
                self.admitted[model] = self.admitted.get(model, 0) + 1
            return refusal, _headers(buckets)


def _requested_tokens(path: str, body: dict[str, Any]) -> int:
    if path.endswith("/embeddings"):
        inputs = body.get("input")
        inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
        return sum(count_tokens(str(t)) for t in inputs)
    prompt = sum(count_tokens(str(m.get("content", ""))) for m in body.get("messages") or [])
    return prompt + int(body.get("max_completion_tokens") or body.get("max_tokens") or 0)


def _headers(buckets: dict[str, _AccountBucket]) -> dict[str, str]:
    headers = {}
    for kind, name in (("rpm", "requests"), ("tpm", "tokens")):
        bucket = buckets.get(kind)
        if bucket is not None:
            headers[f"x-ratelimit-limit-{name}"] = str(int(bucket.limit))
            headers[f"x-ratelimit-remaining-{name}"] = str(max(0, int(bucket.level)))
            headers[f"x-ratelimit-reset-{name}"] = duration(bucket.reset_s())
    return headers


def _rate_limit_error(
    model: str, kind: str, bucket: _AccountBucket, requested: float
) -> dict[str, Any]:
    what = "requests per min (RPM)" if kind == "rpm" else "tokens per min (TPM)"
    used = int(bucket.limit - max(0.0, bucket.level))
    message = (
        f"Rate limit reached for {model} in organization org-memcost-test on {what}: "
        f"Limit {int(bucket.limit)}, Used {used}, Requested {int(requested)}. Please try "
        f"again in {duration(bucket.wait_s(requested))}. Visit "
        "https://platform.openai.com/account/rate-limits to learn more."
    )
    return {
        "error": {
            "message": message,
            "type": "requests" if kind == "rpm" else "tokens",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }


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
                    code="unsupported_value",
                    param="service_tier",
                )
            if self.unavailable > 0:
                self.unavailable -= 1
                self.events.append(("unavailable", model))
                return 429, _error(
                    "Resource unavailable: Flex processing lacks capacity for this request; "
                    "retry later or use the default service tier.",
                    "rate_limit_error",
                    code=FLEX_UNAVAILABLE_CODE,
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


@dataclass
class FakeOpenAIServer:
    """The server; use as a context manager (or ``start()``/``stop()``).

    ``latency_s`` delays every answer; ``api_key`` (if set) must arrive as the bearer token or
    the answer is 401; ``responder`` makes the reply text from the request body; ``embedder``
    makes one unit vector from a text and a size (random per text by default).
    """

    latency_s: float = 0.0
    api_key: str | None = None
    responder: Callable[[dict[str, Any]], str] = default_responder
    embedder: Callable[[str, int], np.ndarray] = fake_embedding
    embedding_dims: int = 1_536
    # a server of your own holding one model (llama.cpp): every chat reply names it, whatever
    # model the request asked for; None: the requested model, as a snapshot
    serves: str | None = None
    host: str = "127.0.0.1"
    port: int = 0
    prefix_overflow_per_minute: int | None = None  # None: no overflow (a test's fast bursts)
    models: dict[str, str | None] = field(default_factory=dict)  # GET /v1/models: shutdown dates
    flex: FlexTier = field(default_factory=FlexTier)  # service_tier "flex" (fake_api.openai_server)
    # per-model RPM/TPM limits with OpenAI's headers and 429s (fake_api.openai_server)
    limits: AccountLimits = field(default_factory=AccountLimits)
    _script: deque[Action] = field(default_factory=deque, init=False, repr=False)
    _rules: list[_Rule] = field(default_factory=list, init=False, repr=False)
    _log: list[Received] = field(default_factory=list, init=False, repr=False)
    _caches: dict[str, PrefixCache] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _httpd: ThreadingHTTPServer | None = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _batches: BatchService | None = field(default=None, init=False, repr=False)

    @property
    def batches(self) -> BatchService:
        """The Batch API (/v1/files, /v1/batches) and its controls (fake_api.batches)."""
        if self._batches is None:
            self._batches = BatchService(self, Action())
        return self._batches

    # ---------------------------------------------------------------- control

    def start(self) -> FakeOpenAIServer:
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = _QuietServer((self.host, self.port), Handler)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-openai",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The base URL to give the client (``.../v1``)."""
        return f"http://{self.host}:{self.port}/v1"

    def script(self, *actions: Action) -> None:
        """Answer the next requests (any path, in arrival order) with these actions."""
        with self._lock:
            self._script.extend(actions)

    def on(
        self, match: Callable[[str, dict[str, Any]], bool], action: Action, *, times: int | None = 1
    ) -> None:
        """Answer requests for which ``match(path, body)`` holds with ``action`` (``times``
        times, or always with ``None``). Rules are checked before the script."""
        with self._lock:
            self._rules.append(_Rule(match, action, times))

    def clear(self) -> None:
        """Forget the script, the rules, the log and the prompt cache."""
        with self._lock:
            self._script.clear()
            self._rules.clear()
            self._log.clear()
            self._caches.clear()

    @property
    def requests(self) -> list[Received]:
        with self._lock:
            return list(self._log)

    def count(self, path: str | None = CHAT_PATH, *, status: int | None = None) -> int:
        with self._lock:
            return sum(
                1
                for r in self._log
                if (path is None or r.path == path) and (status is None or r.status == status)
            )

    # ---------------------------------------------------------------- answering

    def _next_action(self, path: str, body: dict[str, Any]) -> Action:
        with self._lock:
            for rule in self._rules:
                if rule.times != 0 and rule.match(path, body):
                    if rule.times is not None:
                        rule.times -= 1
                    return rule.action
            return self._script.popleft() if self._script else Action()

    def _register(self, path: str, body: Any, authorized: bool | None) -> Received:
        with self._lock:
            rec = Received(len(self._log), path, body, time.monotonic(), authorized=authorized)
            self._log.append(rec)
            return rec

    def _cached_prefix(self, model: str, tokens: list[int], key: str | None) -> int:
        """Cached tokens of this prompt by the one prefix-cache rule; remembers the prompt."""
        with self._lock:
            cache = self._caches.get(model)
            if cache is None:
                limit = self.prefix_overflow_per_minute or 10**9
                cache = self._caches[model] = PrefixCache(max_per_minute=limit)
            return cache.lookup(tokens, time.monotonic(), key)

    def chat_response(self, body: dict[str, Any], action: Action) -> tuple[int, dict[str, Any]]:
        model = body.get("model")
        messages = body.get("messages")
        if not model or not isinstance(messages, list) or not messages:
            return 400, _error(
                "'model' and a non-empty 'messages' are required", "invalid_request_error"
            )
        if (refused := _refuse_gpt5_parameters(str(model), body)) is not None:
            return 400, refused
        if (flex_refusal := self.flex.refuse(body)) is not None:
            return flex_refusal
        text = action.text if action.text is not None else self.responder(body)
        prompt_ids = encode("\n".join(str(m.get("content", "")) for m in messages))
        key = body.get("prompt_cache_key")
        cached = self._cached_prefix(str(model), prompt_ids, str(key) if key else None)
        reasoning = (
            REASONING_BY_EFFORT.get(str(body.get("reasoning_effort", "medium")), 64)
            if _reasons(str(model))
            else 0
        )
        visible = 0 if action.content_null else len(encode(text))
        usage = _chat_usage(len(prompt_ids), visible, cached, reasoning, action)
        if action.cost is not None:
            usage["cost"] = action.cost
        served = str(model) if "-20" in str(model) or "/" in str(model) else f"{model}-2025-08-07"
        served = self.serves or served
        content = None if action.content_null else text
        answer = {
            "id": "chatcmpl-"
            + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": served,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": action.refusal},
                    "finish_reason": action.finish_reason,
                    "logprobs": None,
                }
            ],
            "usage": usage,
            "service_tier": self.flex.tier(body),
            "system_fingerprint": "fp_memcost_test",
        }
        if action.served_by is not None:
            answer["provider"] = action.served_by
        return 200, answer

    def embeddings_response(
        self, body: dict[str, Any], action: Action
    ) -> tuple[int, dict[str, Any]]:
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not body.get("model") or not isinstance(inputs, list) or not inputs:
            return 400, _error("'model' and 'input' are required", "invalid_request_error")
        if len(inputs) > 2048:
            return 400, _error(
                "'input' must have at most 2048 items", "invalid_request_error", param="input"
            )
        if any(not isinstance(t, str) or t == "" for t in inputs):
            return 400, _error(
                "'input' cannot contain an empty string", "invalid_request_error", param="input"
            )
        dims = int(body.get("dimensions") or self.embedding_dims)
        b64 = body.get("encoding_format") == "base64"
        data = []
        for i, text in enumerate(inputs):
            vec = self.embedder(text, dims)
            emb: Any = (
                base64.b64encode(vec.astype("<f4").tobytes()).decode() if b64 else vec.tolist()
            )
            data.append({"object": "embedding", "index": i, "embedding": emb})
        tokens = sum(len(encode(t)) for t in inputs)
        return 200, {
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


def _reasons(model: str) -> bool:
    return is_known(model) and model_info(model).reasoning and not model_info(model).temperature


def _refuse_gpt5_parameters(model: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """The API's 400 body for a reasoning-model request (GPT-5, GPT-6: the registry says which)
    carrying ``max_tokens`` or a ``temperature``."""
    if not _reasons(model):
        return None
    for name, instead in (("max_tokens", "max_completion_tokens"), ("temperature", None)):
        if name in body and not (name == "temperature" and body[name] == 1):
            hint = (
                f" Use '{instead}' instead."
                if instead
                else " Only the default (1) value is supported."
            )
            return _error(
                f"Unsupported parameter: '{name}' is not supported with this model.{hint}",
                "invalid_request_error",
                param=name,
                code="unsupported_parameter",
            )
    return None


def _chat_usage(
    prompt: int, visible: int, cached: int, reasoning: int, action: Action
) -> dict[str, Any]:
    """The ``usage`` block of a chat answer (``action.usage`` overrides the counted numbers)."""
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": visible + reasoning,
        "total_tokens": prompt + visible + reasoning,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    if action.usage:
        usage.update(
            {k: v for k, v in action.usage.items() if k in ("prompt_tokens", "completion_tokens")}
        )
        usage["prompt_tokens_details"]["cached_tokens"] = action.usage.get("cached_tokens", cached)
        usage["completion_tokens_details"]["reasoning_tokens"] = action.usage.get(
            "reasoning_tokens", reasoning
        )
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return usage


def _error(
    message: str, type_: str, *, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (timeout) closes its socket while we answer: expected here.
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    owner: FakeOpenAIServer
    protocol_version = "HTTP/1.1"  # keep-alive, like the real API
    # Headers and body go out in separate writes; with Nagle's algorithm the body would wait for
    # the client's delayed ACK (~40 ms per answer), which would swamp any latency we simulate.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("x-request-id", f"req_{time.monotonic_ns()}")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def _batch_route(self, method: str) -> bool:
        """/v1/files and /v1/batches go to the server's Batch API."""
        path, owner = self.path.split("?")[0], self.owner
        if not path.startswith(("/v1/files", "/v1/batches")):
            return False
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        authorized = (
            None
            if owner.api_key is None
            else (self.headers.get("Authorization", "") == f"Bearer {owner.api_key}")
        )
        record = owner._register(path, None, authorized)
        status, payload = (
            (401, json.dumps(_error("Incorrect API key provided.", "auth")).encode())
            if authorized is False
            else owner.batches.handle(method, path, self.headers.get("Content-Type", ""), raw)
        )
        record.status, record.finished = status, time.monotonic()
        self._send(status, payload)
        return True

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if self._batch_route("GET"):
            return
        if self.path.rstrip("/") == "/v1/models":
            data = [
                {"id": name, "object": "model", "created": 0, "owned_by": "system",
                 "shutdown_date": when}
                for name, when in self.owner.models.items()
            ]  # fmt: skip
            self._send(200, json.dumps({"object": "list", "data": data}).encode())
        else:
            self._send(
                404, json.dumps(_error(f"no route {self.path}", "invalid_request_error")).encode()
            )

    def do_POST(self) -> None:  # noqa: N802
        if self._batch_route("POST"):
            return
        server = self.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = None
        authorized: bool | None = None
        if server.api_key is not None:
            authorized = self.headers.get("Authorization", "") == f"Bearer {server.api_key}"
        path = self.path.split("?")[0]
        record = server._register(path, body, authorized)
        action = server._next_action(path, body if isinstance(body, dict) else {})
        delay = server.latency_s + action.delay_s
        if delay:
            time.sleep(delay)
        status, payload, headers = self._answer(server, path, body, action, authorized)
        record.status = status
        record.finished = time.monotonic()
        if action.drop:
            self.close_connection = True
            self.connection.close()
            return
        self._send(status, payload, headers)

    def _answer(
        self,
        server: FakeOpenAIServer,
        path: str,
        body: Any,
        action: Action,
        authorized: bool | None,
    ) -> tuple[int, bytes, dict[str, str]]:
        headers: dict[str, str] = {}
        if action.drop:
            return 0, b"", headers
        if authorized is False:
            msg = "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
            return (
                401,
                json.dumps(_error(msg, "invalid_request_error", code="invalid_api_key")).encode(),
                headers,
            )
        if action.status != 200:
            if action.retry_after is not None:
                headers["Retry-After"] = action.retry_after
            if action.retry_after_ms is not None:
                headers["retry-after-ms"] = str(action.retry_after_ms)
            headers.update(action.headers or {})
            messages = {
                401: "Incorrect API key provided.",
                403: "Project does not have access to this model.",
                404: "The model does not exist or you do not have access to it.",
                429: "Rate limit reached for requests.",
                500: "The server had an error.",
            }
            msg = action.message or messages.get(action.status, f"Error {action.status}")
            kind = "server_error" if action.status >= 500 else "invalid_request_error"
            payload = _error(msg, kind, code=action.error_code)
            # The real API tells the SDK not to retry some errors; ours never retries anyway.
            return action.status, json.dumps(payload).encode(), headers
        if action.malformed:
            return (
                200,
                b'{"id": "chatcmpl-broken", "object": "chat.completion", "choices": [',
                headers,
            )
        if not isinstance(body, dict):
            return (
                400,
                json.dumps(
                    _error(
                        "We could not parse the JSON body of your request.", "invalid_request_error"
                    )
                ).encode(),
                headers,
            )
        if path in (CHAT_PATH, EMBEDDINGS_PATH):
            refusal, headers = server.limits.admit(path, body)
            if refusal is not None:
                return refusal[0], json.dumps(refusal[1]).encode(), headers
        if path == CHAT_PATH:
            status, payload = server.chat_response(body, action)
        elif path == EMBEDDINGS_PATH:
            status, payload = server.embeddings_response(body, action)
        else:
            status, payload = 404, _error(f"Invalid URL (POST {path})", "invalid_request_error")
        return status, json.dumps(payload).encode(), headers


def serve(server: FakeOpenAIServer) -> None:
    """Start ``server``, print its base URL as the first line of output, serve until Ctrl-C."""
    server.start()
    print(server.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before every answer")
    args = parser.parse_args(argv)
    serve(FakeOpenAIServer(latency_s=args.latency, host=args.host, port=args.port))


if __name__ == "__main__":
    main()
