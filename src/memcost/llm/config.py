"""What a client is configured with: one frozen value, checked once when it is made."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memcost.catalog import (
    MAX_REQUESTS_PER_PREFIX_PER_MINUTE,
    ModelInfo,
    declare_model,
    is_known,
    per_model,
)
from memcost.llm.offline import DEFAULT_DIMS
from memcost.llm.providers import BACKENDS
from memcost.params import (
    BATCH_RETRY_MODES,
    CACHE_MODES,
    normalise_execution,
    normalise_price_overrides,
)


@dataclass(frozen=True)
class Limits:
    rpm: float | None = None
    tpm: float | None = None


def parse_rate_limits(value: Any, known: Any = None) -> dict[str, Limits]:
    """``rate_limits`` as ``{model: Limits}``; an unknown model (``known``) is an error, not a
    silent no-op."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(
            f"rate_limits={value!r}: expected a mapping of model to "
            "{rpm: ..., tpm: ...}, e.g. {gpt-5-mini: {rpm: 500, tpm: 500000}}"
        )
    out: dict[str, Limits] = {}
    for model, limits in value.items():
        if known is not None and not known(str(model)):
            raise ValueError(
                f"rate_limits[{model!r}]: unknown model; give the limits of a "
                "model this run calls (or declare it in model_capabilities)"
            )
        if not isinstance(limits, Mapping) or not limits or set(limits) - {"rpm", "tpm"}:
            raise ValueError(
                f"rate_limits[{model!r}] = {limits!r}: expected {{rpm: N, tpm: N}} (either or both)"
            )
        numbers = {}
        for key, n in limits.items():
            if (
                isinstance(n, bool)
                or not isinstance(n, (int, float))
                or not n > 0
                or not math.isfinite(n)
            ):
                raise ValueError(
                    f"rate_limits[{model!r}].{key} = {n!r}: must be a positive number (per minute)"
                )
            numbers[key] = float(n)
        out[str(model)] = Limits(**numbers)
    return out


def batch_options(
    retry: str = "batch",
    max_wait_hours: float = 24.0,
    poll_s: float = 60.0,
    queue_tokens: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The Batch API settings, checked: ``retry`` (``batch`` again or ``interactive``), the wait,
    the poll, each model's enqueued-token limit."""
    if retry not in BATCH_RETRY_MODES:
        raise ValueError(f"batch_retry={retry!r}: choose one of {', '.join(BATCH_RETRY_MODES)}")
    if not max_wait_hours > 0 or not poll_s > 0:
        raise ValueError("max_wait_hours and batch_poll_s must be positive")
    limits = {str(m): int(n) for m, n in (queue_tokens or {}).items()}
    if any(n <= 0 for n in limits.values()):
        raise ValueError(f"batch_queue_tokens={limits}: limits must be positive token counts")
    return {
        "retry": retry,
        "max_wait_hours": float(max_wait_hours),
        "poll_s": float(poll_s),
        "queue_tokens": limits,
    }


def _check_routes(
    backend: str, model_backends: Mapping[str, str], cache_mode: str, max_concurrency: int
) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    for model, other in model_backends.items():
        if other not in BACKENDS:
            raise ValueError(
                f"model_backends[{model!r}] = {other!r}; choose one of {', '.join(BACKENDS)}"
            )
    if cache_mode not in CACHE_MODES:
        raise ValueError(
            f"unknown cache_mode {cache_mode!r}; choose one of {', '.join(CACHE_MODES)}"
        )
    if max_concurrency < 1:
        raise ValueError("max_concurrency must be at least 1")


@dataclass(frozen=True)
class ClientConfig:
    """A client's options; build it with :meth:`make`."""

    backend: str = "offline"
    base_url: str = ""
    api_key_env: str = ""
    model_backends: Mapping[str, str] = field(default_factory=dict)
    cache_mode: str = "read_write"
    reuse_runs: tuple[str, ...] = ()  # other runs whose stored answers this one may be served
    max_concurrency: int = 32  # a ceiling: pacing decides how many below it
    max_cost_usd: float | None = None  # None: no limit; 0: cache hits and offline calls only
    price_overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    max_retries: int = 8  # the SDK's, after a failed attempt (its backoff: 0.5 s doubling to 8 s)
    request_timeout_s: float = 0.0  # 0: sized to each request (memcost.catalog.request_timeout)
    max_reasks: int = 2
    max_consecutive_failures: int = 20
    progress: bool = True
    env_file: Path | None = None
    embedding_dims: int = DEFAULT_DIMS
    model_capabilities: Mapping[str, ModelInfo] = field(default_factory=dict)
    provider_routing: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    rate_limits: Mapping[str, Limits] = field(default_factory=dict)  # stated, per model
    prefix_requests_per_minute: int | None = MAX_REQUESTS_PER_PREFIX_PER_MINUTE
    execution: Mapping[str, str] = field(default_factory=dict)
    batch: Mapping[str, Any] = field(default_factory=batch_options)

    @classmethod
    def make(
        cls,
        *,
        backend: str = "offline",
        model_backends: Mapping[str, str] | None = None,
        cache_mode: str = "read_write",
        reuse_runs: Sequence[str] | None = None,
        max_concurrency: int = 32,
        max_cost_usd: float | None = None,
        price_overrides: Mapping[str, Mapping[str, Any]] | None = None,
        env_file: str | Path | None = None,
        model_capabilities: Mapping[str, Mapping[str, Any]] | None = None,
        provider_routing: Mapping[str, Mapping[str, Any]] | None = None,
        prefix_requests_per_minute: int | None = MAX_REQUESTS_PER_PREFIX_PER_MINUTE,
        execution: Mapping[str, str] | None = None,
        batch_retry: str = "batch",
        max_wait_hours: float = 24.0,
        batch_poll_s: float = 60.0,
        batch_queue_tokens: Mapping[str, int] | None = None,
        rate_limits: Mapping[str, Mapping[str, float]] | None = None,
        **scalars: Any,
    ) -> ClientConfig:
        routes = dict(model_backends or {})
        _check_routes(backend, routes, cache_mode, int(max_concurrency))
        if max_cost_usd is not None and math.isinf(max_cost_usd):
            max_cost_usd = None
        return cls(
            backend=backend,
            model_backends=routes,
            cache_mode=cache_mode,
            reuse_runs=tuple(str(r) for r in reuse_runs or ()),
            max_concurrency=int(max_concurrency),
            max_cost_usd=max_cost_usd,
            price_overrides=normalise_price_overrides(price_overrides),
            env_file=Path(env_file) if env_file is not None else None,
            # Models on a server of the caller's own (Ollama, vLLM): declared, never guessed.
            model_capabilities={
                name: declare_model(name, facts)
                for name, facts in (model_capabilities or {}).items()
            },
            # OpenRouter provider routing per model: the host decides an open model's price.
            provider_routing={k: dict(v) for k, v in (provider_routing or {}).items()},
            prefix_requests_per_minute=prefix_requests_per_minute or None,
            execution=normalise_execution(execution),
            batch=batch_options(batch_retry, max_wait_hours, batch_poll_s, batch_queue_tokens),
            rate_limits=parse_rate_limits(
                rate_limits, known=lambda m: is_known(m, model_capabilities or {})
            ),
            **scalars,
        )

    @property
    def uses_api(self) -> bool:
        return self.backend != "offline" or any(
            b != "offline" for b in self.model_backends.values()
        )

    def backend_for(self, model: str) -> str:
        """``model_backends`` by exact, then canonical name, else ``backend``."""
        return per_model(self.model_backends, model, self.backend)

    def execution_for(self, stage: str) -> str:
        return self.execution.get(stage, "interactive")

    def routing_for(self, model: str) -> dict[str, Any] | None:
        routing = per_model(self.provider_routing, model)
        return None if routing is None else dict(routing)
