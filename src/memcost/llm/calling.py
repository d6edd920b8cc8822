"""How one request is served: offline method, disk cache, or the API with retries.

Life of one API request: claim its hash (so duplicates in flight wait instead of paying twice)
→ disk cache → budget reservation → HTTP attempts with backoff → cache row → ledger record →
release. A call killed anywhere before the cache row is simply sent again by a rerun; one killed
between the cache row and the ledger record is recognised on rerun (the row's ``origin`` is this
run) and recorded then, as paid. Inside ``LLMClient.walkthrough()`` the run's own memo of the
walk-through's replies (:mod:`memcost.llm.walkthrough`) is asked before the disk cache.

:class:`CallPath` is that path, read top to bottom in :meth:`CallPath.call`: the offline
stand-in, or the cache, or the API (through :class:`memcost.llm.transport.Transport`), then the
ledger. It is handed the parts it uses; it owns none of them.

Only answers are cached. A reply without a usable answer (``length`` with no content,
``content_filter``, a ``refusal``) is recorded as a failed, paid call, and a non-retryable 4xx
for one item as a failed call: the item fails with its reason, the stage goes on, and a rerun
asks again. ``insufficient_quota`` stops the run at once.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from memcost.calls import normalise_tags
from memcost.execution import discount_multiplier
from memcost.llm.bodies import reply_failure
from memcost.llm.budget import Budget
from memcost.llm.cache import ResponseCache
from memcost.llm.config import ClientConfig
from memcost.llm.embeddings import HashingEmbedder, decode_vectors, encode_vectors, l2_normalise
from memcost.llm.errors import CacheMiss, FatalAPIError, ItemRejected
from memcost.llm.flex import FLEX, check_flex
from memcost.llm.ledger import Ledger, call_key, make_record
from memcost.llm.offline import OFFLINE, OfflineMethod, run_chat, run_embedding
from memcost.llm.outcome import Outcome
from memcost.llm.providers import Endpoint
from memcost.llm.requests import ChatRequest, EmbeddingRequest, Usage
from memcost.llm.stats import Accounting
from memcost.llm.transport import Transport
from memcost.llm.walkthrough import WalkthroughMemo
from memcost.tokens import count_tokens

Request = ChatRequest | EmbeddingRequest


class CallPath:
    """One call, end to end, for one client (see the module's docstring)."""

    def __init__(
        self,
        config: ClientConfig,
        *,
        transport: Transport,
        ledger: Ledger,
        budget: Budget,
        cache: ResponseCache | None,
        accounting: Accounting,
        run_id: str,
    ):
        self.config = config
        self.transport = transport
        self.ledger = ledger
        self.budget = budget
        self.cache = cache
        self.accounting = accounting
        self.run_id = run_id  # cache rows carry it: a rerun tells its own paid calls from others'
        self.embedder = HashingEmbedder(config.embedding_dims)
        self.walkthrough: WalkthroughMemo | None = None  # set inside LLMClient.walkthrough()
        self._inflight: dict[str, threading.Event] = {}
        self._inflight_lock = threading.Lock()

    @property
    def cache_path(self) -> Path:
        return self.config.cache_path

    def call(self, request: Request, offline: OfflineMethod | None) -> Outcome:
        """Serve ``request``: the offline stand-in, or the walk-through memo, the disk cache or
        the API; every call ends with its ledger record."""
        endpoint = self.transport.endpoint_for(request.model)
        if endpoint is None:
            return self._offline_call(request, offline)
        if isinstance(request, ChatRequest):
            self.transport.capabilities(request.model)  # an unknown model stops here
        if self.config.execution_for(request.stage) == FLEX:  # no Flex for it: before any call
            check_flex(request.stage, request.model, endpoint.backend, self.config.price_overrides)
        key = request.key(endpoint.identity)
        memo = self.walkthrough
        if memo is None:
            return self._serve(request, endpoint, key)
        entry = memo.get(key)
        if entry is not None:  # the walk-through made this call before: never again
            return self._cached_call(request, endpoint, key, entry)
        outcome = self._serve(request, endpoint, key)
        if outcome.error is None and outcome.failure_kind is None:
            origin = "" if outcome.cached else self.run_id
            memo.put(key, {**self.entry(request, outcome, False), "origin": origin})
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
                self.accounting.count("discarded_rows")
                entry = None
            if entry is not None:
                return self._cached_call(request, endpoint, key, entry)
            if self.config.cache_mode == "replay_only":
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
        outcome = Outcome(
            key, OFFLINE, OFFLINE, usage, False, latency, 1, text=text, vectors=vectors
        )
        self.accounting.add(request, outcome, offline=True)
        self.record(request, outcome, once=True)
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
            execution=(
                str(entry.get("execution") or "interactive")
                if recovered
                else self._flex_or_interactive(request)
            ),
        )
        self.accounting.add(request, outcome, cache_hit=True, paid=recovered)
        written = self.record(request, outcome, once=True, cached_flag=not recovered)
        if written and recovered:  # the run did pay for it
            self.budget.settle(
                None, request.model, outcome.usage, outcome.billed_usd, outcome.execution
            )
            self.accounting.count("recovered")
        return outcome

    def _api_call(self, request: Request, endpoint: Endpoint, key: str) -> Outcome:
        reserved = self.budget.reserve(request, self._price_multiplier(request))  # BudgetStop:
        # nothing is sent
        attempts = [0, time.perf_counter()]  # attempts made, start of the last one
        rejected = False
        try:
            response, latency, error = self.transport.send(request, endpoint, attempts)
        except ItemRejected as exc:  # this item only: it fails, the stage goes on
            response, latency, error = None, time.perf_counter() - attempts[1], str(exc)
            rejected = True
        except FatalAPIError as exc:
            self.budget.settle(reserved, request.model, None)
            outcome = Outcome(
                key, endpoint.backend, endpoint.host, Usage(), False,
                time.perf_counter() - attempts[1], attempts[0], error=str(exc),
            )  # fmt: skip
            self.accounting.add(request, outcome, sent=True)
            self.record(request, outcome)
            raise
        except BaseException:
            self.budget.settle(reserved, request.model, None)
            raise
        outcome, usage_estimated = _outcome_of(
            request, endpoint, key, response, latency, attempts[0]
        )
        outcome.execution = self._flex_or_interactive(request)
        failure = (
            reply_failure({**response, "usage": outcome.usage.as_dict()})
            if (response is not None and isinstance(request, ChatRequest))
            else None
        )
        if response is None:
            outcome.error = error
            outcome.failure_kind = "rejected" if rejected else None
            self.budget.settle(reserved, request.model, None)
        else:
            self.budget.settle(
                reserved, request.model, outcome.usage, outcome.billed_usd, outcome.execution
            )
            if failure is not None:
                outcome.failure_kind, outcome.error = failure
        # The cache row first: a kill between the two writes leaves a row whose missing record
        # a resume recovers (_cached_call), so nothing is paid twice. A cache write that fails
        # (a full disk) still stops the call, but the billed call is on the ledger first.
        try:
            if response is not None and failure is None:
                self.store(request, outcome, usage_estimated)  # only answers are cached
        finally:
            self.accounting.add(
                request,
                outcome,
                sent=True,
                paid=response is not None,
                usage_estimated=usage_estimated,
            )
            self.record(request, outcome)
        # The endpoint-down stops count calls that got no answer; an item the endpoint refused
        # (a 4xx for this item, a cut-off or filtered reply) says the endpoint is up.
        self.transport.note(
            response is None and not rejected,
            request,
            rate_limited=bool(error and "rate limited: HTTP 429" in error),
        )
        return outcome

    def store(self, request: Request, outcome: Outcome, usage_estimated: bool) -> None:
        """Write the paid reply to the disk cache, marked with this run's id."""
        if self.cache is None:
            return
        kind = "embed" if isinstance(request, EmbeddingRequest) else "chat"
        self.cache.put(
            outcome.key, self.entry(request, outcome, usage_estimated), kind=kind,
            stage=request.stage, model=request.model, origin=self.run_id,
        )  # fmt: skip

    def entry(self, request: Request, outcome: Outcome, usage_estimated: bool) -> dict[str, Any]:
        """A reply as the disk cache (and the walk-through memo) store it."""
        kind = "embed" if isinstance(request, EmbeddingRequest) else "chat"
        stored: dict[str, Any] = {
            "usage": outcome.usage.as_dict(),
            "attempts": outcome.attempts,
            "latency_s": round(outcome.latency_s, 4),
            "served_model": outcome.served_model,
            "usage_estimated": usage_estimated,
            # what rebuilding this call's ledger record needs (memcost.llm.ledger.repair_ledger)
            "record": {
                "backend": outcome.backend,
                "provider": outcome.provider,
                "prompt_version": request.prompt_version,
                "sample_index": request.sample_index,
                "tags": normalise_tags(request.tags),
            },
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

    def record(
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
            self.accounting.count("replayed")
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
        self.accounting.count("recorded")
        if record["cached"] and self.cache is not None:
            self._note_read(ckey, record)
        return True

    def _note_read(self, ckey: str, record: dict[str, Any]) -> None:
        """The cache keeps who read it, so repair-ledger can rebuild this record too. The
        ledger already holds it: a cache that cannot take the copy costs only that rebuild."""
        try:
            self.cache.note_read(self.run_id, ckey, record)
        except sqlite3.Error:
            self.accounting.count("reads_not_kept")

    def _flex_or_interactive(self, request: Request) -> str:
        """``flex`` for a call of a stage run on Flex processing, else ``interactive``."""
        return FLEX if self.config.execution_for(request.stage) == FLEX else "interactive"

    def _price_multiplier(self, request: Request) -> float:
        """What a request is billed relative to its list price: Flex's discount, else 1."""
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
