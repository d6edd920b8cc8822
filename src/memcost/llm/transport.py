"""Where a request goes and how each of the SDK's attempts is paced, counted and stopped
(docs/architecture.md, "Model calls")."""

from __future__ import annotations

import json
import math
import random
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memcost.catalog import (
    FLEX_UNAVAILABLE_CODE,
    TIMEOUT_MAX_S,
    ModelInfo,
    declare_model,
    model_info,
    per_model,
    request_timeout,
)
from memcost.io import sign_of_life
from memcost.llm.config import Limits, parse_rate_limits  # noqa: F401
from memcost.llm.providers import (
    FLEX,
    Endpoint,
    EndpointClient,
    Reading,
    hold_s,
    outage_hint,
    resolve_endpoint,
)
from memcost.llm.requests import (
    ChatRequest,
    EmbeddingRequest,
    FatalAPIError,
    ItemRejected,
    TransientError,
)
from memcost.text import count_tokens

if TYPE_CHECKING:
    from memcost.llm.accounting import Accounting
    from memcost.llm.config import ClientConfig

# --- Pacing -----------------------------------------------------------------------------------

WINDOW_S = 60.0  # the providers' limits are per minute
SAFETY = 0.95  # pace to this share of a limit: replies and clocks are never exactly in step
HEADROOM = 0.10  # a reply showing more than this share of a limit left is headroom to grow
START_CONCURRENCY = 4  # requests in flight before any reply has shown headroom


class _Bucket:
    """One per-minute limit as a bucket refilled continuously, as a provider counts it."""

    def __init__(self, per_minute: float):
        self.limit = per_minute
        self.level = self.capacity

    @property
    def capacity(self) -> float:
        return self.limit * SAFETY

    @property
    def rate(self) -> float:
        return self.capacity / WINDOW_S

    def refill(self, elapsed: float) -> None:
        self.level = min(self.capacity, self.level + elapsed * self.rate)

    def wait_s(self, amount: float) -> float:
        """Seconds until ``amount`` fits (more than the bucket holds: until it is full)."""
        amount = min(amount, self.capacity)
        return 0.0 if self.level >= amount else (amount - self.level) / self.rate

    def learn(self, limit: float | None, remaining: float | None, outstanding: float) -> bool:
        """A reply's headers: the provider's limit replaces ours, its remaining count (less what is
        in flight since) caps our level; whether it showed headroom."""
        if limit is not None and limit > 0:
            self.limit = limit
            self.level = min(self.level, self.capacity)
        if remaining is None:
            return True
        self.level = min(self.level, remaining * SAFETY - outstanding)
        return limit is None or remaining > HEADROOM * limit


@dataclass
class Ticket:
    model: str
    tokens: float
    sent: float
    serial: int


class ModelPacer:
    """The buckets and the concurrency window of one model."""

    def __init__(self, model: str, stated: Limits | None, ceiling: int, rng: random.Random):
        stated = stated or Limits()
        self.model, self.ceiling, self.rng = model, max(1, ceiling), rng
        self.requests = _Bucket(stated.rpm) if stated.rpm else None
        self.tokens = _Bucket(stated.tpm) if stated.tpm else None
        self.window = float(min(self.ceiling, START_CONCURRENCY))
        self.inflight: dict[int, Ticket] = {}
        self.serial = 0
        self.waited_s = 0.0
        self.rate_limited = 0
        self._clock = time.monotonic()
        self._cond = threading.Condition()
        self._next_release = 0.0  # after a 429: the earliest time the next request may go
        self._drain_serial = 0  # the last request sent before the drain began

    # ------------------------------------------------------------------ sending

    def acquire(self, tokens: float, stop: threading.Event | None = None) -> Ticket | None:
        """Block until a request of ``tokens`` may go; ``None`` when ``stop`` was set."""
        start = time.monotonic()
        with self._cond:
            while True:
                if stop is not None and stop.is_set():
                    return None
                wait = self._wait_s(tokens)
                if wait <= 0:
                    break
                self._cond.wait(min(wait, 0.5))
            now = time.monotonic()
            for bucket, amount in ((self.requests, 1.0), (self.tokens, tokens)):
                if bucket is not None:
                    bucket.level -= amount
            if self._next_release > 0:  # draining after a 429: space the next one too
                self._next_release = now + self._spacing()
            self.serial += 1
            ticket = Ticket(self.model, float(tokens), now, self.serial)
            self.inflight[ticket.serial] = ticket
            self.waited_s += now - start
            return ticket

    def _wait_s(self, tokens: float) -> float:
        now = time.monotonic()
        for bucket in (self.requests, self.tokens):
            if bucket is not None:
                bucket.refill(now - self._clock)
        self._clock = now
        if len(self.inflight) >= int(self.window):
            return 0.5  # woken by a settle
        waits = [self._next_release - now]
        if self.requests is not None:
            waits.append(self.requests.wait_s(1.0))
        if self.tokens is not None:
            waits.append(self.tokens.wait_s(tokens))
        return max(waits)

    def _spacing(self) -> float:
        """The jittered gap between two releases while draining."""
        base = 1.0 / self.requests.rate if self.requests is not None else 0.1
        return base * (0.5 + self.rng.random())

    # ------------------------------------------------------------------ replies

    def settle(
        self,
        ticket: Ticket | None,
        *,
        used_tokens: float | None = None,
        reading: Reading | None = None,
        rate_limited: bool = False,
        hold_s: float | None = None,
    ) -> None:
        """A reply: give back unused tokens, learn from the headers, grow or halve the window;
        ``hold_s``, a 429's hint, holds every request of the model."""
        if ticket is None:
            return
        with self._cond:
            self.inflight.pop(ticket.serial, None)
            if (
                self.tokens is not None
                and used_tokens is not None
                and reading is None
                and not rate_limited
            ):  # a provider that sends headers says what it counted
                self.tokens.level += max(0.0, ticket.tokens - used_tokens)
            headroom = self._learn(ticket, reading)
            if rate_limited:
                self.rate_limited += 1
                self.window = max(1.0, self.window / 2)
                self._drain(hold_s)
            else:
                if self._next_release and ticket.serial > self._drain_serial:
                    self._next_release = 0.0  # sent during the drain and answered: it is over
                if headroom and not self._next_release:
                    self.window = min(float(self.ceiling), self.window + 1)
            self._cond.notify_all()

    def _learn(self, ticket: Ticket, reading: Reading | None) -> bool:
        if reading is None:
            return True
        later = [t for t in self.inflight.values() if t.serial > ticket.serial]
        headroom = True
        for name, outstanding in (
            ("requests", float(len(later))),
            ("tokens", sum(t.tokens for t in later)),
        ):
            limit = getattr(reading, f"limit_{name}")
            remaining = getattr(reading, f"remaining_{name}")
            bucket = getattr(self, name)
            if bucket is None and limit:  # a limit nobody stated: learned from the reply
                bucket = _Bucket(limit)
                setattr(self, name, bucket)
            if bucket is not None:
                headroom = bucket.learn(limit, remaining, outstanding) and headroom
        return headroom

    def _drain(self, hold_s: float | None) -> None:
        """After a 429 nothing goes before the hint, then requests leave one by one."""
        for bucket in (self.requests, self.tokens):
            if bucket is not None:
                bucket.level = min(bucket.level, 0.0)
        start = time.monotonic() + (hold_s if hold_s and math.isfinite(hold_s) else 0.0)
        self._next_release = max(self._next_release, start + self._spacing())
        self._drain_serial = self.serial

    def state(self) -> dict[str, Any]:
        with self._cond:
            return {
                "model": self.model,
                "rpm": self.requests.limit if self.requests else None,
                "tpm": self.tokens.limit if self.tokens else None,
                "concurrency": int(self.window),
                "rate_limited": self.rate_limited,
                "waited_s": round(self.waited_s, 3),
            }


class Pacer:
    def __init__(self, stated: Mapping[str, Limits] | None, ceiling: int):
        self.stated = dict(stated or {})
        self.ceiling = ceiling
        self.rng = random.Random()
        self._models: dict[str, ModelPacer] = {}
        self._lock = threading.Lock()

    def model(self, model: str) -> ModelPacer:
        with self._lock:
            pacer = self._models.get(model)
            if pacer is None:
                pacer = self._models[model] = ModelPacer(
                    model, per_model(self.stated, model), self.ceiling, self.rng
                )
            return pacer

    def state(self) -> list[dict[str, Any]]:
        with self._lock:
            models = list(self._models.values())
        return [m.state() for m in models]


# --- The transport --------------------------------------------------------------------------

Request = ChatRequest | EmbeddingRequest
# A stage whose first calls all fail after their retries stops, however few calls it has (the
# in-a-row limit alone never fires on a stage smaller than it).
STAGE_PROBE_CALLS = 5
SAY_EVERY_S = 30.0  # the least time between two signs of life about waiting requests
# Why a started request is not being sent (the heartbeat counts these apart from those in flight)
WAIT_429 = "waiting out HTTP 429 (rate limited)"
WAIT_RETRY = "waiting to be retried"
WAIT_PACED = "held by the model's rate limit"


class StageStopped(Exception): ...


@dataclass
class Sent:
    response: dict[str, Any] | None = None
    error: str | None = None
    attempts: int = 0
    latency_s: float = 0.0  # of the last attempt
    rate_limited: bool = False  # the last answer was a 429
    fatal: FatalAPIError | None = None  # a 4xx that retrying cannot fix (ItemRejected: one item)


@dataclass
class _Flight:
    """The request this thread is sending: its model's pacer, its reservation, its attempts."""

    pacer: ModelPacer
    tokens: float
    attempts: int = 0
    ticket: Ticket | None = None
    sent: float = 0.0
    latency_s: float = 0.0
    answered: tuple[Ticket, Reading | None] | None = None  # settled with the tokens used


class Transport:
    """Endpoints and the SDK's attempts for one client."""

    def __init__(self, config: ClientConfig, accounting: Accounting):
        self.config = config
        self.accounting = accounting
        self.stop = threading.Event()  # set when a stage stops: no new attempt starts
        self.pacer = Pacer(config.rate_limits, config.max_concurrency)
        self._routes: dict[str, Endpoint | None] = {}
        self._clients: dict[str, EndpointClient] = {}
        self._lock = threading.Lock()
        self._local = threading.local()
        self._consecutive_failures = 0
        self._consecutive_rate_limited = 0  # of those, calls whose last answer was a 429
        self._stage_probe: dict[str, tuple[int, int]] = {}
        self._last_said = -SAY_EVERY_S
        self._waits: dict[int, str] = {}  # thread -> why its request is not being sent now

    def _wait(self, why: str | None) -> None:
        with self._lock:
            if why is None:
                self._waits.pop(threading.get_ident(), None)
            else:
                self._waits[threading.get_ident()] = why

    @contextmanager
    def _waiting(self, why: str) -> Iterator[None]:
        self._wait(why)
        try:
            yield
        finally:
            self._wait(None)

    def waiting(self) -> list[str]:
        """Why each request not on the wire waits (the heartbeat's line)."""
        with self._lock:
            return list(self._waits.values())

    # ------------------------------------------------------------------ where

    def endpoint_for(self, model: str) -> Endpoint | None:
        """Where ``model``'s calls go (``None``: offline)."""
        if model not in self._routes:
            c = self.config
            backend = c.backend_for(model)
            self._routes[model] = (
                None
                if backend == "offline"
                else resolve_endpoint(
                    backend,
                    base_url=c.base_url,
                    api_key_env=c.api_key_env,
                    primary=backend == c.backend,
                    custom_routed="custom" in c.model_backends.values(),
                )
            )
        return self._routes[model]

    def capabilities(self, model: str) -> ModelInfo:
        return model_info(model, self.config.model_capabilities)

    def client_for(self, endpoint: Endpoint) -> EndpointClient:
        with self._lock:
            client = self._clients.get(endpoint.identity)
            if client is None:
                client = EndpointClient(
                    endpoint,
                    timeout_s=self.config.request_timeout_s or TIMEOUT_MAX_S,
                    max_retries=self.config.max_retries,
                    hooks=self,
                    env_file=self.config.env_file,
                )
                self._clients[endpoint.identity] = client
            return client

    def timeout_for(self, request: Request) -> float:
        """``request_timeout_s``, or (0) sized to the model and the prompt."""
        if self.config.request_timeout_s > 0:
            return self.config.request_timeout_s
        try:
            info = self.capabilities(request.model)
        except KeyError:  # an embedding model the registry does not know: a plain one
            info = declare_model(request.model, {"max_output_tokens": 0})
        if isinstance(request, EmbeddingRequest):
            return request_timeout(info, sum(count_tokens(t) for t in request.inputs), 0)
        prompt = sum(count_tokens(c) for _, c in request.messages)
        return request_timeout(info, prompt, request.max_output_tokens)

    # ------------------------------------------------------------------ how

    def send(self, request: Request, endpoint: Endpoint) -> Sent:
        """The request through the SDK and its retries."""
        client, timeout = self.client_for(endpoint), self.timeout_for(request)
        flight = _Flight(self.pacer.model(request.model), self._token_estimate(request))
        self._local.flight = flight
        sent = Sent()
        try:
            if isinstance(request, EmbeddingRequest):
                sent.response = client.embed(request, timeout)
            else:
                info, routing = (
                    self.capabilities(request.model),
                    self.config.routing_for(request.model),
                )
                tier = FLEX if self.config.execution_for(request.stage) == FLEX else None
                sent.response = client.chat(
                    request, info, routing, timeout_s=timeout, service_tier=tier
                )
        except StageStopped as exc:
            sent.error = str(exc)
        except TransientError as exc:
            sent.rate_limited = exc.status == 429 and exc.code != FLEX_UNAVAILABLE_CODE
            said = " (rate limited: HTTP 429)" if sent.rate_limited else ""
            sent.error = f"{exc}{said} (gave up after {flight.attempts} attempts)"
        except ItemRejected as exc:  # this item only: it fails, the stage goes on
            sent.error, sent.fatal = str(exc), exc
        except FatalAPIError as exc:
            sent.error, sent.fatal = str(exc), exc
        finally:
            self._local.flight = None
            self._wait(None)
            if flight.ticket is not None:  # an attempt that got no answer (a timeout)
                flight.pacer.settle(flight.ticket)
        if flight.answered is not None:
            ticket, reading = flight.answered
            flight.pacer.settle(ticket, used_tokens=_used_tokens(sent.response), reading=reading)
        sent.attempts, sent.latency_s = flight.attempts, flight.latency_s
        return sent

    def on_request(self, http_request: Any) -> None:
        """Before every attempt (the SDK's event hook): wait for its model's buckets, unless the
        stage stopped."""
        flight: _Flight | None = getattr(self._local, "flight", None)
        if flight is None:  # an SDK call of its own (the Batch API's, the model listing)
            return
        if flight.ticket is not None:  # the attempt before got no answer (a timeout)
            flight.pacer.settle(flight.ticket)
        with self._waiting(WAIT_PACED):
            flight.ticket = flight.pacer.acquire(flight.tokens, self.stop)
        if flight.ticket is None:
            raise StageStopped("not sent: the stage stopped")
        flight.attempts += 1
        flight.sent = time.perf_counter()

    def on_response(self, response: Any) -> None:
        """After every attempt: settle its reservation, learn from its headers; a 429 holds its
        model (a Flex 429 only its request)."""
        flight: _Flight | None = getattr(self._local, "flight", None)
        if flight is None or flight.ticket is None:
            return
        ticket, flight.ticket = flight.ticket, None
        flight.latency_s = time.perf_counter() - flight.sent
        headers, status = response.headers, response.status_code
        reading = Reading.from_headers(headers)
        if status < 400:
            flight.answered = (ticket, reading)
            return
        code = _error_code(response) if status == 429 else None
        if code == "insufficient_quota":  # no credit: retrying cannot help, the run stops
            response.headers["x-should-retry"] = "false"  # the header the SDK obeys
            flight.pacer.settle(ticket, reading=reading)
        elif code == FLEX_UNAVAILABLE_CODE:
            flight.pacer.settle(ticket, reading=reading)
            self._say_waiting(
                "Flex has no capacity now (HTTP 429): this request waits", "flex_unavailable"
            )
            self._wait(WAIT_RETRY)
        elif status == 429:
            hold = hold_s(headers, resets=reading is None)
            flight.pacer.settle(ticket, reading=reading, rate_limited=True, hold_s=hold)
            waits = f" {hold:.2g} s, then" if hold is not None else ""
            self._say_waiting(
                f"rate limited (HTTP 429) on {flight.pacer.model}: its requests wait{waits} "
                "leave one by one",
                "rate_limited",
            )
            self._wait(WAIT_429)
        else:
            flight.pacer.settle(ticket, reading=reading)
            self._wait(WAIT_RETRY)

    def _say_waiting(self, what: str, counter: str) -> None:
        """Count it; say so at most every 30 s."""
        self.accounting.count(counter)
        now = time.monotonic()
        with self._lock:
            if now - self._last_said < SAY_EVERY_S:
                return
            self._last_said = now
        sign_of_life(f"{what}; {getattr(self.accounting.stats, counter)} so far this notebook")

    @staticmethod
    def _token_estimate(request: Request) -> int:
        """A request's prompt and output limit, for its model's token bucket."""
        if isinstance(request, EmbeddingRequest):
            return sum(count_tokens(t) for t in request.inputs)
        prompt = sum(count_tokens(c) for _, c in request.messages)
        return prompt + (request.max_output_tokens or 0)

    def note(self, failed: bool, request: Request, *, rate_limited: bool = False) -> None:
        """Stop when the endpoint looks down: many calls in a row failed after their retries, or all
        of a stage's first calls (all 429s: the account's limits, and the message says so)."""
        limit = self.config.max_consecutive_failures
        probe_size = min(STAGE_PROBE_CALLS, limit)
        with self._lock:
            self._consecutive_failures = self._consecutive_failures + 1 if failed else 0
            self._consecutive_rate_limited = (
                self._consecutive_rate_limited + 1 if failed and rate_limited else 0
            )
            all_limited = self._consecutive_rate_limited == self._consecutive_failures
            tripped = self._consecutive_failures >= limit
            calls, fails = self._stage_probe.get(request.stage, (0, 0))
            stage_down = False
            if calls < probe_size:
                self._stage_probe[request.stage] = calls, fails = calls + 1, fails + int(failed)
                stage_down = calls == probe_size and fails == probe_size
        hint = outage_hint(request.stage, self.config.execution_for(request.stage))
        if (stage_down or tripped) and all_limited:
            raise FatalAPIError(
                f"{self._consecutive_failures} calls in a row were rate limited (HTTP 429) after "
                f"all retries (last: {request.stage} call to {request.model}): the account's "
                "limits are below this run's pace. State them (client: {rate_limits: {"
                f"{request.model}: {{rpm: ..., tpm: ...}}}}}}) or lower the ceiling (client: "
                "{max_concurrency: 2}), or wait for the limit to "
                "reset; finished calls are cached and recorded, so a rerun continues."
            )
        if stage_down and not tripped:
            raise FatalAPIError(
                f"the first {probe_size} {request.stage} calls to {request.model} all failed "
                "after all retries; the endpoint seems unavailable. Nothing failed is recorded "
                "as finished; rerun later to continue." + hint
            )
        if tripped:
            raise FatalAPIError(
                f"{limit} calls in a row failed after all retries (last: {request.stage} call "
                f"to {request.model}); the endpoint seems unavailable. Finished calls are cached "
                "and recorded; rerun later to continue." + hint
            )


def _error_code(response: Any) -> str | None:
    try:
        response.read()
        return (json.loads(response.content).get("error") or {}).get("code")
    except (ValueError, AttributeError, TypeError):
        return None


def _used_tokens(response: dict[str, Any] | None) -> float | None:
    usage = (response or {}).get("usage")
    if isinstance(usage, dict):
        return float((usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0))
    if (response or {}).get("prompt_tokens") is not None:  # an embedding reply
        return float(response["prompt_tokens"])
    return None
