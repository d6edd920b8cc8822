"""Many requests at once: scheduling, and what one item is (a call plus its bounded re-asks).

A chat item is the request a stage built; when the stage's ``parse`` rejects the reply, the
client re-asks (a new request with the bad reply and a correction appended) up to
``max_reasks`` times. The item's result sums the usage and attempts of all its calls.

:class:`ItemRunner` is the client's part that does it: it schedules items (at most
``max_concurrency`` in flight) and turns each into calls of :class:`memcost.llm.calling.CallPath`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from memcost.llm.bodies import larger_output_limit
from memcost.llm.budget import BudgetStop
from memcost.llm.calling import CallPath
from memcost.llm.config import ClientConfig
from memcost.llm.embeddings import DEFAULT_DIMS
from memcost.llm.errors import BudgetExceeded
from memcost.llm.heartbeat import Heartbeat
from memcost.llm.offline import OfflineMethod
from memcost.llm.outcome import Outcome
from memcost.llm.parsing import reask_request
from memcost.llm.requests import ChatRequest, ChatResult, EmbeddingRequest, EmbeddingResult
from memcost.llm.scheduler import ProgressBar, run_scheduled
from memcost.models import model_info

T = TypeVar("T")
ParseFn = Callable[[str], Any]
# What a stage's ``parse`` may raise to say "this reply is unusable" (anything else is a bug in
# the stage and propagates).
PARSE_ERRORS = (ValueError, TypeError, KeyError, IndexError)


class ItemRunner:
    """Items of one client: scheduled, each a call plus its bounded re-asks."""

    def __init__(self, config: ClientConfig, calls: CallPath):
        self.config = config
        self.calls = calls
        self.transport = calls.transport
        self.accounting = calls.accounting
        self.heartbeat: dict[str, Any] = {}  # Heartbeat options (tests shorten them)

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
        bar = (
            ProgressBar(len(items), desc, self.accounting.progress_postfix)
            if (show and items)
            else None
        )
        stop = self.transport.stop
        stop.clear()
        heartbeat = Heartbeat(desc, timeout_s=c.request_timeout_s, **self.heartbeat)
        with heartbeat:  # a line while requests are slow: in flight, the oldest's age
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
                    f"budget guard: {failure}. Stopped cleanly; everything done so far is cached "
                    "and recorded. Raise max_cost_usd to continue.",
                    spent_usd=budget.spent,
                    limit_usd=budget.limit,
                    results=results,
                ) from None
            raise failure
        return results

    def _inline(self, request: ChatRequest | EmbeddingRequest) -> bool:
        """Served without waiting on the network (offline or cached): run it in this thread."""
        endpoint = self.transport.endpoint_for(request.model)
        if endpoint is None:
            return True
        cache = self.calls.cache
        return cache is not None and cache.contains(request.key(endpoint.identity))

    def chat_item(
        self, request: ChatRequest, offline: OfflineMethod | None, parse: ParseFn | None
    ) -> ChatResult:
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
        return ChatResult(
            request=request,
            text=outcome.text,
            usage=totals["usage"],
            request_hash=outcome.key,
            backend=outcome.backend,
            provider=outcome.provider,
            cached=outcome.cached,
            latency_s=outcome.latency_s,
            attempts=totals["attempts"],
            calls=totals["calls"],
            error=outcome.error,
            served_model=outcome.served_model,
            finish_reason=outcome.finish_reason,
            parsed=parsed,
            parse_error=parse_error,
            failure_kind=outcome.failure_kind,
            retried_output_limit=retried_limit,
            billed_usd=outcome.billed_usd,
            served_by=outcome.served_by,
        )

    def _retry_longer(
        self,
        request: ChatRequest,
        outcome: Outcome,
        offline: OfflineMethod | None,
        totals: dict[str, Any],
    ) -> tuple[Outcome, int | None]:
        """Once: the same request with a larger output limit, after a reply cut off before any
        answer (a reasoning model that spent its limit thinking). The retry is its own ledger
        record, tagged with the limit it used; without room to grow, the item fails."""
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
        outcome: Outcome,
        offline: OfflineMethod | None,
        parse: ParseFn,
        totals: dict[str, Any],
    ) -> tuple[Outcome, Any, str | None]:
        """Parse the reply; re-ask up to ``max_reasks`` times while it does not parse.

        Returns the last outcome, the parsed value and the parse error (``None`` once parsed,
        or when a re-ask failed as a call: that error is the item's error then).
        """
        current, parsed, parse_error = request, None, None
        max_reasks = self.config.max_reasks
        for number in range(1, max_reasks + 2):
            try:
                return outcome, parse(outcome.text), None
            except PARSE_ERRORS as exc:
                parse_error = f"unparseable reply: {type(exc).__name__}: {exc}"[:500]
            if number > max_reasks or self.transport.stop.is_set():
                break
            current = reask_request(current, outcome.text, str(parse_error), number)
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
        """The dimensions ``model``'s vectors have (the offline embedder's when it is offline)."""
        if self.transport.endpoint_for(model) is None:
            return self.calls.embedder.dims
        try:
            return model_info(model).embedding_dims or DEFAULT_DIMS
        except KeyError:
            return DEFAULT_DIMS

    def embed_item(self, request: EmbeddingRequest) -> EmbeddingResult:
        outcome = self.calls.call(request, None)
        self.accounting.count("items")
        vectors = outcome.vectors
        if vectors is None:
            vectors = np.full(
                (len(request.inputs), self.embedding_dims(request.model)), np.nan, np.float32
            )
        return EmbeddingResult(
            request=request,
            vectors=vectors,
            usage=outcome.usage,
            request_hash=outcome.key,
            backend=outcome.backend,
            provider=outcome.provider,
            cached=outcome.cached,
            latency_s=outcome.latency_s,
            attempts=outcome.attempts,
            error=outcome.error,
            served_model=outcome.served_model,
        )
