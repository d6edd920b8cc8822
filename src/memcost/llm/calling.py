"""How one request is served: offline method, disk cache, or the API with retries.

Life of one API request: claim its hash (so duplicates in flight wait instead of paying twice)
→ disk cache → budget reservation → HTTP attempts with backoff → cache row → ledger record →
release. A call killed anywhere before the cache row is simply sent again by a rerun; one killed
between the cache row and the ledger record is recognised on rerun (the row's ``origin`` is this
run) and recorded then, as paid. Inside ``LLMClient.walkthrough()`` the run's own memo of the
walk-through's replies (:mod:`memcost.llm.walkthrough`) is asked before the disk cache.

Only answers are cached. A reply without a usable answer (``length`` with no content,
``content_filter``, a ``refusal``) is recorded as a failed, paid call, and a non-retryable 4xx
for one item as a failed call: the item fails with its reason, the stage goes on, and a rerun
asks again. ``insufficient_quota`` stops the run at once.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from memcost.calls import normalise_tags
from memcost.execution import discount_multiplier
from memcost.llm.bodies import reply_failure
from memcost.llm.embeddings import HashingEmbedder, decode_vectors, encode_vectors, l2_normalise
from memcost.llm.errors import CacheMiss, FatalAPIError, ItemRejected, TransientError
from memcost.llm.flex import (
    FLEX,
    check_flex,
    is_flex_unavailable,
    outage_hint,
)
from memcost.llm.ledger import call_key, make_record
from memcost.llm.offline import OFFLINE, OfflineMethod, run_chat, run_embedding
from memcost.llm.outcome import Outcome
from memcost.llm.providers import Endpoint, EndpointClient
from memcost.llm.requests import ChatRequest, EmbeddingRequest, Usage
from memcost.models import TIMEOUT_MAX_S, declare_model, request_timeout
from memcost.tokens import count_tokens

Request = ChatRequest | EmbeddingRequest
# A stage whose first calls all fail after their retries stops, however few calls it has (the
# in-a-row limit alone never fires on a stage smaller than it).
STAGE_PROBE_CALLS = 5


class CallMixin:
    """One call, end to end (mixed into :class:`memcost.llm.client.LLMClient`)."""

    def _call(self, request: Request, offline: OfflineMethod | None) -> Outcome:
        endpoint = self.endpoint_for(request.model)
        if endpoint is None:
            return self._offline_call(request, offline)
        if isinstance(request, ChatRequest):
            self.capabilities(request.model)  # an unknown model stops here, before any call
        if self.execution_for(request.stage) == FLEX:  # no Flex for this model: before any call
            check_flex(request.stage, request.model, endpoint.backend, self.price_overrides)
        key = request.key(endpoint.identity)
        memo = getattr(self, "_walkthrough", None)  # set inside LLMClient.walkthrough()
        if memo is None:
            return self._serve(request, endpoint, key)
        entry = memo.get(key)
        if entry is not None:  # the walk-through made this call before: never again
            return self._cached_call(request, endpoint, key, entry)
        outcome = self._serve(request, endpoint, key)
        if outcome.error is None and outcome.failure_kind is None:
            origin = "" if outcome.cached else self.run_id
            memo.put(key, {**self._entry(request, outcome, False), "origin": origin})
        return outcome

    def _serve(self, request: Request, endpoint: Endpoint, key: str) -> Outcome:
        """The disk cache, else the API (duplicates in flight wait for the first)."""
        if self.cache is None:
            return self._api_call(request, endpoint, key)
        event = self._claim(key)
        while event is not None:  # the same request is in flight: wait for its answer
            event.wait()
            event = self._claim(key)
        try:
            entry = self.cache.get(key)
            if entry is not None and isinstance(request, ChatRequest) and reply_failure(entry):
                self.cache.discard(key)  # no answer in it: ask again
                self._count("discarded_rows")
                entry = None
            if entry is not None:
                return self._cached_call(request, endpoint, key, entry)
            if self.cache_mode == "replay_only":
                raise CacheMiss(
                    f"cache_mode='replay_only' and no cached response for the {request.stage} call "
                    f"to {request.model} (prompt: {request.excerpt()!r}) in {self.cache_path}. "
                    "Run once with cache_mode='read_write' to fill the cache."
                )
            return self._api_call(request, endpoint, key)
        finally:
            self._release(key)

    def _offline_call(self, request: Request, offline: OfflineMethod | None) -> Outcome:
        if isinstance(request, EmbeddingRequest):
            if request.dimensions is not None and request.dimensions != self.embedder.dims:
                embedder = HashingEmbedder(request.dimensions)
            else:
                embedder = self.embedder
            vectors, usage, latency = run_embedding(embedder.embed, request)
            text = ""
        else:
            text, usage, latency = run_chat(offline, request)
            vectors = None
        key = request.key(OFFLINE)
        outcome = Outcome(key, OFFLINE, OFFLINE, usage, False, latency, 1, text=text, vectors=vectors)
        self._account(request, outcome, offline=True)
        self._record(request, outcome, once=True)
        return outcome

    def _cached_call(
        self, request: Request, endpoint: Endpoint, key: str, entry: dict[str, Any]
    ) -> Outcome:
        # A row this run paid for whose ledger record was lost to a kill is the original call.
        recovered = entry.get("origin") == self.run_id and not self.ledger.paid(key)
        outcome = Outcome(
            key=key,
            backend=endpoint.backend,
            provider=endpoint.host,
            usage=Usage.from_dict(entry.get("usage") or {}),
            cached=True,
            latency_s=float(entry.get("latency_s") or 0.0),
            attempts=int(entry.get("attempts") or 1),
            text=str(entry.get("text", "")),
            vectors=decode_vectors(entry["vectors"]) if "vectors" in entry else None,
            served_model=entry.get("served_model"),
            finish_reason=entry.get("finish_reason"),
            billed_usd=entry.get("billed_usd"),
            served_by=entry.get("served_by"),
            execution=(str(entry.get("execution") or "interactive") if recovered
                       else self._flex_or_interactive(request)),
        )
        self._account(request, outcome, cache_hit=True, paid=recovered)
        written = self._record(request, outcome, once=True, cached_flag=not recovered)
        if written and recovered:  # the run did pay for it
            self.budget.settle(None, request.model, outcome.usage, outcome.billed_usd,
                               outcome.execution)
            self._count("recovered")
        return outcome

    def _api_call(self, request: Request, endpoint: Endpoint, key: str) -> Outcome:
        client = self._endpoint_client(endpoint)
        reserved = self.budget.reserve(request, self._price_multiplier(request))  # BudgetStop:
        # nothing is sent
        attempts = [0, time.perf_counter()]  # attempts made, start of the last one
        rejected = False
        try:
            response, latency, error = self._send(request, client, attempts)
        except ItemRejected as exc:  # this item only: it fails, the stage goes on
            response, latency, error = None, time.perf_counter() - attempts[1], str(exc)
            rejected = True
        except FatalAPIError as exc:
            self.budget.settle(reserved, request.model, None)
            outcome = Outcome(
                key, endpoint.backend, endpoint.host, Usage(), False,
                time.perf_counter() - attempts[1], attempts[0], error=str(exc),
            )  # fmt: skip
            self._account(request, outcome, sent=True)
            self._record(request, outcome)
            raise
        except BaseException:
            self.budget.settle(reserved, request.model, None)
            raise
        outcome, usage_estimated = _outcome_of(request, endpoint, key, response, latency, attempts[0])
        outcome.execution = self._flex_or_interactive(request)
        failure = reply_failure({**response, "usage": outcome.usage.as_dict()}) if (
            response is not None and isinstance(request, ChatRequest)) else None
        if response is None:
            outcome.error = error
            outcome.failure_kind = "rejected" if rejected else None
            self.budget.settle(reserved, request.model, None)
        else:
            self.budget.settle(reserved, request.model, outcome.usage, outcome.billed_usd,
                               outcome.execution)
            if failure is not None:
                outcome.failure_kind, outcome.error = failure
        # The cache row first: a kill between the two writes leaves a row whose missing record
        # a resume recovers (_cached_call), so nothing is paid twice. A cache write that fails
        # (a full disk) still stops the call, but the billed call is on the ledger first.
        try:
            if response is not None and failure is None:
                self._store(request, outcome, usage_estimated)  # only answers are cached
        finally:
            self._account(request, outcome, sent=True, paid=response is not None,
                          usage_estimated=usage_estimated)
            self._record(request, outcome)
        # The endpoint-down stops count calls that got no answer; an item the endpoint refused
        # (a 4xx for this item, a cut-off or filtered reply) says the endpoint is up.
        self._note_failure(response is None and not rejected, request)
        return outcome

    def _send(
        self, request: Request, client: EndpointClient, attempts: list[Any]
    ) -> tuple[dict[str, Any] | None, float, str | None]:
        """HTTP attempts with backoff: ``(response or None, latency of the last attempt, error)``.

        ``attempts`` is ``[attempts made, start of the last one]``, kept up to date also when a
        fatal error propagates.
        """
        timeout = self.timeout_for(request)
        if isinstance(request, EmbeddingRequest):
            def send(r: EmbeddingRequest) -> dict[str, Any]:
                return client.embed(r, timeout)
        else:
            info, routing = self.capabilities(request.model), self.routing_for(request.model)
            tier = FLEX if self.execution_for(request.stage) == FLEX else None

            def send(r: ChatRequest) -> dict[str, Any]:
                return client.chat(r, info, routing, timeout_s=timeout, service_tier=tier)

        self._throttle.acquire(self._token_estimate(request), self._stop)
        while True:
            self._pause.wait(self._stop)
            attempts[0] += 1
            attempts[1] = t0 = time.perf_counter()
            try:
                return send(request), time.perf_counter() - t0, None
            except TransientError as exc:
                latency = time.perf_counter() - t0
                if attempts[0] >= self.retry.max_attempts:
                    return None, latency, f"{exc} (gave up after {attempts[0]} attempts)"
                delay = self.retry.delay(attempts[0], exc.retry_after, self._rng)
                if is_flex_unavailable(exc):  # Flex capacity, not our limit: this request waits
                    self._count("flex_unavailable")
                elif exc.status == 429:  # every worker waits, not only this one
                    self._pause.pause(delay)
                    self._count("rate_limited")
                if self._stop.wait(delay):  # the stage is stopping: do not retry
                    return None, latency, f"{exc} (not retried: the stage stopped)"

    def _store(self, request: Request, outcome: Outcome, usage_estimated: bool) -> None:
        """Write the paid reply to the disk cache, marked with this run's id."""
        if self.cache is None:
            return
        kind = "embed" if isinstance(request, EmbeddingRequest) else "chat"
        self.cache.put(
            outcome.key, self._entry(request, outcome, usage_estimated), kind=kind,
            stage=request.stage, model=request.model, origin=self.run_id,
        )  # fmt: skip

    def _entry(self, request: Request, outcome: Outcome, usage_estimated: bool) -> dict[str, Any]:
        """A reply as the disk cache (and the walk-through memo) store it."""
        kind = "embed" if isinstance(request, EmbeddingRequest) else "chat"
        stored: dict[str, Any] = {
            "usage": outcome.usage.as_dict(),
            "attempts": outcome.attempts,
            "latency_s": round(outcome.latency_s, 4),
            "served_model": outcome.served_model,
            "usage_estimated": usage_estimated,
            # what rebuilding this call's ledger record needs (memcost.llm.ledger.repair_ledger)
            "record": {"backend": outcome.backend, "provider": outcome.provider,
                       "prompt_version": request.prompt_version,
                       "sample_index": request.sample_index, "tags": normalise_tags(request.tags)},
        }
        if kind == "chat":
            stored.update(text=outcome.text, finish_reason=outcome.finish_reason)
            if outcome.billed_usd is not None or outcome.served_by is not None:
                stored.update(billed_usd=outcome.billed_usd, served_by=outcome.served_by)
        else:
            stored["vectors"] = encode_vectors(outcome.vectors)  # type: ignore[arg-type]
        if outcome.execution != "interactive":  # its price, for a record rebuilt from the row
            stored["execution"] = outcome.execution
        return stored

    def timeout_for(self, request: Request) -> float:
        """Seconds one attempt may take: ``request_timeout_s``, or when it is 0 sized to the
        model and the prompt (:func:`memcost.models.request_timeout`)."""
        if self.request_timeout_s > 0:
            return self.request_timeout_s
        try:
            info = self.capabilities(request.model)
        except KeyError:  # an embedding model the registry does not know: a plain one
            info = declare_model(request.model, {"max_output_tokens": 0})
        if isinstance(request, EmbeddingRequest):
            return request_timeout(info, sum(count_tokens(t) for t in request.inputs), 0)
        prompt = sum(count_tokens(c) for _, c in request.messages)
        return request_timeout(info, prompt, request.max_output_tokens)

    def _token_estimate(self, request: Request) -> int:
        """Tokens a request may use, for the tokens-per-minute throttle (0 when there is none)."""
        if self._throttle.limit is None:
            return 0
        if isinstance(request, EmbeddingRequest):
            return sum(count_tokens(t) for t in request.inputs)
        prompt = sum(count_tokens(c) for _, c in request.messages)
        return prompt + (request.max_output_tokens or 0)

    def _note_failure(self, failed: bool, request: Request) -> None:
        """Stop when the endpoint looks down: many calls in a row failing after all retries, or
        all of a stage's first calls."""
        probe_size = min(STAGE_PROBE_CALLS, self.max_consecutive_failures)
        with self._stats_lock:
            self._consecutive_failures = self._consecutive_failures + 1 if failed else 0
            tripped = self._consecutive_failures >= self.max_consecutive_failures
            probe = self.__dict__.setdefault("_stage_probe", {})
            calls, fails = probe.get(request.stage, (0, 0))
            if calls < probe_size:
                probe[request.stage] = calls, fails = calls + 1, fails + int(failed)
                stage_down = calls == probe_size and fails == probe_size
            else:
                stage_down = False
        hint = outage_hint(request.stage, self.execution_for(request.stage))
        if stage_down and not tripped:
            raise FatalAPIError(
                f"the first {probe_size} {request.stage} calls to {request.model} all failed "
                "after all retries; the endpoint seems unavailable. Nothing failed is recorded "
                "as finished; rerun later to continue." + hint
            )
        if tripped:
            raise FatalAPIError(
                f"{self.max_consecutive_failures} calls in a row failed after all retries (last: "
                f"{request.stage} call to {request.model}); the endpoint seems unavailable. "
                "Finished calls are cached and recorded; rerun later to continue." + hint
            )

    def _record(
        self,
        request: Request,
        outcome: Outcome,
        *,
        once: bool = False,
        cached_flag: bool | None = None,
    ) -> bool:
        """Write the ledger record; with ``once``, skip it if this run already recorded the call."""
        ckey = call_key(outcome.key, request.tags)
        if once and self.ledger.seen(ckey):
            self._count("replayed")
            return False
        record = make_record(
            stage=request.stage,
            provider=outcome.provider,
            model=request.model,
            backend=outcome.backend,
            request_hash=outcome.key,
            prompt_version=request.prompt_version,
            cached=outcome.cached if cached_flag is None else cached_flag,
            usage=outcome.usage,
            latency_s=outcome.latency_s,
            attempts=outcome.attempts,
            error=outcome.error,
            sample_index=request.sample_index,
            tags=request.tags,
        )
        # Optional fields (memcost.calls.OPTIONAL_FIELDS): what the provider charged and who
        # served the call, when it says so.
        if outcome.billed_usd is not None:
            record["billed_usd"] = outcome.billed_usd
        if outcome.served_by:
            record["served_by"] = outcome.served_by
        if outcome.execution != "interactive":  # batch or flex: sets the record's price
            record["execution"] = outcome.execution
        self.ledger.write(record)
        self._count("recorded")
        return True

    def _flex_or_interactive(self, request: Request) -> str:
        """``flex`` for a call of a stage run on Flex processing, else ``interactive``."""
        return FLEX if self.execution_for(request.stage) == FLEX else "interactive"

    def _price_multiplier(self, request: Request) -> float:
        """What a request is billed relative to its list price: Flex's discount, else 1."""
        if self._flex_or_interactive(request) != FLEX:
            return 1.0
        return discount_multiplier(request.model, FLEX, self.price_overrides) or 1.0

    def _claim(self, key: str) -> threading.Event | None:
        """``None`` if this thread now owns ``key``; else the event to wait for."""
        with self._inflight_lock:
            event = self._inflight.get(key)
            if event is None:
                self._inflight[key] = threading.Event()
            return event

    def _release(self, key: str) -> None:
        with self._inflight_lock:
            event = self._inflight.pop(key, None)
        if event is not None:
            event.set()

    def _endpoint_client(self, endpoint: Endpoint) -> EndpointClient:
        with self._endpoints_lock:
            client = self._endpoints.get(endpoint.identity)
            if client is None:
                client = EndpointClient(  # each request passes its own timeout (timeout_for)
                    endpoint, timeout_s=self.request_timeout_s or TIMEOUT_MAX_S,
                    env_file=self.env_file,
                )
                self._endpoints[endpoint.identity] = client
            return client


def _outcome_of(
    request: Request,
    endpoint: Endpoint,
    key: str,
    response: dict[str, Any] | None,
    latency: float,
    attempts: int,
) -> tuple[Outcome, bool]:
    """The outcome of an API reply (``None``: no reply) and whether its usage was estimated
    (a server that reports no usage is counted with o200k)."""
    base = dict(key=key, backend=endpoint.backend, provider=endpoint.host, cached=False,
                latency_s=latency, attempts=attempts)  # fmt: skip
    if response is None:
        return Outcome(usage=Usage(), **base), False
    if isinstance(request, ChatRequest):
        usage = Usage.from_dict(response["usage"]) if response["usage"] else None
        estimated = usage is None
        if usage is None:
            usage = Usage(
                prompt_tokens=sum(count_tokens(c) for _, c in request.messages),
                completion_tokens=count_tokens(response["text"]),
            )
        outcome = Outcome(
            usage=usage, text=response["text"], served_model=response["served_model"],
            finish_reason=response["finish_reason"], billed_usd=response.get("billed_usd"),
            served_by=response.get("served_by"), **base,
        )  # fmt: skip
        return outcome, estimated
    prompt = response["prompt_tokens"]
    estimated = prompt is None
    if prompt is None:
        prompt = sum(count_tokens(t) for t in request.inputs)
    outcome = Outcome(
        usage=Usage(prompt_tokens=int(prompt)), vectors=l2_normalise(response["vectors"]),
        served_model=response["served_model"], **base,
    )  # fmt: skip
    return outcome, estimated
