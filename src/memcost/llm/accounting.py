"""The budget guard and the counts of a client's calls (docs/architecture.md, "Model calls")."""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memcost.catalog import UnknownPriceError, price_for
from memcost.llm.providers import resolve_endpoint
from memcost.llm.requests import CallResult, ChatRequest, EmbeddingRequest, Usage
from memcost.text import count_tokens

if TYPE_CHECKING:
    from memcost.llm.config import ClientConfig

# Output tokens assumed for a model's first call when the request sets no limit: enough for a
# GPT-5 answer with high reasoning effort, so the first calls are over- rather than under-counted.
DEFAULT_OUTPUT_GUESS = 4_000


class BudgetStop(Exception):
    """Internal: the scheduler turns it into :class:`BudgetExceeded` once in-flight calls
    are done."""


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
        """Reserve the estimate (``multiplier``: Flex's discount) or raise :class:`BudgetStop`,
        waiting first for calls in flight when only their reservations stand in the way; returns
        the amount for :meth:`settle`."""
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
        """Replace a reservation by the call's cost (``billed_usd``, the provider's charge, over the
        list price)."""
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
        """Reserve a whole batch when it is submitted (``force``: one already submitted) or raise
        :class:`BudgetStop`."""
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
        with self._lock:
            if reserved is not None:
                self.reserved -= reserved
            self.spent += cost
            self._lock.notify_all()


TOKEN_FIELDS = ("prompt_tokens", "cached_prompt_tokens", "completion_tokens", "reasoning_tokens")


@dataclass
class StageModelStats:
    calls: int = 0
    api_calls: int = 0
    cache_hits: int = 0
    errors: int = 0
    attempts: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    paid_usd: float = 0.0
    estimated_usd: float = 0.0


@dataclass
class ClientStats:
    """Counts since the client was made (one notebook's worth)."""

    items: int = 0  # results returned to stages (a JSON item with re-asks counts once)
    calls: int = 0  # calls made: sent, served from cache, or run offline (re-asks included)
    recorded: int = 0  # ledger records written
    replayed: int = 0  # calls already in this run's ledger (checkpoint), not recorded again
    api_calls: int = 0
    attempts: int = 0  # HTTP attempts (api_calls + retries)
    retries: int = 0
    cache_hits: int = 0
    offline_calls: int = 0
    errors: int = 0  # calls that failed after all retries (or fatally)
    parse_failures: int = 0  # items whose reply never parsed, even after re-asks
    reasks: int = 0
    usage_estimated: int = 0  # API replies without usage, counted with o200k instead
    truncated_inputs: int = 0  # embedding inputs cut to the API's per-input limit
    rate_limited: int = 0  # HTTP 429 answers (each slows its model's pace)
    flex_unavailable: int = 0  # Flex 429 resource_unavailable answers (that request backed off)
    output_limit_retries: int = 0  # items asked again with a larger output limit after "length"
    batches: int = 0  # Batch API batches this client created
    batch_calls: int = 0  # answers that came back from the Batch API (then served by the cache)
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    paid_usd: float = 0.0  # list-price dollars of calls sent by this client
    estimated_usd: float = 0.0  # list-price dollars of every call (cached and offline included)
    billed_usd: float = 0.0  # dollars the providers reported charging (OpenRouter's usage.cost)
    billed_calls: int = 0  # paid calls whose charge the provider reported
    by_stage_model: dict[tuple[str, str], StageModelStats] = field(
        default_factory=lambda: defaultdict(StageModelStats)
    )
    models: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))


def _rounded(values: dict[str, Any]) -> dict[str, Any]:
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in values.items()}


class Accounting:
    def __init__(self, config: ClientConfig, budget: Budget):
        self.config = config
        self.budget = budget
        self.stats = ClientStats()
        self.lock = threading.Lock()

    def add(
        self,
        request: ChatRequest | EmbeddingRequest,
        outcome: CallResult,
        *,
        sent: bool = False,
        cache_hit: bool = False,
        offline: bool = False,
        paid: bool = False,
        usage_estimated: bool = False,
    ) -> None:
        cost = self.budget.cost(request.model, outcome.usage, outcome.execution) or 0.0
        with self.lock:
            s = self.stats
            sm = s.by_stage_model[(request.stage, request.model)]
            for counts in (s, sm):
                counts.calls += 1
                counts.api_calls += sent
                counts.attempts += outcome.attempts if sent else 0
                counts.cache_hits += cache_hit
                counts.errors += outcome.error is not None
                for name in TOKEN_FIELDS:
                    setattr(counts, name, getattr(counts, name) + getattr(outcome.usage, name))
                counts.estimated_usd += cost
                if paid and sent:
                    counts.paid_usd += cost
            if paid and sent and outcome.billed_usd is not None:
                s.billed_usd += float(outcome.billed_usd)
                s.billed_calls += 1
            s.retries += max(0, outcome.attempts - 1) if sent else 0
            s.offline_calls += offline
            s.usage_estimated += usage_estimated
            if outcome.served_model:
                s.models[request.model].add(outcome.served_model)
            elif offline:
                s.models[request.model]  # noqa: B018 - note the model as used

    def count(self, name: str, n: int = 1) -> None:
        with self.lock:
            setattr(self.stats, name, getattr(self.stats, name) + n)

    def add_paid(self, stage: str, model: str, cost: float) -> None:
        """A paid call :meth:`add` did not count (a Batch API answer)."""
        with self.lock:
            self.stats.batch_calls += 1
            self.stats.paid_usd += cost
            self.stats.by_stage_model[(stage, model)].paid_usd += cost

    def endpoints_summary(self) -> dict[str, dict[str, str]]:
        c = self.config
        endpoints = {}
        for backend in {c.backend, *c.model_backends.values()} - {"offline"}:
            ep = resolve_endpoint(
                backend,
                base_url=c.base_url,
                api_key_env=c.api_key_env,
                primary=backend == c.backend,
                custom_routed="custom" in c.model_backends.values(),
            )
            endpoints[backend] = {"base_url": ep.identity.split("|", 1)[1], "key_env": ep.key_env}
        return endpoints

    def summary(self) -> dict[str, Any]:
        """What a notebook prints and stores in the manifest (no keys, no prompts)."""
        s, c = self.stats, self.config
        with self.lock:
            by = [
                {"stage": stage, "model": model, **_rounded(vars(sm))}
                for (stage, model), sm in sorted(s.by_stage_model.items())
            ]
            counts = {k: v for k, v in vars(s).items() if k not in ("by_stage_model", "models")}
            models = {m: sorted(v) for m, v in sorted(s.models.items())}
        return {
            "backend": c.backend,
            "model_backends": dict(c.model_backends),
            "endpoints": self.endpoints_summary(),
            "cache_mode": c.cache_mode,
            "max_concurrency": c.max_concurrency,
            "max_cost_usd": None if not self.budget.limited else self.budget.limit,
            "price_overrides": {k: dict(v) for k, v in c.price_overrides.items()},
            **_rounded(counts),
            "run_spent_usd": round(self.budget.spent, 6),
            "model_snapshots": models,
            "routes": {m: c.backend_for(m) for m in models},
            "by_stage_model": by,
        }

    @property
    def all_offline(self) -> bool:
        return self.config.backend == "offline" and not self.config.model_backends

    def progress_postfix(self) -> str:
        s = self.stats
        if self.all_offline:
            return f"hits={s.cache_hits} est=${s.estimated_usd:.4f}"
        return f"hits={s.cache_hits} ${s.paid_usd:.4f}"
