"""The budget guard: stop before the run's spend passes ``max_cost_usd``.

Spend is estimated from the ledger (every call this run paid for, all notebooks) and the dated
price table. Before each request is sent, its cost is estimated and reserved; a request whose
reservation would pass the limit is not sent. Reservations are conservative (the prompt counted
with o200k, and as many output tokens as the most this model has produced in this run, or its
output limit), so the calls in flight cannot overshoot the limit unless a model suddenly writes
far more than before.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from typing import Any

from memcost.llm.requests import ChatRequest, EmbeddingRequest, Usage
from memcost.prices import UnknownPriceError, price_for
from memcost.tokens import count_tokens

# Output tokens assumed for a model's first call when the request sets no limit: enough for a
# GPT-5 answer with high reasoning effort, so the first calls are over- rather than under-counted.
DEFAULT_OUTPUT_GUESS = 4_000


class BudgetStop(Exception):
    """Internal: this request would exceed the budget (the scheduler turns it into
    :class:`memcost.llm.errors.BudgetExceeded` once in-flight calls are done)."""


class Budget:
    def __init__(
        self,
        max_cost_usd: float | None,
        *,
        spent_before_usd: float = 0.0,
        price_overrides: Mapping[str, Mapping[str, Any]] | None = None,
    ):
        self.limit = math.inf if max_cost_usd is None else float(max_cost_usd)
        if self.limit < 0 or math.isnan(self.limit):
            raise ValueError(
                f"max_cost_usd must be >= 0 (or None for no limit), got {max_cost_usd!r}"
            )
        self.price_overrides = price_overrides
        self.spent = spent_before_usd
        self.reserved = 0.0
        self._in_flight = 0  # reservations not yet settled (a count: float sums drift)
        self._max_output: dict[str, int] = {}
        # Per model, the largest ratio seen of what the provider billed to the list price: a
        # host may charge several times the listing, and reservations must know it.
        self._markup: dict[str, float] = {}
        self._lock = threading.Condition()

    @property
    def limited(self) -> bool:
        return math.isfinite(self.limit)

    def cost(self, model: str, usage: Usage, execution: str = "interactive") -> float | None:
        """What ``usage`` costs at ``model``'s price, sent in ``execution`` mode (``None``: no
        price)."""
        try:
            price = price_for(model, self.price_overrides)
        except UnknownPriceError:
            return None
        return price.cost(
            prompt_tokens=usage.prompt_tokens,
            cached_prompt_tokens=min(usage.cached_prompt_tokens, usage.prompt_tokens),
            completion_tokens=usage.completion_tokens,
            batch=execution == "batch",
            flex=execution == "flex",
        )

    def estimate(self, request: ChatRequest | EmbeddingRequest) -> float:
        """A generous guess of what ``request`` will cost."""
        price = price_for(request.model, self.price_overrides)  # unknown price: error, by design
        if isinstance(request, EmbeddingRequest):
            prompt = sum(count_tokens(t) for t in request.inputs)
            return price.cost(prompt_tokens=prompt)
        prompt = sum(count_tokens(content) for _, content in request.messages) + 8 * len(
            request.messages
        )
        with self._lock:
            seen = self._max_output.get(request.model)
        output = seen if seen is not None else (request.max_output_tokens or DEFAULT_OUTPUT_GUESS)
        if request.max_output_tokens is not None:
            output = min(output, request.max_output_tokens)
        return price.cost(prompt_tokens=prompt, completion_tokens=output)

    def reserve(
        self, request: ChatRequest | EmbeddingRequest, multiplier: float = 1.0
    ) -> float | None:
        """Reserve the estimate (times ``multiplier``: a Flex request's discount) or raise
        :class:`BudgetStop`. Returns the amount reserved (``None`` without a limit), to be handed
        back to :meth:`settle`.

        When only the reservations of calls in flight stand in the way, wait for them to settle
        (their real cost is usually below the estimate) before deciding.
        """
        if not self.limited:
            return None
        with self._lock:
            markup = self._markup.get(request.model, 1.0)
        amount = self.estimate(request) * multiplier * markup
        with self._lock:
            while self.spent + self.reserved + amount > self.limit:
                if self._in_flight == 0 or self.spent + amount > self.limit:
                    raise BudgetStop(
                        f"the next {request.stage} call to {request.model} (about ${amount:.4f}) "
                        f"would take the run's spend (${self.spent:.4f} so far) past "
                        f"max_cost_usd = ${self.limit:.4f}"
                    )
                self._lock.wait()
            self.reserved += amount
            self._in_flight += 1
        return amount

    def settle(
        self,
        reserved: float | None,
        model: str,
        usage: Usage | None,
        billed_usd: float | None = None,
        execution: str = "interactive",
    ) -> float:
        """Replace a reservation by what the call cost; returns the cost (0 if unpriced).

        ``billed_usd`` (the provider's own charge, e.g. OpenRouter's ``usage.cost``) wins over
        the list price when it is known: an open-weight model's host may charge several times
        the cheapest listing."""
        listed = self.cost(model, usage, execution) if usage is not None else None
        if usage is None:
            cost = 0.0
        elif billed_usd is not None:
            cost = float(billed_usd)
        else:
            cost = listed or 0.0
        with self._lock:
            if billed_usd is not None and listed:
                self._markup[model] = max(self._markup.get(model, 1.0), cost / listed)
            if reserved is not None:
                self.reserved -= reserved
                self._in_flight -= 1
            self.spent += cost
            if usage is not None and usage.completion_tokens:
                self._max_output[model] = max(
                    self._max_output.get(model, 0), usage.completion_tokens
                )
            self._lock.notify_all()
        return cost

    def reserve_batch(
        self, amount: float, *, what: str = "a batch", force: bool = False
    ) -> float | None:
        """Reserve a whole batch's estimated cost when it is submitted (it is spent however long
        it takes), or raise :class:`BudgetStop`. ``force``: a batch already submitted (re-attached
        by a rerun) is reserved whatever the limit. Hand the amount back to :meth:`settle_batch`."""
        if not self.limited:
            return None
        with self._lock:
            if not force and self.spent + self.reserved + amount > self.limit:
                raise BudgetStop(
                    f"a batch of {what} (about ${amount:.4f} at the batch price) would take the "
                    f"run's spend (${self.spent:.4f} so far, ${self.reserved:.4f} reserved) past "
                    f"max_cost_usd = ${self.limit:.4f}"
                )
            self.reserved += amount
        return amount

    def settle_batch(self, reserved: float | None, cost: float) -> None:
        """Replace a batch's reservation by what its answers cost."""
        with self._lock:
            if reserved is not None:
                self.reserved -= reserved
            self.spent += cost
            self._lock.notify_all()
