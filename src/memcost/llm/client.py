"""The one client every model call goes through: cache, ledger, retries, concurrency, budget.

Stage modules build frozen requests and pass their offline method; this client decides how each
request is served (disk cache, the stage's offline method, or an OpenAI-compatible API),
retries what can be retried, records one ledger record per call, and keeps counts a notebook
can print and hand to the manifest (``step.record_llm(client.summary())``).

This file is the public face (:class:`LLMClient`, :func:`make_client`); the work is split by
concern: :mod:`memcost.llm.items` (scheduling, re-asks), :mod:`memcost.llm.calling` (one call:
offline, cache or API, then the ledger) and :mod:`memcost.llm.stats` (counts and summary).
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from memcost.llm.batch import BatchMixin, batch_options
from memcost.llm.budget import Budget
from memcost.llm.cache import CACHE_MODES, ResponseCache
from memcost.llm.calling import CallMixin
from memcost.llm.embeddings import DEFAULT_DIMS, HashingEmbedder, plan_batches
from memcost.llm.errors import LLMError
from memcost.llm.items import PARSE_ERRORS, ItemMixin, ParseFn
from memcost.llm.ledger import Ledger
from memcost.llm.offline import OfflineMethod
from memcost.llm.providers import (
    BACKENDS,
    Endpoint,
    EndpointClient,
    check_credentials,
    resolve_endpoint,
)
from memcost.llm.requests import ChatRequest, ChatResult, EmbeddingRequest, EmbeddingResult
from memcost.llm.retry import PauseGate, RetryPolicy, TokenThrottle
from memcost.llm.stats import ClientStats, StatsMixin
from memcost.llm.walkthrough import WalkthroughMemo
from memcost.models import EMBEDDING_MODEL, ModelInfo, canonical_name, declare_model, model_info
from memcost.params import normalise_execution
from memcost.paths import CACHE_DIR, RunPaths
from memcost.prefix_cache import MAX_REQUESTS_PER_PREFIX_PER_MINUTE

__all__ = ["PARSE_ERRORS", "ClientStats", "LLMClient", "ParseFn", "make_client"]

DEFAULT_CACHE_PATH = CACHE_DIR / "llm_cache.sqlite"


def _check_options(
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


class LLMClient(ItemMixin, CallMixin, BatchMixin, StatsMixin):
    """Use :func:`make_client` to build one from notebook parameters."""

    def __init__(
        self,
        run: RunPaths,
        *,
        backend: str = "offline",
        base_url: str = "",
        api_key_env: str = "",
        model_backends: Mapping[str, str] | None = None,
        cache_mode: str = "read_write",
        cache_path: str | Path | None = None,
        max_concurrency: int = 8,
        max_cost_usd: float | None = None,
        price_overrides: Mapping[str, Mapping[str, Any]] | None = None,
        retry: RetryPolicy | None = None,
        request_timeout_s: float = 0.0,
        max_reasks: int = 2,
        max_consecutive_failures: int = 20,
        progress: bool = True,
        env_file: str | Path | None = None,
        embedding_dims: int = DEFAULT_DIMS,
        model_capabilities: Mapping[str, Mapping[str, Any]] | None = None,
        provider_routing: Mapping[str, Mapping[str, Any]] | None = None,
        tpm_limit: int | None = None,
        max_backoff_s: float | None = None,
        prefix_requests_per_minute: int | None = MAX_REQUESTS_PER_PREFIX_PER_MINUTE,
        execution: Mapping[str, str] | None = None,
        batch_retry: str = "batch",
        max_wait_hours: float = 24.0,
        batch_poll_s: float = 60.0,
        batch_queue_tokens: Mapping[str, int] | None = None,
    ):
        _check_options(backend, model_backends or {}, cache_mode, max_concurrency)
        # Models on a server of the caller's own (Ollama, vLLM): declared, never guessed.
        self.model_capabilities: dict[str, ModelInfo] = {
            name: declare_model(name, facts) for name, facts in (model_capabilities or {}).items()
        }
        # OpenRouter provider routing per model, e.g. {"order": ["deepinfra"],
        # "allow_fallbacks": False}: the host decides the price of an open-weight model.
        self.provider_routing = {k: dict(v) for k, v in (provider_routing or {}).items()}
        self.prefix_requests_per_minute = prefix_requests_per_minute or None
        # How each ledger stage's calls are sent: interactive, batch or flex (params.EXECUTION_MODES)
        self.execution = normalise_execution(execution)
        self.batch_options = batch_options(batch_retry, max_wait_hours, batch_poll_s,
                                           batch_queue_tokens)
        if max_backoff_s is not None and retry is None:
            retry = RetryPolicy(max_delay_s=float(max_backoff_s))
        self.run = run
        self.backend = backend
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.model_backends = dict(model_backends or {})
        self.cache_mode = cache_mode
        self.max_concurrency = int(max_concurrency)
        self.price_overrides = {k: dict(v) for k, v in (price_overrides or {}).items()}
        self.retry = retry or RetryPolicy()
        self.request_timeout_s = float(request_timeout_s)
        self.max_reasks = int(max_reasks)
        self.max_consecutive_failures = int(max_consecutive_failures)
        self.progress = progress
        self.env_file = Path(env_file) if env_file is not None else None
        self.embedder = HashingEmbedder(embedding_dims)
        self.stats = ClientStats()
        self._open_stores(max_cost_usd, cache_path)
        self._routes: dict[str, Endpoint | None] = {}
        self._endpoints: dict[str, EndpointClient] = {}
        self._endpoints_lock = threading.Lock()
        self._inflight: dict[str, threading.Event] = {}
        self._inflight_lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self._pause = PauseGate()
        self._stop = threading.Event()  # set when a stage stops: workers give up retrying
        self._rng = random.Random()
        self._throttle = TokenThrottle(tpm_limit)
        self._consecutive_failures = 0
        self._walkthrough: WalkthroughMemo | None = None
        self._check_batch()  # batch where there is no Batch API: refused before any call

    def _open_stores(self, max_cost_usd: float | None, cache_path: str | Path | None) -> None:
        """Check credentials, then open the ledger, the budget and (for API runs) the cache."""
        uses_api = self.backend != "offline" or any(
            b != "offline" for b in self.model_backends.values()
        )
        if uses_api:
            # Before anything is spent: a missing key is an error naming the variable.
            check_credentials(
                self.backend,
                base_url=self.base_url,
                api_key_env=self.api_key_env,
                model_backends=self.model_backends,
                env_file=self.env_file,
            )
        self.run.root.mkdir(parents=True, exist_ok=True)
        self.ledger = Ledger(self.run.calls, price_overrides=self.price_overrides)
        self.budget = Budget(
            max_cost_usd,
            spent_before_usd=self.ledger.spent_before_usd,
            price_overrides=self.price_overrides,
        )
        self.cache_path = Path(cache_path) if cache_path else DEFAULT_CACHE_PATH
        # Offline calls never touch the cache; an API run opens it unless caching is off.
        use_cache = uses_api and self.cache_mode != "off"
        self.cache = ResponseCache(self.cache_path) if use_cache else None
        # Cache rows carry the run's id, so a rerun can tell its own paid calls from others'.
        self.run_id = self.run.run_id() if self.cache is not None else ""

    # ------------------------------------------------------------------ public API

    def chat(
        self,
        request: ChatRequest,
        *,
        offline: OfflineMethod | None = None,
        parse: ParseFn | None = None,
    ) -> ChatResult:
        """One request (see :meth:`chat_many`)."""
        return self.chat_many([request], offline=offline, parse=parse, progress=False)[0]

    def chat_many(
        self,
        requests: Sequence[ChatRequest],
        *,
        offline: OfflineMethod | None = None,
        parse: ParseFn | None = None,
        desc: str | None = None,
        on_result: Callable[[ChatResult], None] | None = None,
        progress: bool | None = None,
    ) -> list[ChatResult]:
        """Serve many requests with at most ``max_concurrency`` in flight; results in input order.

        ``offline`` is the stage's method for the offline backend; ``parse`` turns a reply into
        the stage's value (raising ``ValueError`` & co. when it cannot), with bounded re-asks;
        ``on_result`` is called in this thread as each item completes, so a stage can append its
        output file item by item. Raises :class:`FatalAPIError` (401, 400, ...),
        :class:`CacheMiss` or :class:`BudgetExceeded` after the calls in flight have finished.
        """
        requests = list(requests)
        self._batch_first(requests)
        return self._run(
            requests,
            after=None,
            work=lambda r: self._chat_item(r, offline, parse),
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
        on_result: Callable[[ChatResult], None] | None = None,
        progress: bool | None = None,
    ) -> list[list[ChatResult]]:
        """Like :meth:`chat_many` for ordered groups (e.g. the questions of one conversation).

        With ``first_alone`` the first request of each group is sent on its own and the rest
        only after it has returned, while different groups proceed in parallel: the provider's
        prompt cache then holds the shared prefix (the conversation) when the others arrive.
        Groups interleave: among ready requests, the group (prefix) with the fewest requests in
        the last minute goes next, and a group waits once it has sent
        ``prefix_requests_per_minute`` in a minute (above it the provider's cache overflows).
        """
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
        self._batch_first(flat)
        results = self._run(
            flat,
            after=after,
            work=lambda r: self._chat_item(r, offline, parse),
            desc=desc or _desc(flat),
            on_result=on_result,
            progress=progress,
            prefixes=prefixes,
        )
        out: list[list[ChatResult]] = []
        start = 0
        for size in shape:
            out.append(results[start : start + size])
            start += size
        return out

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
        """``(len(texts), d)`` float32 with L2-normalised rows, batched within the API limits.

        Texts without content get a zero row (the API rejects empty input). Raises
        :class:`LLMError` if a batch still fails after its retries (the batches that completed
        are cached, so a rerun only sends the rest).
        """
        texts = [str(t) for t in texts]
        keep = [i for i, t in enumerate(texts) if t.strip()]
        dims = dimensions or self._embedding_dims(model)
        if not keep:
            return np.zeros((len(texts), dims), dtype=np.float32)
        batches, fitted, truncated = plan_batches([texts[i] for i in keep])
        self._count("truncated_inputs", truncated)
        requests = [
            EmbeddingRequest(
                model, tuple(fitted[j] for j in batch), dimensions=dimensions, tags=dict(tags or {})
            )
            for batch in batches
        ]
        results = self.embed_many(requests, desc=desc, progress=progress)
        failed = [r for r in results if r.error]
        if failed:
            raise LLMError(
                f"{len(failed)} of {len(results)} embedding batches failed ({failed[0].error}); "
                "rerun to retry them (completed batches come back from the cache)"
            )
        width = results[0].vectors.shape[1]
        out = np.zeros((len(texts), width), dtype=np.float32)
        rows = np.concatenate([r.vectors for r in results], axis=0)
        out[keep] = rows
        return out

    def embed_many(
        self,
        requests: Sequence[EmbeddingRequest],
        *,
        desc: str | None = None,
        progress: bool | None = None,
    ) -> list[EmbeddingResult]:
        requests = list(requests)
        self._batch_first(requests)
        return self._run(
            requests,
            after=None,
            work=self._embed_item,
            desc=desc or "embed",
            on_result=None,
            progress=progress,
        )

    def execution_for(self, stage: str) -> str:
        """How calls of ledger stage ``stage`` are sent: ``interactive``, ``batch`` or ``flex``."""
        return self.execution.get(stage, "interactive")

    @contextmanager
    def walkthrough(self) -> Iterator[LLMClient]:
        """Calls made inside are a notebook's walk-through: their replies are kept in the run
        directory (:mod:`memcost.llm.walkthrough`) and served from there on a rerun, so an
        emptied cache never sends or records them twice (the batch dedupes by its outputs)."""
        memo = WalkthroughMemo(self.run.walkthrough)
        self._walkthrough = memo
        try:
            yield self
        finally:
            self._walkthrough = None
            memo.close()

    def backend_for(self, model: str) -> str:
        """The backend that serves ``model`` (``model_backends`` first, by exact name, then by
        canonical name)."""
        if model in self.model_backends:
            return self.model_backends[model]
        name = canonical_name(model)
        for key, backend in self.model_backends.items():
            if canonical_name(key) == name:
                return backend
        return self.backend

    def endpoint_for(self, model: str) -> Endpoint | None:
        """Where ``model``'s calls go (``None``: the offline backend)."""
        if model not in self._routes:
            backend = self.backend_for(model)
            self._routes[model] = (
                None
                if backend == "offline"
                else resolve_endpoint(
                    backend,
                    base_url=self.base_url,
                    api_key_env=self.api_key_env,
                    primary=backend == self.backend,
                    custom_routed="custom" in self.model_backends.values(),
                )
            )
        return self._routes[model]

    def capabilities(self, model: str) -> ModelInfo:
        """What ``model`` accepts: the caller's declaration, else the registry; an unknown model
        raises :class:`memcost.models.UnknownModelError` naming what to add."""
        return model_info(model, self.model_capabilities)

    def _overflow_rule_applies(self, request: ChatRequest) -> bool:
        """OpenAI's per-prefix overflow (about 15 requests a minute) applies to its own API;
        a server of your own or another provider has its own rules."""
        endpoint = self.endpoint_for(request.model)
        return endpoint is not None and endpoint.backend == "openai"

    def routing_for(self, model: str) -> dict[str, Any] | None:
        """OpenRouter provider routing for ``model`` (by exact, then canonical name)."""
        for key, routing in self.provider_routing.items():
            if key == model or canonical_name(key) == canonical_name(model):
                return routing
        return None

    def close(self) -> None:
        self.ledger.close()
        if self.cache is not None:
            self.cache.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _embedding_dims(self, model: str) -> int:
        if self.endpoint_for(model) is None:
            return self.embedder.dims
        try:
            return model_info(model).embedding_dims or DEFAULT_DIMS
        except KeyError:
            return DEFAULT_DIMS


def _desc(requests: Sequence[ChatRequest]) -> str:
    if not requests:
        return "llm"
    first = requests[0]
    return f"{first.stage} {first.model}"


def make_client(
    run: RunPaths,
    *,
    backend: str = "offline",
    base_url: str = "",
    api_key_env: str = "",
    model_backends: Mapping[str, str] | None = None,
    cache_mode: str = "read_write",
    max_concurrency: int = 8,
    max_cost_usd: float | None = None,
    price_overrides: Mapping[str, Mapping[str, Any]] | None = None,
    cache_path: str | Path | None = None,
    **options: Any,
) -> LLMClient:
    """The client for a notebook, from its shared parameters (docs/architecture.md).

    ``max_cost_usd``: ``None`` (or ``inf``) means no limit; ``0`` allows cache hits and offline
    calls only. Further ``options`` (``retry``, ``request_timeout_s``, ``max_reasks``,
    ``progress``, ``env_file``, ``embedding_dims``, ``max_consecutive_failures``) have defaults
    that suit real runs; tests shorten them. Paid-path options: ``model_capabilities`` declares
    models the registry does not know (a model on your own server:
    ``{"llama3.1:8b": {"context_window": 131072}}`` is a plain chat model); ``provider_routing``
    pins OpenRouter hosts per model (``{"openai/gpt-oss-120b": {"order": [...],
    "allow_fallbacks": False}}``); ``tpm_limit`` throttles to a tokens-per-minute limit;
    ``max_backoff_s`` caps the backoff between retries (minutes by default);
    ``prefix_requests_per_minute`` caps requests a minute per conversation prefix (15);
    ``execution`` maps ledger stages to ``interactive``, ``batch`` or ``flex``; for ``batch``,
    ``batch_retry`` (``batch`` or ``interactive``: what becomes of requests a batch did not
    answer), ``max_wait_hours``, ``batch_poll_s`` and ``batch_queue_tokens`` (model → enqueued-
    token limit) (:mod:`memcost.llm.batch`).
    """
    if max_cost_usd is not None and math.isinf(max_cost_usd):
        max_cost_usd = None
    return LLMClient(
        run,
        backend=backend,
        base_url=base_url,
        api_key_env=api_key_env,
        model_backends=model_backends,
        cache_mode=cache_mode,
        cache_path=cache_path,
        max_concurrency=max_concurrency,
        max_cost_usd=max_cost_usd,
        price_overrides=price_overrides,
        **options,
    )
