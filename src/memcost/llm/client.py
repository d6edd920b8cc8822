"""The one client every model call goes through: cache, ledger, retries, concurrency, budget.

Stage modules build frozen requests and pass their offline method; this client decides how each
request is served (disk cache, the stage's offline method, or an OpenAI-compatible API),
retries what can be retried, records one ledger record per call, and keeps counts a notebook
can print and store in the manifest.

Life of one API request: claim its hash (so duplicates in flight wait instead of paying twice)
→ disk cache → budget reservation → HTTP attempts with backoff → cache row → ledger record →
release. A call killed anywhere before the cache row is simply sent again by a rerun; one killed
between the cache row and the ledger record is recognised on rerun (the row's ``origin`` is this
run) and recorded then, as paid.
"""

from __future__ import annotations

import math
import random
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from memcost import manifest as manifest_mod
from memcost.llm.budget import Budget, BudgetStop
from memcost.llm.cache import CACHE_MODES, ResponseCache
from memcost.llm.embeddings import (
    DEFAULT_DIMS,
    HashingEmbedder,
    decode_vectors,
    encode_vectors,
    l2_normalise,
    plan_batches,
)
from memcost.llm.errors import BudgetExceeded, CacheMiss, FatalAPIError, LLMError, TransientError
from memcost.llm.ledger import Ledger, call_key, make_record
from memcost.llm.offline import OFFLINE, OfflineMethod, run_chat, run_embedding
from memcost.llm.parsing import reask_request
from memcost.llm.providers import (
    BACKENDS,
    Endpoint,
    EndpointClient,
    check_credentials,
    resolve_endpoint,
)
from memcost.llm.requests import ChatRequest, ChatResult, EmbeddingRequest, EmbeddingResult, Usage
from memcost.llm.retry import PauseGate, RetryPolicy
from memcost.llm.scheduler import Progress, run_scheduled
from memcost.models import EMBEDDING_MODEL, canonical_name, model_info
from memcost.paths import CACHE_DIR, RunPaths
from memcost.tokens import count_tokens

T = TypeVar("T")
R = TypeVar("R")
ParseFn = Callable[[str], Any]
# What a stage's ``parse`` may raise to say "this reply is unusable" (anything else is a bug in
# the stage and propagates).
PARSE_ERRORS = (ValueError, TypeError, KeyError, IndexError)
DEFAULT_CACHE_PATH = CACHE_DIR / "llm_cache.sqlite"


@dataclass
class _Outcome:
    """One call's outcome, before the stage's parsing."""

    key: str
    backend: str
    provider: str
    usage: Usage
    cached: bool
    latency_s: float
    attempts: int
    text: str = ""
    vectors: np.ndarray | None = None
    error: str | None = None
    served_model: str | None = None
    finish_reason: str | None = None


@dataclass
class _StageModel:
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
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    paid_usd: float = 0.0  # list-price dollars of calls sent by this client
    estimated_usd: float = 0.0  # list-price dollars of every call (cached and offline included)
    by_stage_model: dict[tuple[str, str], _StageModel] = field(
        default_factory=lambda: defaultdict(_StageModel)
    )
    models: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))


class LLMClient:
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
        request_timeout_s: float = 300.0,
        max_reasks: int = 2,
        max_consecutive_failures: int = 20,
        progress: bool = True,
        env_file: str | Path | None = None,
        embedding_dims: int = DEFAULT_DIMS,
    ):
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
        for model, other in (model_backends or {}).items():
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

        uses_api = backend != "offline" or any(b != "offline" for b in self.model_backends.values())
        if uses_api:
            # Before anything is spent: a missing key is an error naming the variable.
            check_credentials(
                backend,
                base_url=base_url,
                api_key_env=api_key_env,
                model_backends=self.model_backends,
                env_file=self.env_file,
            )
        run.root.mkdir(parents=True, exist_ok=True)
        self.ledger = Ledger(run.calls, price_overrides=self.price_overrides)
        self.budget = Budget(
            max_cost_usd,
            spent_before_usd=self.ledger.spent_before_usd,
            price_overrides=self.price_overrides,
        )
        self.cache_path = Path(cache_path) if cache_path else DEFAULT_CACHE_PATH
        # Offline calls never touch the cache; an API run opens it unless caching is off.
        self.cache = ResponseCache(self.cache_path) if (uses_api and cache_mode != "off") else None
        self.run_id = _run_id(run) if self.cache is not None else ""

        self._routes: dict[str, Endpoint | None] = {}
        self._endpoints: dict[str, EndpointClient] = {}
        self._endpoints_lock = threading.Lock()
        self._inflight: dict[str, threading.Event] = {}
        self._inflight_lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self._pause = PauseGate()
        self._stop = threading.Event()  # set when a stage stops: workers give up retrying
        self._rng = random.Random()
        self._consecutive_failures = 0

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
        Among requests ready to go, earlier groups go first, so started groups finish early.
        """
        flat: list[ChatRequest] = []
        after: list[int | None] = []
        shape: list[int] = []
        for group in groups:
            group = list(group)
            shape.append(len(group))
            start = len(flat)
            for position, request in enumerate(group):
                flat.append(request)
                after.append(start if (first_alone and position > 0) else None)
        results = self._run(
            flat,
            after=after,
            work=lambda r: self._chat_item(r, offline, parse),
            desc=desc or _desc(flat),
            on_result=on_result,
            progress=progress,
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
        with self._stats_lock:
            self.stats.truncated_inputs += truncated
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
        return self._run(
            requests,
            after=None,
            work=self._embed_item,
            desc=desc or "embed",
            on_result=None,
            progress=progress,
        )

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

    def summary(self) -> dict[str, Any]:
        """What a notebook prints and stores in the manifest (no keys, no prompts)."""
        s = self.stats
        with self._stats_lock:
            by = [
                {
                    "stage": stage,
                    "model": model,
                    **{
                        k: (round(v, 6) if isinstance(v, float) else v) for k, v in vars(sm).items()
                    },
                }
                for (stage, model), sm in sorted(s.by_stage_model.items())
            ]
            counts = {k: v for k, v in vars(s).items() if k not in ("by_stage_model", "models")}
            models = {m: sorted(v) for m, v in sorted(s.models.items())}
        endpoints = {}
        for backend in {self.backend, *self.model_backends.values()} - {"offline"}:
            ep = resolve_endpoint(
                backend,
                base_url=self.base_url,
                api_key_env=self.api_key_env,
                primary=backend == self.backend,
                custom_routed="custom" in self.model_backends.values(),
            )
            endpoints[backend] = {"base_url": ep.identity.split("|", 1)[1], "key_env": ep.key_env}
        return {
            "backend": self.backend,
            "model_backends": self.model_backends,
            "endpoints": endpoints,
            "cache_mode": self.cache_mode,
            "cache_path": str(self.cache_path) if self.cache is not None else None,
            "max_concurrency": self.max_concurrency,
            "max_cost_usd": None if not self.budget.limited else self.budget.limit,
            "price_overrides": self.price_overrides,
            **{k: (round(v, 6) if isinstance(v, float) else v) for k, v in counts.items()},
            "run_spent_usd": round(self.budget.spent, 6),
            "model_snapshots": models,
            "routes": {m: self.backend_for(m) for m in models},
            "by_stage_model": by,
        }

    def summary_table(self):
        """Per stage and model: calls, cache hits, errors, tokens, dollars (a DataFrame)."""
        import pandas as pd

        return pd.DataFrame(self.summary()["by_stage_model"])

    def record_in_manifest(self, key: str) -> dict[str, Any]:
        """Store :meth:`summary` under ``manifest["llm"][key]`` and the model snapshots under
        ``manifest["models"]``."""
        return manifest_mod.Step(self.run, key.rsplit("/", 1)[-1], key.split("/")[0] if "/" in key else None, {}).record_llm(self.summary())

    def close(self) -> None:
        self.ledger.close()
        if self.cache is not None:
            self.cache.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ scheduling

    def _run(
        self,
        items: list[Any],
        *,
        after: Sequence[int | None] | None,
        work: Callable[[Any], T],
        desc: str,
        on_result: Callable[[T], None] | None,
        progress: bool | None,
    ) -> list[T]:
        show = self.progress if progress is None else progress
        bar = Progress(len(items), desc, self._progress_postfix) if (show and items) else None
        self._stop.clear()
        results, failure = run_scheduled(
            items,
            work,
            after=after,
            inline=self._inline,
            max_concurrency=self.max_concurrency,
            on_result=on_result,
            on_failure=lambda exc: self._stop.set(),
            progress=bar,
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

    def _progress_postfix(self) -> str:
        s = self.stats
        if self.backend == "offline" and not self.model_backends:
            return f"hits={s.cache_hits} est=${s.estimated_usd:.4f}"
        return f"hits={s.cache_hits} ${s.paid_usd:.4f}"

    def _inline(self, request: ChatRequest | EmbeddingRequest) -> bool:
        endpoint = self.endpoint_for(request.model)
        if endpoint is None:
            return True
        return self.cache is not None and self.cache.contains(request.key(endpoint.identity))

    # ------------------------------------------------------------------ one item

    def _chat_item(
        self, request: ChatRequest, offline: OfflineMethod | None, parse: ParseFn | None
    ) -> ChatResult:
        outcome = self._call(request, offline)
        usage, attempts, calls = outcome.usage, outcome.attempts, 1
        current, parsed, parse_error = request, None, None
        if parse is not None and outcome.error is None:
            for number in range(1, self.max_reasks + 2):
                try:
                    parsed, parse_error = parse(outcome.text), None
                    break
                except PARSE_ERRORS as exc:
                    parse_error = f"unparseable reply: {type(exc).__name__}: {exc}"[:500]
                if number > self.max_reasks or self._stop.is_set():
                    break
                current = reask_request(current, outcome.text, str(parse_error), number)
                with self._stats_lock:
                    self.stats.reasks += 1
                outcome = self._call(current, offline)
                usage, attempts, calls = (
                    usage + outcome.usage,
                    attempts + outcome.attempts,
                    calls + 1,
                )
                if outcome.error is not None:
                    parse_error = None
                    break
            if parse_error is not None:
                with self._stats_lock:
                    self.stats.parse_failures += 1
        with self._stats_lock:
            self.stats.items += 1
        return ChatResult(
            request=request,
            text=outcome.text,
            usage=usage,
            request_hash=outcome.key,
            backend=outcome.backend,
            provider=outcome.provider,
            cached=outcome.cached,
            latency_s=outcome.latency_s,
            attempts=attempts,
            calls=calls,
            error=outcome.error,
            served_model=outcome.served_model,
            finish_reason=outcome.finish_reason,
            parsed=parsed,
            parse_error=parse_error,
        )

    def _embed_item(self, request: EmbeddingRequest) -> EmbeddingResult:
        outcome = self._call(request, None)
        with self._stats_lock:
            self.stats.items += 1
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

    # ------------------------------------------------------------------ one call

    def _call(
        self, request: ChatRequest | EmbeddingRequest, offline: OfflineMethod | None
    ) -> _Outcome:
        endpoint = self.endpoint_for(request.model)
        if endpoint is None:
            return self._offline_call(request, offline)
        key = request.key(endpoint.identity)
        if self.cache is None:
            return self._api_call(request, endpoint, key)
        event = self._claim(key)
        while event is not None:  # the same request is in flight: wait for its answer
            event.wait()
            event = self._claim(key)
        try:
            entry = self.cache.get(key)
            if entry is not None:
                return self._cached_call(request, endpoint, key, entry)
            if self.cache_mode == "replay_only":
                raise CacheMiss(
                    f"cache_mode='replay_only' and no cached response for the {request.stage} call "
                    f"to {request.model} (prompt: {request.excerpt()!r}) in {self.cache_path}. "
                    "Run once with cache_mode='read_write' to fill the cache."
                )
            return self._api_call(request, endpoint, key)
        finally:
            self._release(key)

    def _offline_call(
        self, request: ChatRequest | EmbeddingRequest, offline: OfflineMethod | None
    ) -> _Outcome:
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
        outcome = _Outcome(
            key, OFFLINE, OFFLINE, usage, False, latency, 1, text=text, vectors=vectors
        )
        self._account(request, outcome, offline=True)
        self._record(request, outcome, once=True)
        return outcome

    def _cached_call(
        self,
        request: ChatRequest | EmbeddingRequest,
        endpoint: Endpoint,
        key: str,
        entry: dict[str, Any],
    ) -> _Outcome:
        # A row this run paid for whose ledger record was lost to a kill is the original call.
        recovered = entry.get("origin") == self.run_id and not self.ledger.paid(key)
        outcome = _Outcome(
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
        )
        self._account(request, outcome, cache_hit=True, paid=recovered)
        written = self._record(request, outcome, once=True, cached_flag=not recovered)
        if written and recovered:
            self.budget.settle(None, request.model, outcome.usage)  # the run did pay for it
            with self._stats_lock:
                self.stats.recovered += 1
        return outcome

    def _api_call(
        self, request: ChatRequest | EmbeddingRequest, endpoint: Endpoint, key: str
    ) -> _Outcome:
        client = self._endpoint_client(endpoint)
        reserved = self.budget.reserve(request)  # raises BudgetStop: nothing is sent
        kind = "embed" if isinstance(request, EmbeddingRequest) else "chat"
        attempts, latency, response, error = 0, 0.0, None, None
        try:
            while True:
                self._pause.wait(self._stop)
                attempts += 1
                t0 = time.perf_counter()
                try:
                    response = client.embed(request) if kind == "embed" else client.chat(request)
                    latency = time.perf_counter() - t0
                    break
                except TransientError as exc:
                    latency = time.perf_counter() - t0
                    if attempts >= self.retry.max_attempts:
                        error = f"{exc} (gave up after {attempts} attempts)"
                        break
                    delay = self.retry.delay(attempts, exc.retry_after, self._rng)
                    if exc.status == 429 and exc.retry_after is not None:
                        self._pause.pause(delay)
                    if self._stop.wait(delay):  # the stage is stopping: do not retry
                        error = f"{exc} (not retried: the stage stopped)"
                        break
        except FatalAPIError as exc:
            self.budget.settle(reserved, request.model, None)
            outcome = _Outcome(
                key,
                endpoint.backend,
                endpoint.host,
                Usage(),
                False,
                time.perf_counter() - t0,
                attempts,
                error=str(exc),
            )
            self._account(request, outcome, sent=True)
            self._record(request, outcome)
            raise
        except BaseException:
            self.budget.settle(reserved, request.model, None)
            raise

        usage_estimated = False
        if response is None:
            outcome = _Outcome(
                key, endpoint.backend, endpoint.host, Usage(), False, latency, attempts, error=error
            )
            self.budget.settle(reserved, request.model, None)
        elif kind == "chat":
            usage = Usage.from_dict(response["usage"]) if response["usage"] else None
            if usage is None:  # a server that reports no usage: count it ourselves
                usage_estimated = True
                usage = Usage(
                    prompt_tokens=sum(count_tokens(c) for _, c in request.messages),
                    completion_tokens=count_tokens(response["text"]),
                )
            outcome = _Outcome(
                key,
                endpoint.backend,
                endpoint.host,
                usage,
                False,
                latency,
                attempts,
                text=response["text"],
                served_model=response["served_model"],
                finish_reason=response["finish_reason"],
            )
        else:
            prompt = response["prompt_tokens"]
            if prompt is None:
                usage_estimated = True
                prompt = sum(count_tokens(t) for t in request.inputs)
            vectors = l2_normalise(response["vectors"])
            outcome = _Outcome(
                key,
                endpoint.backend,
                endpoint.host,
                Usage(prompt_tokens=int(prompt)),
                False,
                latency,
                attempts,
                vectors=vectors,
                served_model=response["served_model"],
            )
        if response is not None:
            self.budget.settle(reserved, request.model, outcome.usage)
            if self.cache is not None:
                stored: dict[str, Any] = {
                    "usage": outcome.usage.as_dict(),
                    "attempts": attempts,
                    "latency_s": round(latency, 4),
                    "served_model": outcome.served_model,
                    "usage_estimated": usage_estimated,
                }
                if kind == "chat":
                    stored.update(text=outcome.text, finish_reason=outcome.finish_reason)
                else:
                    stored["vectors"] = encode_vectors(outcome.vectors)  # type: ignore[arg-type]
                self.cache.put(
                    key,
                    stored,
                    kind=kind,
                    stage=request.stage,
                    model=request.model,
                    origin=self.run_id,
                )
        self._account(
            request, outcome, sent=True, paid=response is not None, usage_estimated=usage_estimated
        )
        self._record(request, outcome)
        self._note_failure(outcome.error is not None, request)
        return outcome

    def _note_failure(self, failed: bool, request: ChatRequest | EmbeddingRequest) -> None:
        """Stop when the endpoint looks down: many calls in a row failing after all retries."""
        with self._stats_lock:
            self._consecutive_failures = self._consecutive_failures + 1 if failed else 0
            tripped = self._consecutive_failures >= self.max_consecutive_failures
        if tripped:
            raise FatalAPIError(
                f"{self.max_consecutive_failures} calls in a row failed after all retries (last: "
                f"{request.stage} call to {request.model}); the endpoint seems unavailable. "
                "Finished calls are cached and recorded; rerun later to continue."
            )

    # ------------------------------------------------------------------ bookkeeping

    def _record(
        self,
        request: ChatRequest | EmbeddingRequest,
        outcome: _Outcome,
        *,
        once: bool = False,
        cached_flag: bool | None = None,
    ) -> bool:
        """Write the ledger record; with ``once``, skip it if this run already recorded the call."""
        ckey = call_key(outcome.key, request.tags)
        if once and self.ledger.seen(ckey):
            with self._stats_lock:
                self.stats.replayed += 1
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
        self.ledger.write(record)
        with self._stats_lock:
            self.stats.recorded += 1
        return True

    def _account(
        self,
        request: ChatRequest | EmbeddingRequest,
        outcome: _Outcome,
        *,
        sent: bool = False,
        cache_hit: bool = False,
        offline: bool = False,
        paid: bool = False,
        usage_estimated: bool = False,
    ) -> None:
        cost = self.budget.cost(request.model, outcome.usage) or 0.0
        with self._stats_lock:
            s = self.stats
            sm = s.by_stage_model[(request.stage, request.model)]
            s.calls += 1
            sm.calls += 1
            if sent:
                s.api_calls += 1
                sm.api_calls += 1
                s.attempts += outcome.attempts
                sm.attempts += outcome.attempts
                s.retries += max(0, outcome.attempts - 1)
            if cache_hit:
                s.cache_hits += 1
                sm.cache_hits += 1
            if offline:
                s.offline_calls += 1
            if usage_estimated:
                s.usage_estimated += 1
            if outcome.error is not None:
                s.errors += 1
                sm.errors += 1
            u = outcome.usage
            for name in (
                "prompt_tokens",
                "cached_prompt_tokens",
                "completion_tokens",
                "reasoning_tokens",
            ):
                setattr(s, name, getattr(s, name) + getattr(u, name))
                setattr(sm, name, getattr(sm, name) + getattr(u, name))
            s.estimated_usd += cost
            sm.estimated_usd += cost
            if paid and sent:
                s.paid_usd += cost
                sm.paid_usd += cost
            if outcome.served_model:
                s.models[request.model].add(outcome.served_model)
            elif offline:
                s.models[request.model]  # noqa: B018 - note the model as used

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

    def _endpoint_client(self, endpoint: Endpoint) -> EndpointClient:
        with self._endpoints_lock:
            client = self._endpoints.get(endpoint.identity)
            if client is None:
                client = EndpointClient(
                    endpoint, timeout_s=self.request_timeout_s, env_file=self.env_file
                )
                self._endpoints[endpoint.identity] = client
            return client

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


def _run_id(run: RunPaths) -> str:
    """A unique id for this run directory, kept in its manifest: cache rows carry it, so a
    rerun can tell its own calls from other runs' (a deleted and recreated run gets a new id)."""
    holder: dict[str, str] = {}

    def mutate(m: dict[str, Any]) -> None:
        holder["id"] = m.setdefault("run_id", uuid.uuid4().hex)

    manifest_mod.update_manifest(run, mutate)
    return holder["id"]


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
    that suit real runs; tests shorten them.
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
