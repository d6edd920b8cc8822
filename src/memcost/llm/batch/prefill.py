"""The Batch API as a pre-fill of the cache: which requests go, and what a result becomes.

:class:`BatchPrefill` is a step before the calls, not a way of making them: before
:meth:`LLMClient.chat_many` (``chat_groups``, ``embed_many``) serves its requests, it hands them
to :meth:`BatchPrefill.fill`, and the requests of stages whose ``execution`` is ``batch`` that
the disk cache cannot answer go through the Batch API
(:class:`memcost.llm.batch.session.BatchSession`). Each result is put in the disk
cache (origin: this run) and the ledger (paid, ``execution: batch``, at the batch price), as an
interactive call would be; then the stage's requests run as usual and find their answers in
the cache. A stage has one code path; what the Batch API did not answer is asked
interactively, as are re-asks and output-limit retries (they depend on a reply).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import Any

from memcost.execution import DISCOUNT_BACKEND
from memcost.llm.batch.files import CHAT_URL, EMBEDDINGS_URL, Line, chat_reply, embedding_reply
from memcost.llm.batch.files import request_line as _line
from memcost.llm.batch.session import BatchSession
from memcost.llm.batch.transport import BatchTransport
from memcost.llm.bodies import reply_failure
from memcost.llm.budget import BudgetStop
from memcost.llm.calling import CallPath, _outcome_of
from memcost.llm.errors import BudgetExceeded
from memcost.llm.providers import Endpoint, chat_body, embedding_body
from memcost.llm.requests import ChatRequest, EmbeddingRequest
from memcost.prices import price_for
from memcost.tokens import count_tokens

Request = ChatRequest | EmbeddingRequest
BATCH_BACKENDS = (DISCOUNT_BACKEND,)  # who has a Batch API (memcost.execution, the one rule)


def batch_refusal(backend: str, where: str = "") -> str | None:
    """Why stages set to ``batch`` cannot run on ``backend`` (``None``: they can)."""
    if backend in BATCH_BACKENDS or backend == "offline":
        return None
    return (
        f"execution: batch is the OpenAI Batch API, and backend '{backend}'{where} has none "
        "(OpenRouter and vLLM offer no batch endpoint). Set those stages to interactive "
        "(e.g. -p 'client={execution: {}}'), or route the model to backend openai."
    )


def check_batch(config: Any) -> None:
    """Refuse ``batch`` where there is no Batch API, before any call; on the offline backend it
    means nothing (nothing is paid): say so and go on. ``config``: a ClientConfig."""
    if "batch" not in config.execution.values():
        return
    refused = batch_refusal(config.backend)
    if refused:
        raise ValueError(refused)
    if config.backend == "offline" and set(config.model_backends.values()) <= {"offline"}:
        print(
            "execution: batch is ignored by the offline backend (it calls no model and "
            "costs nothing)",
            file=sys.stderr,
            flush=True,
        )
    elif config.cache_mode == "off":
        raise ValueError(
            "execution: batch hands its results to the stages through the "
            "response cache; use cache_mode read_write"
        )


class BatchPrefill:
    """The Batch API step of one client: fills its cache (and ledger) before the calls."""

    def __init__(self, run: Any, calls: CallPath):
        check_batch(calls.config)  # batch where there is no Batch API: refused before any call
        self.run = run
        self.calls = calls
        self.config = calls.config
        self.batch_options = calls.config.batch
        self.cache = calls.cache
        self.budget = calls.budget
        self.run_id = calls.run_id
        self.progress = calls.config.progress

    def count(self, name: str, n: int = 1) -> None:
        self.calls.accounting.count(name, n)

    def fill(self, requests: Sequence[Request]) -> None:
        """Send the batch stages' requests the cache cannot answer through the Batch API and
        wait for them (see the module's docstring)."""
        if (
            self.cache is None
            or self.config.cache_mode == "replay_only"
            or "batch" not in self.config.execution.values()
        ):
            return
        wanted: dict[str, tuple[Endpoint, dict[str, Request]]] = {}
        for request in requests:
            if self.config.execution_for(request.stage) != "batch":
                continue
            endpoint = self.calls.transport.endpoint_for(request.model)
            if endpoint is None:
                continue
            refused = batch_refusal(endpoint.backend, f" (serving {request.model})")
            if refused:
                raise ValueError(refused)
            key = request.key(endpoint.identity)
            todo = wanted.setdefault(endpoint.identity, (endpoint, {}))[1]
            if key not in todo and not self.cache.contains(key):
                todo[key] = request
        for endpoint, todo in wanted.values():
            if todo:
                self._session(endpoint, todo)

    def _session(self, endpoint: Endpoint, todo: dict[str, Request]) -> None:
        lines = {key: self.line(key, request) for key, request in todo.items()}
        transport = BatchTransport(
            self.calls.transport.client_for(endpoint), self.config.retry, threading.Event()
        )
        try:
            BatchSession(self, endpoint, todo, lines, transport).run()
        except BudgetStop as stop:
            raise BudgetExceeded(
                f"budget guard: {stop}. Stopped cleanly; everything done so far is cached and "
                "recorded. Raise max_cost_usd to continue.",
                spent_usd=self.budget.spent,
                limit_usd=self.budget.limit,
            ) from None

    def line(self, key: str, request: Request) -> Line:
        if isinstance(request, EmbeddingRequest):
            tokens = sum(count_tokens(t) for t in request.inputs)
            return _line(key, request.model, EMBEDDINGS_URL, embedding_body(request), tokens)
        body = chat_body(
            request, self.calls.transport.capabilities(request.model), backend="openai"
        )
        tokens = sum(count_tokens(content) for _, content in request.messages)
        return _line(key, request.model, CHAT_URL, body, tokens)

    def estimate(self, requests: Sequence[Request]) -> float:
        """What the budget reserves for a batch: each request's generous guess, batch-priced."""
        total = 0.0
        for request in requests:
            rate = price_for(request.model, self.config.price_overrides).execution_rate("batch")
            total += self.budget.estimate(request) * rate
        return total

    def result(
        self,
        request: Request,
        endpoint: Endpoint,
        key: str,
        body: dict[str, Any],
        turnaround_s: float,
        attempts: int,
    ) -> float:
        """One answer of a batch into the cache and the ledger; its batch-priced cost.
        ``ValueError`` when the body cannot be read."""
        if isinstance(request, EmbeddingRequest):
            reply = embedding_reply(body, len(request.inputs))
        else:
            reply = chat_reply(body)
        outcome, estimated = _outcome_of(request, endpoint, key, reply, turnaround_s, attempts)
        outcome.execution = "batch"
        failure = (
            reply_failure({**reply, "usage": outcome.usage.as_dict()})
            if isinstance(request, ChatRequest)
            else None
        )
        try:  # the row first, the record whatever happens (memcost.llm.calling)
            if failure is None:
                self.calls.store(request, outcome, estimated)  # only answers are cached
            else:  # paid, and no answer: the stage's own call asks again
                outcome.failure_kind, outcome.error = failure
        finally:
            self.calls.record(request, outcome)
        cost = self.budget.cost(request.model, outcome.usage, "batch") or 0.0
        self.calls.accounting.add_paid(request.stage, request.model, cost)
        return cost
