"""The one client every model call goes through: the offline stand-ins, the store of calls, the API;
budget, pacing, re-asks (docs/architecture.md, "Model calls")."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar

import numpy as np

from memcost.calls import IN_FLIGHT_AT_KILL, CallStore, call_key, normalise_tags, spent_usd
from memcost.catalog import ModelInfo, discount_multiplier
from memcost.llm.accounting import Accounting, Budget, BudgetStop, ClientStats
from memcost.llm.batch import BatchPrefill
from memcost.llm.config import ClientConfig
from memcost.llm.offline import (
    DEFAULT_DIMS,
    OFFLINE,
    HashingEmbedder,
    OfflineMethod,
    decode_vectors,
    encode_vectors,
    l2_normalise,
    plan_batches,
    prompt_tokens,
    run_chat,
    run_embedding,
)
from memcost.llm.providers import (
    FLEX,
    Endpoint,
    check_credentials,
    check_flex,
    larger_output_limit,
    reply_failure,
)
from memcost.llm.requests import (
    BudgetExceeded,
    CacheMiss,
    CallResult,
    ChatRequest,
    EmbeddingRequest,
    ItemRejected,
    LLMError,
    Usage,
    reask_request,
)
from memcost.llm.scheduler import Heartbeat, ProgressBar, run_scheduled
from memcost.llm.transport import Transport
from memcost.paper import EMBEDDING_MODEL
from memcost.paths import RunPaths
from memcost.text import count_tokens

__all__ = ["PARSE_ERRORS", "ClientConfig", "ClientStats", "LLMClient", "ParseFn", "make_client"]

Request = ChatRequest | EmbeddingRequest
T = TypeVar("T")
ParseFn = Callable[[str], Any]
# What a stage's ``parse`` may raise to say "this reply is unusable" (anything else is a bug in
# the stage and propagates).
PARSE_ERRORS = (ValueError, TypeError, KeyError, IndexError)


def make_record(request: Request, outcome: CallResult, *, cached: bool | None = None) -> dict:
    """The call's record as the store keeps it (:data:`memcost.calls.BASE_FIELDS`, the optional
    fields, the tags)."""
    usage = outcome.usage
    record: dict[str, Any] = {
        "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "stage": request.stage,
        "provider": outcome.provider,
        "model": request.model,
        "backend": outcome.backend,
        "request_hash": outcome.request_hash,
        "prompt_version": request.prompt_version,
        "cached": outcome.cached if cached is None else cached,
        "prompt_tokens": usage.prompt_tokens,
        "cached_prompt_tokens": usage.cached_prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "latency_s": round(float(outcome.latency_s), 4),
        "attempts": outcome.attempts,
        "error": outcome.error,
        "sample_index": request.sample_index,
    }
    if outcome.billed_usd is not None:  # what the provider charged, when it says so
        record["billed_usd"] = outcome.billed_usd
    if outcome.served_by:  # the upstream that served it (OpenRouter)
        record["served_by"] = outcome.served_by
    if outcome.served_model:  # what the server says answered (not always what was asked)
        record["served_model"] = outcome.served_model
    if outcome.execution != "interactive":  # batch or flex: sets the record's price
        record["execution"] = outcome.execution
    record.update(normalise_tags(request.tags))
    return record


def _in_flight_record(
    request: Request, endpoint: Endpoint, key: str, execution: str
) -> dict[str, Any]:
    usage = Usage(prompt_tokens=prompt_tokens(request))
    outcome = CallResult(request, key, endpoint.backend, endpoint.host, usage, False, 0.0, 1,
                         error=IN_FLIGHT_AT_KILL, execution=execution)  # fmt: skip
    return make_record(request, outcome)


def answer_of(request: Request, outcome: CallResult, usage_estimated: bool) -> dict[str, Any]:
    """An API reply as the store keeps it: what a later call is served."""
    stored: dict[str, Any] = {
        "usage": outcome.usage.as_dict(),
        "attempts": outcome.attempts,
        "latency_s": round(outcome.latency_s, 4),
        "served_model": outcome.served_model,
        "usage_estimated": usage_estimated,
    }
    if isinstance(request, ChatRequest):
        stored.update(text=outcome.text, finish_reason=outcome.finish_reason)
        if outcome.billed_usd is not None or outcome.served_by is not None:
            stored.update(billed_usd=outcome.billed_usd, served_by=outcome.served_by)
    else:
        stored["vectors"] = encode_vectors(outcome.vectors)  # type: ignore[arg-type]
    if outcome.execution != "interactive":
        stored["execution"] = outcome.execution
    return stored


def outcome_of(
    request: Request,
    endpoint: Endpoint,
    key: str,
    response: dict[str, Any] | None,
    latency: float,
    attempts: int,
) -> tuple[CallResult, bool]:
    """The result of an API reply (``None``: none) and whether its usage was estimated (a server
    that reports none is counted with o200k)."""
    base = dict(request=request, request_hash=key, backend=endpoint.backend,
                provider=endpoint.host, cached=False, latency_s=latency,
                attempts=attempts)  # fmt: skip
    if response is None:
        return CallResult(usage=Usage(), **base), False
    if isinstance(request, ChatRequest):
        usage = Usage.from_dict(response["usage"]) if response["usage"] else None
        estimated = usage is None
        if usage is None:
            usage = Usage(
                prompt_tokens=prompt_tokens(request),
                completion_tokens=count_tokens(response["text"]),
            )
        outcome = CallResult(
            usage=usage, text=response["text"], served_model=response["served_model"],
            finish_reason=response["finish_reason"], billed_usd=response.get("billed_usd"),
            served_by=response.get("served_by"), **base,
        )  # fmt: skip
        return outcome, estimated
    prompt = response["prompt_tokens"]
    estimated = prompt is None
    if prompt is None:
        prompt = prompt_tokens(request)
    outcome = CallResult(
        usage=Usage(prompt_tokens=int(prompt)), vectors=l2_normalise(response["vectors"]),
        served_model=response["served_model"], **base,
    )  # fmt: skip
    return outcome, estimated


class CallPath:
    """One call, end to end: offline, stored or sent, always recorded."""

    def __init__(
        self,
        config: ClientConfig,
        *,
        transport: Transport,
        store: CallStore,
        budget: Budget,
        accounting: Accounting,
    ):
        self.config = config
        self.transport = transport
        self.store = store
        self.budget = budget
        self.accounting = accounting
        self.embedder = HashingEmbedder(config.embedding_dims)
        self._inflight: dict[str, threading.Event] = {}
        self._inflight_lock = threading.Lock()

    def call(self, request: Request, offline: OfflineMethod | None) -> CallResult:
        endpoint = self.transport.endpoint_for(request.model)
        if endpoint is None:
            return self._offline_call(request, offline)
        if isinstance(request, ChatRequest):
            self.transport.capabilities(request.model)  # an unknown model stops here
        if self.config.execution_for(request.stage) == FLEX:  # no Flex for it: before any call
            check_flex(request.stage, request.model, endpoint.backend, self.config.price_overrides)
        key = request.key(endpoint.identity)
        event = self._claim(key)
        while event is not None:  # the same request is in flight: wait for its answer
            event.wait()
            event = self._claim(key)
        try:
            stored = self.store.answer(key) if self.config.cache_mode != "off" else None
            if stored is not None:
                return self._stored_call(request, endpoint, key, stored)
            if self.config.cache_mode == "replay_only":
                raise CacheMiss(
                    f"cache_mode='replay_only' and no stored answer for the {request.stage} call "
                    f"to {request.model} (prompt: {request.excerpt()!r}) in {self.store.path}. "
                    "Run once with cache_mode='read_write' to make the call."
                )
            return self._api_call(request, endpoint, key)
        finally:
            self._release(key)

    def _offline_call(self, request: Request, offline: OfflineMethod | None) -> CallResult:
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
        outcome = CallResult(
            request, key, OFFLINE, OFFLINE, usage, False, latency, 1, text=text, vectors=vectors
        )
        self.accounting.add(request, outcome, offline=True)
        self.record(request, outcome, once=True, offline=True)
        return outcome

    def _stored_call(
        self, request: Request, endpoint: Endpoint, key: str, stored: dict[str, Any]
    ) -> CallResult:
        """Recorded as cached unless this item's call is recorded already; another run's answer is
        copied into this run's store."""
        outcome = CallResult(
            request=request,
            request_hash=key,
            backend=endpoint.backend,
            provider=endpoint.host,
            usage=Usage.from_dict(stored.get("usage") or {}),
            cached=True,
            latency_s=float(stored.get("latency_s") or 0.0),
            attempts=int(stored.get("attempts") or 1),
            text=str(stored.get("text", "")),
            vectors=decode_vectors(stored["vectors"]) if "vectors" in stored else None,
            served_model=stored.get("served_model"),
            finish_reason=stored.get("finish_reason"),
            billed_usd=stored.get("billed_usd"),
            served_by=stored.get("served_by"),
            execution=self._flex_or_interactive(request),
        )
        self.accounting.add(request, outcome, cache_hit=True)
        copy = {k: v for k, v in stored.items() if k != "reused"} if stored["reused"] else None
        self.record(request, outcome, once=True, answer=copy)
        return outcome

    def _api_call(self, request: Request, endpoint: Endpoint, key: str) -> CallResult:
        self.store.check_room()  # StoreError: no room to keep the answer, nothing is sent
        flight = call_key(key, request.tags)
        execution = self._flex_or_interactive(request)
        self.store.sending(flight, _in_flight_record(request, endpoint, key, execution))
        try:
            return self._send(request, endpoint, key)
        finally:
            self.store.unsent(flight)  # nothing once its record is written (with its answer)

    def _send(self, request: Request, endpoint: Endpoint, key: str) -> CallResult:
        # BudgetStop: nothing is sent
        reserved = self.budget.reserve(request, self._price_multiplier(request))
        try:
            sent = self.transport.send(request, endpoint)
        except BaseException:
            self.budget.settle(reserved, request.model, None)
            raise
        rejected = isinstance(sent.fatal, ItemRejected)  # this item only: the stage goes on
        outcome, usage_estimated = outcome_of(
            request, endpoint, key, sent.response, sent.latency_s, sent.attempts
        )
        outcome.execution = self._flex_or_interactive(request)
        failure = (
            reply_failure({**sent.response, "usage": outcome.usage.as_dict()})
            if (sent.response is not None and isinstance(request, ChatRequest))
            else None
        )
        if sent.response is None:
            outcome.error = sent.error
            outcome.failure_kind = "rejected" if rejected else None
            self.budget.settle(reserved, request.model, None)
        else:
            self.budget.settle(
                reserved, request.model, outcome.usage, outcome.billed_usd, outcome.execution
            )
            if failure is not None:
                outcome.failure_kind, outcome.error = failure
        self.accounting.add(
            request,
            outcome,
            sent=True,
            paid=sent.response is not None,
            usage_estimated=usage_estimated,
        )
        # the record and the answer in one row: a kill can never keep one without the other
        answered = sent.response is not None and failure is None
        stored = answer_of(request, outcome, usage_estimated) if answered else None
        if sent.attempts:  # a request never sent (the stage stopped first) is not a call
            self.record(request, outcome, answer=stored)
        if sent.fatal is not None and not rejected:
            raise sent.fatal
        # The endpoint-down stops count calls that got no answer; an item the endpoint refused
        # (a 4xx for this item, a cut-off or filtered reply) says the endpoint is up.
        self.transport.note(
            sent.response is None and not rejected, request, rate_limited=sent.rate_limited
        )
        return outcome

    def batch_result(
        self,
        request: Request,
        endpoint: Endpoint,
        key: str,
        reply: dict[str, Any],
        turnaround_s: float,
        attempts: int,
    ) -> float:
        """One answer of the Batch API, recorded at the batch price (without a usable answer, as a
        failed, paid call); returns its cost."""
        outcome, estimated = outcome_of(request, endpoint, key, reply, turnaround_s, attempts)
        outcome.execution = "batch"
        failure = (
            reply_failure({**reply, "usage": outcome.usage.as_dict()})
            if isinstance(request, ChatRequest)
            else None
        )
        if failure is not None:  # paid, and no answer: the stage's own call asks again
            outcome.failure_kind, outcome.error = failure
        self.record(
            request,
            outcome,
            answer=answer_of(request, outcome, estimated) if failure is None else None,
        )
        cost = self.budget.cost(request.model, outcome.usage, "batch") or 0.0
        self.accounting.add_paid(request.stage, request.model, cost)
        return cost

    def record(
        self,
        request: Request,
        outcome: CallResult,
        *,
        once: bool = False,
        answer: Mapping[str, Any] | None = None,
        offline: bool = False,
    ) -> bool:
        """Write the call's record (and answer); ``once``: not when this item's call is recorded
        already (a rerun)."""
        key = call_key(outcome.request_hash, request.tags)
        if once and self.store.recorded(key):
            self.accounting.count("replayed")
            return False
        self.store.add(make_record(request, outcome), answer, key=key, offline=offline)
        self.accounting.count("recorded")
        return True

    def _flex_or_interactive(self, request: Request) -> str:
        return FLEX if self.config.execution_for(request.stage) == FLEX else "interactive"

    def _price_multiplier(self, request: Request) -> float:
        if self._flex_or_interactive(request) != FLEX:
            return 1.0
        return discount_multiplier(request.model, FLEX, self.config.price_overrides) or 1.0

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


class ItemRunner:
    """Items of one client, scheduled, each a call plus its bounded re-asks (its result sums their
    usage and attempts)."""

    def __init__(self, config: ClientConfig, calls: CallPath):
        self.config = config
        self.calls = calls
        self.transport = calls.transport
        self.accounting = calls.accounting
        self.heartbeat: dict[str, Any] = {}  # Heartbeat options (tests shorten them)
        self._measured_dims: dict[str, int] = {}  # embedding models the catalog has no width for

    def run(
        self,
        items: list[Any],
        *,
        after: Sequence[int | None] | None,
        work: Callable[[Any], T],
        desc: str,
        on_result: Callable[[T], None] | None,
        progress: bool | None,
        prefixes: Sequence[Any] | None = None,
    ) -> list[T]:
        c = self.config
        show = c.progress if progress is None else progress
        # offline, the bar names the stand-in as such: "long_context gpt-5-mini (offline)"
        label = f"{desc} (offline)" if self.accounting.all_offline else desc
        bar = (
            ProgressBar(len(items), label, self.accounting.progress_postfix)
            if (show and items)
            else None
        )
        stop = self.transport.stop
        stop.clear()
        heartbeat = Heartbeat(
            desc, timeout_s=c.request_timeout_s, waiting=self.transport.waiting, **self.heartbeat
        )
        # a line while requests are slow (in flight, the oldest's age); offline records batched
        with heartbeat, self.calls.store.deferring():
            results, failure = run_scheduled(
                items,
                heartbeat.track(work),
                after=after,
                inline=self._inline,
                max_concurrency=c.max_concurrency,
                on_result=on_result,
                on_failure=lambda exc: stop.set(),
                progress=bar,
                prefixes=prefixes,
                per_prefix_per_minute=c.prefix_requests_per_minute if prefixes else None,
            )
        if failure is not None:
            if isinstance(failure, BudgetStop):
                budget = self.calls.budget
                raise BudgetExceeded(
                    f"budget guard: {failure}. Stopped cleanly; everything done so far is stored "
                    "and recorded. Raise max_cost_usd to continue.",
                    spent_usd=budget.spent,
                    limit_usd=budget.limit,
                    results=results,
                ) from None
            raise failure
        return results

    def _inline(self, request: Request) -> bool:
        """Served without the network (offline, or stored): run in this thread."""
        endpoint = self.transport.endpoint_for(request.model)
        if endpoint is None:
            return True
        return self.config.cache_mode != "off" and self.calls.store.has_answer(
            request.key(endpoint.identity)
        )

    def chat_item(
        self, request: ChatRequest, offline: OfflineMethod | None, parse: ParseFn | None
    ) -> CallResult:
        outcome = self.calls.call(request, offline)
        totals = {"usage": outcome.usage, "attempts": outcome.attempts, "calls": 1}
        retried_limit = None
        if outcome.failure_kind == "length":
            outcome, retried_limit = self._retry_longer(request, outcome, offline, totals)
        parsed, parse_error = None, None
        if parse is not None and outcome.error is None:
            outcome, parsed, parse_error = self._parse_with_reasks(
                request, outcome, offline, parse, totals
            )
        self.accounting.count("items")
        return replace(
            outcome,
            request=request,
            usage=totals["usage"],
            attempts=totals["attempts"],
            calls=totals["calls"],
            parsed=parsed,
            parse_error=parse_error,
            retried_output_limit=retried_limit,
        )

    def _retry_longer(
        self,
        request: ChatRequest,
        outcome: CallResult,
        offline: OfflineMethod | None,
        totals: dict[str, Any],
    ) -> tuple[CallResult, int | None]:
        """Once, after a reply cut off before any answer (a reasoning model that spent its limit
        thinking): the request with a larger output limit, its own record."""
        larger = larger_output_limit(request, self.transport.capabilities(request.model))
        if larger is None or self.transport.stop.is_set():
            return outcome, None
        self.accounting.count("output_limit_retries")
        retry = request.replace(
            max_output_tokens=larger, tags={**request.tags, "output_limit_retry": larger}
        )
        again = self.calls.call(retry, offline)
        totals["usage"] = totals["usage"] + again.usage
        totals["attempts"] += again.attempts
        totals["calls"] += 1
        if again.error is not None:
            again.error = f"{again.error} (also with max_output_tokens={larger})"
        return again, larger

    def _parse_with_reasks(
        self,
        request: ChatRequest,
        outcome: CallResult,
        offline: OfflineMethod | None,
        parse: ParseFn,
        totals: dict[str, Any],
    ) -> tuple[CallResult, Any, str | None]:
        """Parse the reply, re-asking up to ``max_reasks`` times; returns the last result, the
        parsed value and the parse error (``None`` when a re-ask failed as a call)."""
        current, parsed, parse_error = request, None, None
        max_reasks = self.config.max_reasks
        for number in range(1, max_reasks + 2):
            try:
                return outcome, parse(outcome.text), None
            except PARSE_ERRORS as exc:
                said = f"unparseable reply: {type(exc).__name__}: {exc}"  # what a re-ask shows
                # what the item's failure says: the notes first, so a shortened line keeps them
                notes = "".join(f"{note}; " for note in getattr(exc, "__notes__", ()))
                parse_error = f"unparseable reply: {type(exc).__name__}: {notes}{exc}"[:500]
            if number > max_reasks or self.transport.stop.is_set():
                break
            current = reask_request(current, outcome.text, said[:500], number)
            self.accounting.count("reasks")
            outcome = self.calls.call(current, offline)
            totals["usage"] = totals["usage"] + outcome.usage
            totals["attempts"] += outcome.attempts
            totals["calls"] += 1
            if outcome.error is not None:
                return outcome, None, None
        self.accounting.count("parse_failures")
        return outcome, parsed, parse_error

    def embedding_dims(self, model: str) -> int:
        """The width of ``model``'s vectors: the offline embedder's, the catalog's or the run's
        declaration, else measured on one stored embedding."""
        if self.transport.endpoint_for(model) is None:
            return self.calls.embedder.dims
        if declared := self._known_dims(model):
            return declared
        if model not in self._measured_dims:
            probe = self.embed_item(EmbeddingRequest(model, ("the width of this model's vectors",)))
            if probe.error is not None:
                raise LLMError(f"cannot learn {model}'s embedding width: {probe.error}")
            self._measured_dims[model] = int(probe.vectors.shape[1])
        return self._measured_dims[model]

    def _known_dims(self, model: str) -> int | None:
        try:
            declared = self.transport.capabilities(model).embedding_dims
        except KeyError:
            declared = None
        return declared or self._measured_dims.get(model)

    def embed_item(self, request: EmbeddingRequest) -> CallResult:
        outcome = self.calls.call(request, None)
        self.accounting.count("items")
        if outcome.vectors is None:  # a failed call: no row may pass for a vector (width as known)
            width = self._known_dims(request.model) or DEFAULT_DIMS
            outcome.vectors = np.full((len(request.inputs), width), np.nan, np.float32)
        return outcome


class LLMClient:
    """Use :func:`make_client` to build one from notebook parameters."""

    def __init__(
        self,
        run: RunPaths,
        config: ClientConfig,
        *,
        calls: CallPath,
        items: ItemRunner,
        prefill: BatchPrefill,
    ):
        self.run = run
        self.config = config
        self.calls = calls
        self.items = items
        self.prefill = prefill
        self.transport = calls.transport
        self.store = calls.store
        self.budget = calls.budget
        self.accounting = calls.accounting

    # The options and counts notebooks and stages read.
    @property
    def backend(self) -> str:
        return self.config.backend

    @property
    def base_url(self) -> str:
        return self.config.base_url

    @property
    def stats(self) -> ClientStats:
        return self.accounting.stats

    # ------------------------------------------------------------------ public API

    def chat(
        self,
        request: ChatRequest,
        *,
        offline: OfflineMethod | None = None,
        parse: ParseFn | None = None,
    ) -> CallResult:
        return self.chat_many([request], offline=offline, parse=parse, progress=False)[0]

    def chat_many(
        self,
        requests: Sequence[ChatRequest],
        *,
        offline: OfflineMethod | None = None,
        parse: ParseFn | None = None,
        desc: str | None = None,
        on_result: Callable[[CallResult], None] | None = None,
        progress: bool | None = None,
    ) -> list[CallResult]:
        """Serve ``requests`` with at most ``max_concurrency`` in flight; results in input order.
        ``offline``: the stage's stand-in; ``parse``: the reply to the stage's value
        (``ValueError`` & co.: re-ask); ``on_result``: called in this thread per item. Raises
        :class:`FatalAPIError`, :class:`CacheMiss` or :class:`BudgetExceeded` once the calls in
        flight have finished."""
        requests = list(requests)
        self.prefill.fill(requests)
        return self.items.run(
            requests,
            after=None,
            work=lambda r: self.items.chat_item(r, offline, parse),
            desc=desc or _desc(requests),
            on_result=on_result,
            progress=progress,
        )

    def chat_groups(
        self,
        groups: Sequence[Sequence[ChatRequest]],
        *,
        first_alone: bool = True,
        offline: OfflineMethod | None = None,
        parse: ParseFn | None = None,
        desc: str | None = None,
        on_result: Callable[[CallResult], None] | None = None,
        progress: bool | None = None,
    ) -> list[list[CallResult]]:
        """:meth:`chat_many` for ordered groups (a conversation's questions): with ``first_alone``
        each group's first request goes alone and the rest after it, so the provider's prompt
        cache holds the prefix; groups interleave, each at most ``prefix_requests_per_minute``."""
        flat: list[ChatRequest] = []
        after: list[int | None] = []
        prefixes: list[int | None] = []
        shape: list[int] = []
        for number, group in enumerate(groups):
            group = list(group)
            shape.append(len(group))
            start = len(flat)
            for position, request in enumerate(group):
                flat.append(request)
                after.append(start if (first_alone and position > 0) else None)
                prefixes.append(number if self._overflow_rule_applies(request) else None)
        self.prefill.fill(flat)
        results = self.items.run(
            flat,
            after=after,
            work=lambda r: self.items.chat_item(r, offline, parse),
            desc=desc or _desc(flat),
            on_result=on_result,
            progress=progress,
            prefixes=prefixes,
        )
        out: list[list[CallResult]] = []
        start = 0
        for size in shape:
            out.append(results[start : start + size])
            start += size
        return out

    def embedding_dims(self, model: str) -> int:
        return self.items.embedding_dims(model)

    def embed(
        self,
        texts: Sequence[str],
        *,
        model: str = EMBEDDING_MODEL,
        dimensions: int | None = None,
        tags: Mapping[str, Any] | None = None,
        desc: str | None = None,
        progress: bool | None = None,
    ) -> np.ndarray:
        """:meth:`embed_groups` of one group."""
        group = [(texts, tags or {})]
        return self.embed_groups(
            group, model=model, dimensions=dimensions, desc=desc, progress=progress
        )[0]

    def embed_groups(
        self,
        groups: Sequence[tuple[Sequence[str], Mapping[str, Any]]],
        *,
        model: str = EMBEDDING_MODEL,
        dimensions: int | None = None,
        desc: str | None = None,
        progress: bool | None = None,
    ) -> list[np.ndarray]:
        """One ``(len(texts), d)`` array of L2-normalised rows per group of texts (each with its
        ledger tags), all groups' batches at once; empty texts get zero rows. :class:`LLMError`
        if a batch still fails (a rerun sends only the rest)."""
        requests: list[EmbeddingRequest] = []
        owners: list[tuple[int, list[int]]] = []
        for g, (texts, tags) in enumerate(groups):
            keep = [i for i, t in enumerate(texts) if str(t).strip()]
            if not keep:
                continue
            batches, fitted, truncated = plan_batches([str(texts[i]) for i in keep])
            self.accounting.count("truncated_inputs", truncated)
            for batch in batches:
                inputs = tuple(fitted[j] for j in batch)
                requests.append(EmbeddingRequest(model, inputs, dimensions, tags=dict(tags)))
                owners.append((g, [keep[j] for j in batch]))
        results = self.embed_many(requests, desc=desc, progress=progress) if requests else []
        failed = [r for r in results if r.error]
        if failed:
            raise LLMError(
                f"{len(failed)} of {len(results)} embedding batches failed ({failed[0].error}); "
                "rerun to retry them (completed batches are stored and not sent again)"
            )
        dims = results[0].vectors.shape[1] if results else None
        dims = dims or dimensions or self.items.embedding_dims(model)
        out = [np.zeros((len(texts), dims), dtype=np.float32) for texts, _ in groups]
        for (g, rows), result in zip(owners, results, strict=True):
            out[g][rows] = result.vectors
        return out

    def embed_many(
        self,
        requests: Sequence[EmbeddingRequest],
        *,
        desc: str | None = None,
        progress: bool | None = None,
    ) -> list[CallResult]:
        requests = list(requests)
        self.prefill.fill(requests)
        return self.items.run(
            requests,
            after=None,
            work=self.items.embed_item,
            desc=desc or "embed",
            on_result=None,
            progress=progress,
        )

    def execution_for(self, stage: str) -> str:
        return self.config.execution_for(stage)

    def backend_for(self, model: str) -> str:
        return self.config.backend_for(model)

    def endpoint_for(self, model: str) -> Endpoint | None:
        return self.transport.endpoint_for(model)

    def capabilities(self, model: str) -> ModelInfo:
        return self.transport.capabilities(model)

    def _overflow_rule_applies(self, request: ChatRequest) -> bool:
        """OpenAI's per-prefix overflow applies to its own API only."""
        endpoint = self.endpoint_for(request.model)
        return endpoint is not None and endpoint.backend == "openai"

    def summary(self) -> dict[str, Any]:
        """What a notebook prints and stores in the manifest (no keys, no prompts)."""
        return {**self.accounting.summary(), "store": str(self.store.path)}

    def summary_table(self):
        import pandas as pd

        return pd.DataFrame(self.summary()["by_stage_model"])

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _desc(requests: Sequence[ChatRequest]) -> str:
    if not requests:
        return "llm"
    first = requests[0]
    return f"{first.stage} {first.model}"


def make_client(run: RunPaths, **options: Any) -> LLMClient:
    """The client for a notebook, from its client parameters (:meth:`ClientConfig.make`;
    docs/architecture.md, "The client mapping")."""
    config = ClientConfig.make(**options)
    if config.uses_api:
        # Before anything is spent: a missing key is an error naming the variable.
        check_credentials(
            config.backend,
            base_url=config.base_url,
            api_key_env=config.api_key_env,
            model_backends=config.model_backends,
            env_file=config.env_file,
        )
    reuse = [RunPaths.from_param(r).root for r in config.reuse_runs]
    store = CallStore(run.root, reuse=reuse, set_aside_damaged=True)
    budget = Budget(
        config.max_cost_usd,
        spent_before_usd=spent_usd(store.records(), config.price_overrides),
        price_overrides=config.price_overrides,
    )
    accounting = Accounting(config, budget)
    transport = Transport(config, accounting)
    calls = CallPath(config, transport=transport, store=store, budget=budget, accounting=accounting)
    return LLMClient(
        run, config, calls=calls, items=ItemRunner(config, calls), prefill=BatchPrefill(run, calls)
    )
