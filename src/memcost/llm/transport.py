"""Where a request goes and how it is sent: endpoints, timeouts, retries, pacing, outages.

:class:`Transport` is the client's part that talks to the network. It resolves each model to
an endpoint (``None``: the offline backend), keeps one HTTP client per endpoint, sends a request
with bounded retries and backoff, paces each model to the account's rate limits
(:mod:`memcost.llm.pacing`: a 429 slows that model's requests and spaces their retries; a Flex
capacity answer delays only its own request), and stops the stage when the endpoint looks
down. It never touches the cache, the ledger or the budget: :mod:`memcost.llm.calling` does.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from memcost.io import sign_of_life
from memcost.llm.config import ClientConfig
from memcost.llm.errors import FatalAPIError, TransientError
from memcost.llm.flex import FLEX, is_flex_unavailable, outage_hint
from memcost.llm.pacing import Pacer
from memcost.llm.providers import Endpoint, EndpointClient, resolve_endpoint
from memcost.llm.requests import ChatRequest, EmbeddingRequest
from memcost.llm.stats import Accounting
from memcost.models import (
    TIMEOUT_MAX_S,
    ModelInfo,
    declare_model,
    model_info,
    request_timeout,
)
from memcost.tokens import count_tokens

Request = ChatRequest | EmbeddingRequest
# A stage whose first calls all fail after their retries stops, however few calls it has (the
# in-a-row limit alone never fires on a stage smaller than it).
STAGE_PROBE_CALLS = 5
SAY_EVERY_S = 30.0  # the least time between two signs of life about waiting requests


class Transport:
    """Endpoints and HTTP attempts for one client (see the module's docstring)."""

    def __init__(self, config: ClientConfig, accounting: Accounting):
        self.config = config
        self.accounting = accounting
        self.stop = threading.Event()  # set when a stage stops: workers give up retrying
        self.pacer = Pacer(config.rate_limits, config.max_concurrency)
        self.rng = random.Random()
        self._routes: dict[str, Endpoint | None] = {}
        self._clients: dict[str, EndpointClient] = {}
        self._lock = threading.Lock()
        self._consecutive_failures = 0
        self._consecutive_rate_limited = 0  # of those, calls whose last answer was a 429
        self._stage_probe: dict[str, tuple[int, int]] = {}
        self._last_said = -SAY_EVERY_S

    # ------------------------------------------------------------------ where

    def endpoint_for(self, model: str) -> Endpoint | None:
        """Where ``model``'s calls go (``None``: the offline backend)."""
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
        """What ``model`` accepts: the caller's declaration, else the registry; an unknown model
        raises :class:`memcost.models.UnknownModelError` naming what to add."""
        return model_info(model, self.config.model_capabilities)

    def client_for(self, endpoint: Endpoint) -> EndpointClient:
        """The HTTP client of ``endpoint`` (one per endpoint; each request passes its timeout)."""
        with self._lock:
            client = self._clients.get(endpoint.identity)
            if client is None:
                client = EndpointClient(
                    endpoint,
                    timeout_s=self.config.request_timeout_s or TIMEOUT_MAX_S,
                    env_file=self.config.env_file,
                )
                self._clients[endpoint.identity] = client
            return client

    def timeout_for(self, request: Request) -> float:
        """Seconds one attempt may take: ``request_timeout_s``, or when it is 0 sized to the
        model and the prompt (:func:`memcost.models.request_timeout`)."""
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

    def send(
        self, request: Request, endpoint: Endpoint, attempts: list[Any]
    ) -> tuple[dict[str, Any] | None, float, str | None]:
        """HTTP attempts with backoff: ``(response or None, latency of the last attempt, error)``.

        ``attempts`` is ``[attempts made, start of the last one]``, kept up to date also when a
        fatal error propagates.
        """
        client, timeout = self.client_for(endpoint), self.timeout_for(request)
        if isinstance(request, EmbeddingRequest):

            def send(r: EmbeddingRequest) -> dict[str, Any]:
                return client.embed(r, timeout)
        else:
            info, routing = self.capabilities(request.model), self.config.routing_for(request.model)
            tier = FLEX if self.config.execution_for(request.stage) == FLEX else None

            def send(r: ChatRequest) -> dict[str, Any]:
                return client.chat(r, info, routing, timeout_s=timeout, service_tier=tier)

        pacer = self.pacer.model(request.model)
        retry = self.config.retry
        while True:
            ticket = pacer.acquire(self._token_estimate(request), self.stop)
            if ticket is None:
                return None, 0.0, "not sent: the stage stopped"
            attempts[0] += 1
            attempts[1] = t0 = time.perf_counter()
            try:
                response = send(request)
            except TransientError as exc:
                latency = time.perf_counter() - t0
                limited = exc.status == 429 and not is_flex_unavailable(exc)
                pacer.settle(
                    ticket,
                    reading=exc.reading,
                    rate_limited=limited,
                    hold_s=exc.retry_after if limited else None,
                )
                if attempts[0] >= retry.max_attempts:
                    said = " (rate limited: HTTP 429)" if limited else ""
                    return None, latency, f"{exc}{said} (gave up after {attempts[0]} attempts)"
                delay = retry.delay(attempts[0], exc.retry_after, self.rng)
                if is_flex_unavailable(exc):  # Flex capacity, not our limit: this request waits
                    self.accounting.count("flex_unavailable")
                    self._say_waiting(
                        f"Flex has no capacity now (HTTP 429): this request waits {delay:.2g} s",
                        "flex_unavailable",
                    )
                elif limited:  # the pacer spaces the retries out (no thundering herd)
                    delay = pacer.retry_delay_s(exc.retry_after)
                    self.accounting.count("rate_limited")
                    wait = exc.retry_after if exc.retry_after is not None else delay
                    self._say_waiting(
                        f"rate limited (HTTP 429) on {request.model}: its requests "
                        f"wait {wait:.2g} s, then leave one by one",
                        "rate_limited",
                    )
                if self.stop.wait(delay):  # the stage is stopping: do not retry
                    return None, latency, f"{exc} (not retried: the stage stopped)"
                continue
            except BaseException:
                pacer.settle(ticket)
                raise
            pacer.settle(
                ticket, used_tokens=_used_tokens(response), reading=response.pop("rate_limit", None)
            )
            return response, time.perf_counter() - t0, None

    def _say_waiting(self, what: str, counter: str) -> None:
        """A sign of life while requests wait, at most one every 30 s (so a long run of 429s
        shows on the terminal without flooding it)."""
        now = time.monotonic()
        with self._lock:
            if now - self._last_said < SAY_EVERY_S:
                return
            self._last_said = now
        sign_of_life(f"{what}; {getattr(self.accounting.stats, counter)} so far this notebook")

    @staticmethod
    def _token_estimate(request: Request) -> int:
        """Tokens a request may use (its prompt and its output limit), for its model's
        tokens-per-minute bucket (counted even before one is known: the first reply's headers
        may create it, and what is in flight then must count against it)."""
        if isinstance(request, EmbeddingRequest):
            return sum(count_tokens(t) for t in request.inputs)
        prompt = sum(count_tokens(c) for _, c in request.messages)
        return prompt + (request.max_output_tokens or 0)

    def note(self, failed: bool, request: Request, *, rate_limited: bool = False) -> None:
        """Stop when the endpoint looks down: many calls in a row failing after all retries, or
        all of a stage's first calls. When every one of them was refused with a 429, the
        account's limits are the cause, and the message says so."""
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


def _used_tokens(response: dict[str, Any]) -> float | None:
    """Tokens a reply says it used (prompt and completion), for settling its reservation."""
    usage = response.get("usage")
    if isinstance(usage, dict):
        return float((usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0))
    if response.get("prompt_tokens") is not None:  # an embedding reply
        return float(response["prompt_tokens"])
    return None
