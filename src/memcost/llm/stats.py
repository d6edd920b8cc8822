"""The client's counts: what a notebook prints, stores in the manifest and shows in a progress bar.

:class:`ClientStats` holds the counts since the client was made; :class:`Accounting` is the
client's part that adds one call to them and reports them (:meth:`Accounting.summary`).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from memcost.llm.budget import Budget
from memcost.llm.config import ClientConfig
from memcost.llm.outcome import Outcome
from memcost.llm.providers import resolve_endpoint
from memcost.llm.requests import ChatRequest, EmbeddingRequest

TOKEN_FIELDS = ("prompt_tokens", "cached_prompt_tokens", "completion_tokens", "reasoning_tokens")


@dataclass
class StageModelStats:
    """Counts of one (stage, model) pair."""

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
    recovered: int = 0  # paid calls of this run found in the cache but missing from the ledger
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
    discarded_rows: int = 0  # cache rows that held no answer (cut off, filtered): asked again
    reads_not_kept: int = 0  # cache hits the cache could not note (repair-ledger lacks them)
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
    """The counts of one client's calls, kept under one lock, and its reports."""

    def __init__(self, config: ClientConfig, budget: Budget):
        self.config = config
        self.budget = budget
        self.stats = ClientStats()
        self.lock = threading.Lock()

    def add(
        self,
        request: ChatRequest | EmbeddingRequest,
        outcome: Outcome,
        *,
        sent: bool = False,
        cache_hit: bool = False,
        offline: bool = False,
        paid: bool = False,
        usage_estimated: bool = False,
    ) -> None:
        """Add one call to the counts (and to its stage and model's)."""
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
        """A paid call whose outcome was not counted by :meth:`add` (a Batch API answer)."""
        with self.lock:
            self.stats.batch_calls += 1
            self.stats.paid_usd += cost
            self.stats.by_stage_model[(stage, model)].paid_usd += cost

    def endpoints_summary(self) -> dict[str, dict[str, str]]:
        """Where each API backend in use sends its calls, and which variable holds its key."""
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

    def summary(self, *, cache_open: bool) -> dict[str, Any]:
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
            "cache_path": str(c.cache_path) if cache_open else None,
            "max_concurrency": c.max_concurrency,
            "max_cost_usd": None if not self.budget.limited else self.budget.limit,
            "price_overrides": {k: dict(v) for k, v in c.price_overrides.items()},
            **_rounded(counts),
            "run_spent_usd": round(self.budget.spent, 6),
            "model_snapshots": models,
            "routes": {m: c.backend_for(m) for m in models},
            "by_stage_model": by,
        }

    def progress_postfix(self) -> str:
        s = self.stats
        if self.config.backend == "offline" and not self.config.model_backends:
            return f"hits={s.cache_hits} est=${s.estimated_usd:.4f}"
        return f"hits={s.cache_hits} ${s.paid_usd:.4f}"
