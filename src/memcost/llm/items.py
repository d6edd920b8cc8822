"""Many requests at once: scheduling, and what one item is (a call plus its bounded re-asks).

A chat item is the request a stage built; when the stage's ``parse`` rejects the reply, the
client re-asks (a new request with the bad reply and a correction appended) up to
``max_reasks`` times. The item's result sums the usage and attempts of all its calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from memcost.llm.bodies import larger_output_limit
from memcost.llm.budget import BudgetStop
from memcost.llm.errors import BudgetExceeded
from memcost.llm.heartbeat import Heartbeat
from memcost.llm.offline import OfflineMethod
from memcost.llm.outcome import Outcome
from memcost.llm.parsing import reask_request
from memcost.llm.requests import ChatRequest, ChatResult, EmbeddingRequest, EmbeddingResult
from memcost.llm.scheduler import ProgressBar, run_scheduled

T = TypeVar("T")
ParseFn = Callable[[str], Any]
# What a stage's ``parse`` may raise to say "this reply is unusable" (anything else is a bug in
# the stage and propagates).
PARSE_ERRORS = (ValueError, TypeError, KeyError, IndexError)


class ItemMixin:
    """Scheduling and items (mixed into :class:`memcost.llm.client.LLMClient`)."""

    def _run(
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
        show = self.progress if progress is None else progress
        bar = ProgressBar(len(items), desc, self._progress_postfix) if (show and items) else None
        self._stop.clear()
        heartbeat = Heartbeat(desc, timeout_s=getattr(self, "request_timeout_s", None),
                              **getattr(self, "heartbeat", {}))
        with heartbeat:  # a line while requests are slow: in flight, the oldest's age
            results, failure = run_scheduled(
                items,
                heartbeat.track(work),
                after=after,
                inline=self._inline,
                max_concurrency=self.max_concurrency,
                on_result=on_result,
                on_failure=lambda exc: self._stop.set(),
                progress=bar,
                prefixes=prefixes,
                per_prefix_per_minute=self.prefix_requests_per_minute if prefixes else None,
            )
        if failure is not None:
            if isinstance(failure, BudgetStop):
                raise BudgetExceeded(
                    f"budget guard: {failure}. Stopped cleanly; everything done so far is cached "
                    "and recorded. Raise max_cost_usd to continue.",
                    spent_usd=self.budget.spent,
                    limit_usd=self.budget.limit,
                    results=results,
                ) from None
            raise failure
        return results

    def _inline(self, request: ChatRequest | EmbeddingRequest) -> bool:
        """Served without waiting on the network (offline or cached): run it in this thread."""
        endpoint = self.endpoint_for(request.model)
        if endpoint is None:
            return True
        return self.cache is not None and self.cache.contains(request.key(endpoint.identity))

    def _chat_item(
        self, request: ChatRequest, offline: OfflineMethod | None, parse: ParseFn | None
    ) -> ChatResult:
        outcome = self._call(request, offline)
        totals = {"usage": outcome.usage, "attempts": outcome.attempts, "calls": 1}
        retried_limit = None
        if outcome.failure_kind == "length":
            outcome, retried_limit = self._retry_longer(request, outcome, offline, totals)
        parsed, parse_error = None, None
        if parse is not None and outcome.error is None:
            outcome, parsed, parse_error = self._parse_with_reasks(
                request, outcome, offline, parse, totals
            )
        self._count("items")
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
        larger = larger_output_limit(request, self.capabilities(request.model))
        if larger is None or self._stop.is_set():
            return outcome, None
        self._count("output_limit_retries")
        retry = request.replace(
            max_output_tokens=larger, tags={**request.tags, "output_limit_retry": larger}
        )
        again = self._call(retry, offline)
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
        for number in range(1, self.max_reasks + 2):
            try:
                return outcome, parse(outcome.text), None
            except PARSE_ERRORS as exc:
                parse_error = f"unparseable reply: {type(exc).__name__}: {exc}"[:500]
            if number > self.max_reasks or self._stop.is_set():
                break
            current = reask_request(current, outcome.text, str(parse_error), number)
            self._count("reasks")
            outcome = self._call(current, offline)
            totals["usage"] = totals["usage"] + outcome.usage
            totals["attempts"] += outcome.attempts
            totals["calls"] += 1
            if outcome.error is not None:
                return outcome, None, None
        self._count("parse_failures")
        return outcome, parsed, parse_error

    def _embed_item(self, request: EmbeddingRequest) -> EmbeddingResult:
        outcome = self._call(request, None)
        self._count("items")
        vectors = outcome.vectors
        if vectors is None:
            vectors = np.full(
                (len(request.inputs), self._embedding_dims(request.model)), np.nan, np.float32
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
