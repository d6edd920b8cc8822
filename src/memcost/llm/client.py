"""The one client every model call goes through: cache, ledger, retries, concurrency, budget.

Stage modules build frozen requests and pass their offline method; this client decides how each
request is served (disk cache, the stage's offline method, or an OpenAI-compatible API),
retries what can be retried, records one ledger record per call, and keeps counts a notebook
can print and hand to the manifest (``step.record_llm(client.summary())``).

The client is made of explicit parts, each handed to it by :func:`make_client`: a frozen
:class:`~memcost.llm.config.ClientConfig`; the :class:`~memcost.llm.transport.Transport`
(endpoints, HTTP attempts, pacing); the disk cache, the ledger and the budget; the
:class:`~memcost.llm.stats.Accounting` of its calls; the
:class:`~memcost.llm.calling.CallPath` that serves one call (offline, cache or API, then the
ledger); the :class:`~memcost.llm.items.ItemRunner` that schedules items and re-asks; and the
:class:`~memcost.llm.batch.BatchPrefill` that fills the cache through the Batch API first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from memcost.llm.batch import BatchPrefill
from memcost.llm.budget import Budget
from memcost.llm.cache import ResponseCache
from memcost.llm.calling import CallPath
from memcost.llm.config import ClientConfig
from memcost.llm.embeddings import plan_batches
from memcost.llm.errors import LLMError
from memcost.llm.items import PARSE_ERRORS, ItemRunner, ParseFn
from memcost.llm.ledger import Ledger
from memcost.llm.offline import OfflineMethod
from memcost.llm.providers import Endpoint, check_credentials
from memcost.llm.requests import ChatRequest, ChatResult, EmbeddingRequest, EmbeddingResult
from memcost.llm.stats import Accounting, ClientStats
from memcost.llm.transport import Transport
from memcost.llm.walkthrough import WalkthroughMemo
from memcost.models import EMBEDDING_MODEL, ModelInfo
from memcost.paths import RunPaths

__all__ = ["PARSE_ERRORS", "ClientConfig", "ClientStats", "LLMClient", "ParseFn", "make_client"]


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
        self.cache = calls.cache
        self.ledger = calls.ledger
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

    @property
    def run_id(self) -> str:
        return self.calls.run_id

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
        dims = dimensions or self.items.embedding_dims(model)
        if not keep:
            return np.zeros((len(texts), dims), dtype=np.float32)
        batches, fitted, truncated = plan_batches([texts[i] for i in keep])
        self.accounting.count("truncated_inputs", truncated)
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
        """How calls of ledger stage ``stage`` are sent: ``interactive``, ``batch`` or ``flex``."""
        return self.config.execution_for(stage)

    @contextmanager
    def walkthrough(self) -> Iterator[LLMClient]:
        """Calls made inside are a notebook's walk-through: their replies are kept in the run
        directory (:mod:`memcost.llm.walkthrough`) and served from there on a rerun, so an
        emptied cache never sends or records them twice (the batch dedupes by its outputs)."""
        memo = WalkthroughMemo(self.run.walkthrough)
        self.calls.walkthrough = memo
        try:
            yield self
        finally:
            self.calls.walkthrough = None
            memo.close()

    def backend_for(self, model: str) -> str:
        """The backend that serves ``model`` (``model_backends`` first, by exact name, then by
        canonical name)."""
        return self.config.backend_for(model)

    def endpoint_for(self, model: str) -> Endpoint | None:
        """Where ``model``'s calls go (``None``: the offline backend)."""
        return self.transport.endpoint_for(model)

    def capabilities(self, model: str) -> ModelInfo:
        """What ``model`` accepts: the caller's declaration, else the registry; an unknown model
        raises :class:`memcost.models.UnknownModelError` naming what to add."""
        return self.transport.capabilities(model)

    def _overflow_rule_applies(self, request: ChatRequest) -> bool:
        """OpenAI's per-prefix overflow (about 15 requests a minute) applies to its own API;
        a server of your own or another provider has its own rules."""
        endpoint = self.endpoint_for(request.model)
        return endpoint is not None and endpoint.backend == "openai"

    def summary(self) -> dict[str, Any]:
        """What a notebook prints and stores in the manifest (no keys, no prompts)."""
        return self.accounting.summary(cache_open=self.cache is not None)

    def summary_table(self):
        """Per stage and model: calls, cache hits, errors, tokens, dollars (a DataFrame)."""
        import pandas as pd

        return pd.DataFrame(self.summary()["by_stage_model"])

    def close(self) -> None:
        self.ledger.close()
        if self.cache is not None:
            self.cache.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _desc(requests: Sequence[ChatRequest]) -> str:
    if not requests:
        return "llm"
    first = requests[0]
    return f"{first.stage} {first.model}"


def open_stores(run: RunPaths, config: ClientConfig) -> tuple[Ledger, Budget, ResponseCache | None]:
    """Check credentials, then open the ledger, the budget and (for API runs) the cache."""
    if config.uses_api:
        # Before anything is spent: a missing key is an error naming the variable.
        check_credentials(
            config.backend,
            base_url=config.base_url,
            api_key_env=config.api_key_env,
            model_backends=config.model_backends,
            env_file=config.env_file,
        )
    run.root.mkdir(parents=True, exist_ok=True)
    ledger = Ledger(run.calls, price_overrides=config.price_overrides)
    budget = Budget(
        config.max_cost_usd,
        spent_before_usd=ledger.spent_before_usd,
        price_overrides=config.price_overrides,
    )
    # Offline calls never touch the cache; an API run opens it unless caching is off.
    use_cache = config.uses_api and config.cache_mode != "off"
    return ledger, budget, ResponseCache(config.cache_path) if use_cache else None


def make_client(run: RunPaths, **options: Any) -> LLMClient:
    """The client for a notebook, from its client parameters (docs/architecture.md).

    ``options`` are those of :meth:`ClientConfig.make`: ``backend``, ``base_url``,
    ``api_key_env``, ``model_backends``, ``cache_mode``, ``cache_path``, ``max_concurrency``,
    ``max_cost_usd`` (``None`` or ``inf``: no limit; ``0``: cache hits and offline calls only),
    ``price_overrides``; ``retry``, ``request_timeout_s``, ``max_reasks``, ``progress``,
    ``env_file``, ``embedding_dims``, ``max_consecutive_failures`` have defaults that suit real
    runs (tests shorten them). Paid-path options: ``model_capabilities`` declares models the
    registry does not know (``{"llama3.1:8b": {"context_window": 131072}}`` is a plain chat
    model); ``provider_routing`` pins OpenRouter hosts per model; ``tpm_limit`` throttles to a
    tokens-per-minute limit; ``max_backoff_s`` caps the backoff between retries;
    ``prefix_requests_per_minute`` caps requests a minute per conversation prefix (15);
    ``execution`` maps ledger stages to ``interactive``, ``batch`` or ``flex``; for ``batch``,
    ``batch_retry``, ``max_wait_hours``, ``batch_poll_s`` and ``batch_queue_tokens``
    (:mod:`memcost.llm.batch`).
    """
    config = ClientConfig.make(**options)
    ledger, budget, cache = open_stores(run, config)
    accounting = Accounting(config, budget)
    transport = Transport(config, accounting)
    # Cache rows carry the run's id, so a rerun can tell its own paid calls from others'.
    calls = CallPath(
        config,
        transport=transport,
        ledger=ledger,
        budget=budget,
        cache=cache,
        accounting=accounting,
        run_id=run.run_id() if cache is not None else "",
    )
    return LLMClient(
        run, config, calls=calls, items=ItemRunner(config, calls), prefill=BatchPrefill(run, calls)
    )
