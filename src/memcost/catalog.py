"""The catalog of models and prices (``assets/models.yaml``, ``assets/prices.csv``): what each model
can do, what it costs on a date, when it is shut down, and the prompt-cache rule."""

from __future__ import annotations

import csv
import math
import os
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import date
from typing import Any

import numpy as np
import yaml

from memcost.paper import PAPER_SETTINGS
from memcost.paths import ASSETS_DIR

# --- Models --------------------------------------------------------------------------------------

DEFAULT_TIER = "tier 1"
# OpenAI's model pages, Tier 1 (after the first $5 paid), as raised on 2025-09-12 for gpt-5 and
# gpt-5-mini: requests and tokens per minute per model.
TIER_SOURCE = "OpenAI's model pages, usage tier 1, as of 2025-09-12"
# The successors' pages were not checked here: they are assumed to have the limits of the model
# they replace, and the estimate says so.
ASSUMED_AS: dict[str, str] = {}  # from models.yaml
TIER_LIMITS: dict[str, dict[str, tuple[int, int]]] = {DEFAULT_TIER: {}}  # from models.yaml


DEPRECATIONS_URL = "https://developers.openai.com/api/docs/deprecations"  # notice of 2026-06-11
OUTPUT_LIMIT_PARAMS = ("max_tokens", "max_completion_tokens")
RESPONSE_FORMATS = ("json_object", "json_schema")
# OpenAI's per-request limits of embeddings: 2,048 inputs, 300,000 tokens summed over the
# inputs, 8,192 tokens per input. They are counted with cl100k_base; we count with o200k_base
# (the only tokenizer shipped), which gives a few percent fewer tokens on English: a margin.
API_MAX_INPUTS = 2_048
API_MAX_TOKENS = 300_000
API_MAX_INPUT_TOKENS = 8_192
TOKEN_MARGIN = 0.85
REQUEST_TOKENS = int(API_MAX_TOKENS * TOKEN_MARGIN)  # o200k tokens in one embedding request


class UnknownModelError(KeyError):
    """A model the registry does not know, and the caller did not declare."""

    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return str(self.args[0])


@dataclass(frozen=True)
class ModelInfo:
    """Static facts about one model (not prices). ``max_input_tokens``: what is left for the prompt
    when the maximum output is reserved (how OpenAI documents GPT-5's 272k input limit);
    ``shutdown_date`` and ``successor``: the provider's deprecations page."""

    name: str  # canonical name without provider prefix or snapshot date
    family: str  # "gpt-5" | "gpt-6" | "gpt-oss" | "embedding" | "other" | "declared"
    context_window: int
    max_output_tokens: int
    reasoning: bool  # produces reasoning tokens (billed as output)
    embedding_dims: int | None = None
    max_input_tokens: int | None = None
    providers: tuple[str, ...] = ("openai",)
    temperature: bool = True
    reasoning_efforts: tuple[str, ...] = ()
    output_limit_param: str = "max_tokens"
    response_formats: tuple[str, ...] = ("json_object",)
    prompt_cache_key: bool = False
    tokenizer: str = "o200k_base"
    price_key: str = ""  # "" = the name
    shutdown_date: str | None = None
    successor: str | None = None
    source: str = ""
    # Throughput floors that size a request's timeout (request_timeout_s = 0): a slow hour of
    # the provider, not its median (assumed, not measured; declare yours for a slow server).
    input_tokens_per_s: float = 5_000.0
    output_tokens_per_s: float = 50.0

    def __post_init__(self) -> None:
        if self.output_limit_param not in OUTPUT_LIMIT_PARAMS:
            raise ValueError(
                f"{self.name}: output_limit_param must be one of {OUTPUT_LIMIT_PARAMS}"
            )
        bad = sorted(set(self.response_formats) - set(RESPONSE_FORMATS))
        if bad:
            raise ValueError(f"{self.name}: unknown response formats {bad}")

    @property
    def prompt_limit(self) -> int:
        return self.max_input_tokens or (self.context_window - self.max_output_tokens)


# A request's timeout when ``request_timeout_s`` is 0 ("sized"): see :func:`request_timeout`.
TIMEOUT_BASE_S = 60.0  # connecting, queueing and the first token
TIMEOUT_MAX_S = 3_600.0  # no single attempt waits longer than an hour
UNSET_OUTPUT_TOKENS = 4_096  # output expected of a request that sets no limit
REASONING_TIMEOUT_FACTOR = 3.0  # a reasoning model's hidden tokens come before its answer


def request_timeout(info: ModelInfo, prompt_tokens: int, max_output_tokens: int | None) -> float:
    """Seconds one attempt may take: a base, plus the prompt and the output limit at the model's
    throughput floors (three times for a reasoning model), at most :data:`TIMEOUT_MAX_S`."""
    output = max_output_tokens or min(UNSET_OUTPUT_TOKENS, info.max_output_tokens)
    work = prompt_tokens / info.input_tokens_per_s + output / info.output_tokens_per_s
    if info.reasoning:
        work *= REASONING_TIMEOUT_FACTOR
    return round(min(TIMEOUT_MAX_S, TIMEOUT_BASE_S + work), 1)


def _load_models() -> dict[str, ModelInfo]:
    raw = yaml.safe_load((ASSETS_DIR / "models.yaml").read_text(encoding="utf-8"))
    out = {}
    for name, facts in raw.items():
        facts = dict(facts)
        limits, assumed = facts.pop("tier1_limits", None), facts.pop("tier1_limits_as", None)
        if limits:
            TIER_LIMITS[DEFAULT_TIER][name] = (int(limits["rpm"]), int(limits["tpm"]))
        if assumed:
            ASSUMED_AS[name] = assumed
        for key in ("providers", "reasoning_efforts", "response_formats"):
            if key in facts:
                facts[key] = tuple(facts[key])
        out[name] = ModelInfo(name=name, **facts)
    return out


_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")
Declared = Mapping[str, "ModelInfo | Mapping[str, Any]"]


def canonical_name(model: str) -> str:
    """``openai/gpt-oss-120b`` → ``gpt-oss-120b``; ``gpt-5-mini-2025-08-07`` → ``gpt-5-mini``."""
    name = model.strip().split("/")[-1].split(":")[0].lower()
    return _SNAPSHOT.sub("", name)


_DECLARABLE = {f.name for f in fields(ModelInfo)} - {"name"}


def declare_model(model: str, facts: Mapping[str, Any] | None = None) -> ModelInfo:
    """A model served by your own server, declared by the caller: a plain chat model unless
    ``facts`` set :class:`ModelInfo` fields (``{"context_window": 131072}``)."""
    facts = dict(facts or {})
    unknown = sorted(set(facts) - _DECLARABLE)
    if unknown:
        raise ValueError(
            f"model_capabilities[{model!r}] has unknown field(s) {unknown}; valid: "
            f"{', '.join(sorted(_DECLARABLE))}"
        )
    for key in ("providers", "reasoning_efforts", "response_formats"):
        if key in facts:
            facts[key] = tuple(facts[key])
    base: dict[str, Any] = {
        "family": "declared", "context_window": 32_768, "max_output_tokens": 4_096,
        "reasoning": bool(facts.get("reasoning_efforts")), "providers": ("custom",),
        "source": "model_capabilities",
    }  # fmt: skip
    return ModelInfo(name=model, **{**base, **facts})


def per_model(settings: Mapping[str, Any] | None, model: str, default: Any = None) -> Any:
    """``model``'s entry in a per-model mapping, by exact name, else by canonical name."""
    settings = settings or {}
    if model in settings:
        return settings[model]
    name = canonical_name(model)
    return next((v for k, v in settings.items() if canonical_name(k) == name), default)


def _declared(model: str, declared: Declared | None) -> ModelInfo | None:
    facts = per_model(declared, model)
    if facts is None:
        return None
    return facts if isinstance(facts, ModelInfo) else declare_model(model, facts)


def model_info(model: str, declared: Declared | None = None) -> ModelInfo:
    """Facts about ``model`` (a caller's declaration first); unknown is an error naming what
    to add."""
    info = _declared(model, declared)
    if info is not None:
        return info
    name = canonical_name(model)
    if name in REGISTRY:
        return REGISTRY[name]
    raise UnknownModelError(
        f"unknown model {model!r}: the model catalog has no capabilities for it (context window, "
        f"accepted parameters, output-limit field). Known: {', '.join(sorted(REGISTRY))}. "
        "Add its entry to memcost/assets/models.yaml, or, for a model on your own "
        f"server (Ollama, vLLM, llama.cpp), declare it: model_capabilities={{{model!r}: "
        "{'context_window': 32768}} (a plain chat model: temperature and max_tokens)."
    )


def is_known(model: str, declared: Declared | None = None) -> bool:
    try:
        model_info(model, declared)
    except UnknownModelError:
        return False
    return True


def generation_params(
    model: str, reasoning_effort: str, declared: Declared | None = None
) -> dict[str, Any]:
    """The reasoning effort when one is given, and temperature 0 where the model accepts a
    temperature (an undeclared model's is checked by the client before sending)."""
    params: dict[str, Any] = {}
    if reasoning_effort:
        params["reasoning_effort"] = reasoning_effort
    accepts = model_info(model, declared).temperature if is_known(model, declared) else True
    if accepts:
        params["temperature"] = 0.0
    return params


def rejects_temperature(model: str) -> bool:
    return is_known(model) and not model_info(model).temperature


def encoding_name(model: str) -> str:
    """The tiktoken encoding of ``model``: the registry's, else tiktoken's, else o200k_base."""
    if is_known(model):
        return model_info(model).tokenizer
    from tiktoken.model import encoding_name_for_model  # the name only: no download

    try:
        return encoding_name_for_model(canonical_name(model))
    except KeyError:
        return "o200k_base"


def slug(model: str) -> str:
    """A file-name-safe label: ``openai/gpt-oss-120b`` → ``gpt-oss-120b``."""
    return re.sub(r"[^a-z0-9.]+", "-", canonical_name(model)).strip("-")


REGISTRY: dict[str, ModelInfo] = _load_models()


# --- Prices --------------------------------------------------------------------------------------

PRICE_TABLE_NAME = "the price table (memcost/assets/prices.csv)"
PRICE_TABLE_DATE = "2025-09-15"  # list prices in force when the paper's runs were made (§4.2)
CURRENT_PRICE_DATE = "2026-11-30"  # the newest rows below were checked on this date
BATCH_API_MULTIPLIER = 0.5  # OpenAI Batch API: half price, results within 24 hours
FLEX_MULTIPLIER = 0.5  # OpenAI Flex processing: Batch-API prices on the interactive endpoints
CACHED_INPUT_MIN_TOKENS = 1_024  # OpenAI prompt caching applies to prefixes of >= 1,024 tokens
CACHED_INPUT_STEP_TOKENS = 128  # ... and grows in 128-token steps
# Cache retentions as sold, and the row field holding each one's write price.
RETENTION_FIELDS = {"30m": "cache_write_30m", "12h": "cache_write_12h", "24h": "cache_write_24h"}


# The numeric fields of a price and what each may hold; the optional ones may be None.
PRICE_RATES = (
    "input",
    "output",
    "cached_input",
    "cache_write_30m",
    "cache_write_12h",
    "cache_write_24h",
)  # USD per 1M tokens
PRICE_SHARES = ("batch_multiplier", "flex_multiplier")  # the share of the list price paid
PRICE_NUMBERS = (
    *PRICE_RATES,
    *PRICE_SHARES,
    "in_memory_retention_minutes",
    "extended_retention_hours",
    "long_context_threshold",
    "long_context_input_multiplier",
    "long_context_output_multiplier",
)
_REQUIRED_NUMBERS = (
    "input",
    "output",
    "in_memory_retention_minutes",
    "long_context_input_multiplier",
    "long_context_output_multiplier",
)


def price_problem(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be the field ``name`` of a :class:`Price` (``None``: it can)."""
    if value is None:
        return "is missing: a price needs it" if name in _REQUIRED_NUMBERS else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "is not a number" + (" (USD per 1M tokens)" if name in PRICE_RATES else "")
    if not math.isfinite(value) or value < 0:
        return "must be a number of 0 or more" + (
            " (USD per 1M tokens; 0 = free)" if name in PRICE_RATES else ""
        )
    if name in PRICE_SHARES and value > 1:
        return "must be between 0 and 1 (the share of the list price paid)"
    if name == "long_context_threshold" and (value != int(value) or value < 1):
        return "must be a whole number of prompt tokens, 1 or more"
    return None


@dataclass(frozen=True)
class Price:
    """Per-1M-token prices of one model. ``cached_input`` ``None``: no cache discount; reasoning
    tokens are billed as ``output``; ``batch_multiplier`` ``None``: no batch interface."""

    model: str
    input: float
    cached_input: float | None
    output: float
    source: str
    date: str
    provider_dependent: bool = False
    note: str = ""
    kind: str = "chat"  # "chat" | "embedding"
    batch_multiplier: float | None = BATCH_API_MULTIPLIER
    flex_multiplier: float | None = None  # Flex processing (None: not offered)
    # Cache-write price per retention as sold (None: that retention is not sold, or writing to
    # the cache costs the plain input price, as on the GPT-5 family).
    cache_write_30m: float | None = None
    cache_write_12h: float | None = None
    cache_write_24h: float | None = None
    in_memory_retention_minutes: float = 10.0  # how long an idle in-memory cache lives
    extended_retention_hours: float | None = None  # longest extended retention sold
    # Long-context tier: above this many prompt tokens the WHOLE request is billed at the
    # multiplied prices (None: no tier).
    long_context_threshold: int | None = None
    long_context_input_multiplier: float = 1.0  # input, cached read and cache write
    long_context_output_multiplier: float = 1.0

    def __post_init__(self) -> None:
        # Every price is checked where it is made (the table, an override, a plugin's own), so a
        # negative or missing rate can never lower a bill or pass the budget.
        for name in PRICE_NUMBERS:
            value = getattr(self, name)
            problem = price_problem(name, value)
            if problem:
                raise ValueError(
                    f"price of {self.model!r} ({self.source}): {name}={value!r} {problem}"
                )

    @property
    def cached_rate(self) -> float:
        return self.input if self.cached_input is None else self.cached_input

    @property
    def cache_discount(self) -> float:
        return 0.0 if not self.input else 1.0 - self.cached_rate / self.input

    def cost(
        self,
        *,
        prompt_tokens: int = 0,
        cached_prompt_tokens: int = 0,
        completion_tokens: int = 0,
        batch: bool = False,
        cache_write_tokens: int = 0,
        retention: str = "",
        flex: bool = False,
    ) -> float:
        """Dollar cost of one call (``completion_tokens`` include reasoning). ``cache_write_tokens``
        are billed at ``retention``'s write price; a prompt above :attr:`long_context_threshold`
        bills the whole request at the tier's prices; Batch and Flex multiply the total (they
        sell no cache write)."""
        if cached_prompt_tokens > prompt_tokens:
            raise ValueError(
                f"cached_prompt_tokens ({cached_prompt_tokens}) exceeds "
                f"prompt_tokens ({prompt_tokens})"
            )
        if cache_write_tokens > prompt_tokens - cached_prompt_tokens:
            raise ValueError(
                f"cache_write_tokens ({cache_write_tokens}) exceeds the uncached prompt tokens "
                f"({prompt_tokens - cached_prompt_tokens})"
            )
        discounted = batch or flex
        write_rate = self.input if discounted else self.write_rate(retention)
        in_mult, out_mult = self.tier_multipliers(prompt_tokens)
        dollars = (
            (prompt_tokens - cached_prompt_tokens - cache_write_tokens) * self.input * in_mult
            + cache_write_tokens * write_rate * in_mult
            + cached_prompt_tokens * self.cached_rate * in_mult
            + completion_tokens * self.output * out_mult
        ) / 1_000_000
        return dollars * self.execution_rate("batch" if batch else "flex" if flex else "")

    def write_rate(self, retention: str = "") -> float:
        """USD per 1M tokens written to the cache with ``retention`` (the input price when no write
        is charged)."""
        if not retention:
            return self.input
        if retention not in RETENTION_FIELDS:
            raise ValueError(f"unknown cache retention {retention!r}; known: {RETENTION_FIELDS}")
        rate = getattr(self, RETENTION_FIELDS[retention])
        return self.input if rate is None else rate

    def tier_multipliers(self, prompt_tokens: float) -> tuple[float, float]:
        if self.long_context_threshold is not None and prompt_tokens > self.long_context_threshold:
            return self.long_context_input_multiplier, self.long_context_output_multiplier
        return 1.0, 1.0

    def execution_rate(self, execution: str) -> float:
        if execution == "batch":
            return self.batch_rate()
        if execution == "flex":
            return self.flex_rate()
        return 1.0

    def flex_rate(self) -> float:
        if self.flex_multiplier is None:
            raise ValueError(
                f"{self.model}: no Flex processing in {PRICE_TABLE_NAME} ({self.source})"
            )
        return self.flex_multiplier

    def batch_rate(self) -> float:
        if self.batch_multiplier is None:
            raise ValueError(
                f"{self.model}: no batch interface in {PRICE_TABLE_NAME} ({self.source})"
            )
        return self.batch_multiplier


def _load_prices() -> dict[str, tuple[Price, ...]]:
    kinds = {f.name: f.type for f in fields(Price)}
    schedules: dict[str, list[Price]] = {}
    with (ASSETS_DIR / "prices.csv").open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            values: dict[str, Any] = {}
            for name, text in row.items():
                kind = str(kinds[name])
                if text == "" and "None" in kind:
                    values[name] = None
                elif kind.startswith("bool"):
                    values[name] = text == "true"
                elif kind.startswith("int"):
                    values[name] = int(text)
                elif kind.startswith("float"):
                    values[name] = float(text)
                else:
                    values[name] = text
            schedules.setdefault(values["model"], []).append(Price(**values))
    return {m: tuple(sorted(r, key=lambda p: p.date)) for m, r in schedules.items()}


PRICE_SCHEDULES: dict[str, tuple[Price, ...]] = _load_prices()


def dollars(value: float) -> str:
    """Dollars in cents, and below a cent to two significant digits (never scientific), so a
    small amount never reads as nothing: $2,577.03, $0.22, $0.0017, $0.000035 ($0 for none)."""
    if not math.isfinite(value) or value <= 0:
        return "$0"
    decimals = 2 if value >= 0.01 else 1 - math.floor(math.log10(value))
    return f"${value:,.{decimals}f}"


def price_successor(model: str) -> str:
    """The successor whose price ``cost_model: current`` uses (the model itself if none)."""
    name = canonical_name(model)
    if not is_known(model):
        return name
    successor = model_info(model).successor
    return canonical_name(successor) if successor else name


def _row_on(name: str, on: str | None) -> Price | None:
    rows = PRICE_SCHEDULES.get(name)
    if not rows:
        return None
    when = PRICE_TABLE_DATE if on is None else str(on)
    valid = [r for r in rows if r.date <= when]
    if valid:
        return valid[-1]
    return rows[0] if on is None else None  # launched after the paper: its first row


# The paper's table: each model's row in force on PRICE_TABLE_DATE (later models: first row).
PRICES: dict[str, Price] = {name: _row_on(name, None) for name in PRICE_SCHEDULES}  # type: ignore[misc]

_REQUIRED_FOR_NEW = ("input", "output")  # an override may not invent a price by omission
PRICE_FIELDS = frozenset(f.name for f in fields(Price))


def checked_override(model: Any, price: Mapping[Any, Any]) -> dict[str, Any]:
    """One model's ``price_overrides`` mapping, each field checked as the table's own are."""
    unknown = sorted(str(k) for k in price if k not in PRICE_FIELDS or k == "model")
    if unknown:
        raise ValueError(
            f"price_overrides[{model!r}] has unknown field(s) {unknown}; valid: "
            f"{', '.join(sorted(PRICE_FIELDS - {'model'}))}"
        )
    for name, value in price.items():
        if name in PRICE_NUMBERS and (problem := price_problem(name, value)):
            raise ValueError(f"price_overrides[{model!r}].{name}={value!r} {problem}")
    return dict(price)


class UnknownPriceError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return str(self.args[0])


def price_for(
    model: str, overrides: Mapping[str, Mapping[str, Any]] | None = None, on: str | None = None
) -> Price:
    """The price of ``model`` (prefix and snapshot ignored) in force on ``on`` (``None``: the
    paper's table), with any override; an override of a model not in the table must give
    ``input`` and ``output``."""
    name = canonical_name(model)
    if overrides:
        for key, values in overrides.items():
            if canonical_name(key) != name:
                continue
            values = checked_override(key, values)
            row = _row_on(name, on)
            if row is not None:
                return replace(row, **{"source": "price_overrides", **values})
            missing = [f for f in _REQUIRED_FOR_NEW if f not in values]
            if missing:
                raise UnknownPriceError(
                    f"price_overrides[{key!r}] adds model {model!r}, which is not in "
                    f"{PRICE_TABLE_NAME}, but gives no {' or '.join(missing)} price"
                )
            base = {
                "model": name,
                "cached_input": None,
                "source": "price_overrides",
                "date": "override",
                "batch_multiplier": None,
            }
            return Price(**{**base, **values})
    if name not in PRICES:
        raise UnknownPriceError(
            f"no price for model {model!r} in {PRICE_TABLE_NAME} (dated {PRICE_TABLE_DATE}); "
            f"known: {', '.join(sorted(PRICES))}. Add it there or pass price_overrides."
        )
    if on is None:
        return PRICES[name]
    row = _row_on(name, on)
    if row is None:
        raise UnknownPriceError(
            f"no price for model {model!r} on {on} in {PRICE_TABLE_NAME}: its first row is "
            f"from {PRICE_SCHEDULES[name][0].date}"
        )
    return row


def list_usd(
    prices: Mapping[str, Price],
    models: Sequence[str],
    prompt_tokens: Sequence[float],
    cached_tokens: Sequence[float],
    completion_tokens: Sequence[float],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Many calls' dollars at list price, as ``(uncached input, cached input, output)``:
    :meth:`Price.cost` for a table of calls (no cache writes)."""
    rows = [prices[m] for m in models]
    prompt = np.asarray(prompt_tokens, dtype=float)
    cached = np.minimum(np.asarray(cached_tokens, dtype=float), prompt)
    tiers = np.array([p.tier_multipliers(n) for p, n in zip(rows, prompt, strict=True)])
    tier_in, tier_out = (tiers[:, 0], tiers[:, 1]) if len(rows) else (prompt, prompt)
    rate = {k: np.array([getattr(p, k) for p in rows], dtype=float) for k in ("input", "output")}
    cached_rate = np.array([p.cached_rate for p in rows], dtype=float)
    return (
        (prompt - cached) * rate["input"] * tier_in / 1e6,
        cached * cached_rate * tier_in / 1e6,
        np.asarray(completion_tokens, dtype=float) * rate["output"] * tier_out / 1e6,
    )


def price_table(
    overrides: Mapping[str, Mapping[str, Any]] | None = None, on: str | None = None
) -> list[dict[str, Any]]:
    """The table as records, overrides applied and listed; ``on``: the rows in force that day."""
    names = [n for n in PRICES if on is None or _row_on(n, on) is not None]
    for key in overrides or {}:
        if canonical_name(key) not in names:
            names.append(canonical_name(key))
    rows = []
    for name in names:
        price = price_for(name, overrides, on)
        rows.append({**asdict(price), "cache_discount": round(price.cache_discount, 4)})
    return rows


def price_schedule_table() -> list[dict[str, Any]]:
    return [
        {**asdict(row), "cache_discount": round(row.cache_discount, 4)}
        for rows in PRICE_SCHEDULES.values()
        for row in rows
    ]


# --- Execution modes -----------------------------------------------------------------------------

# The backend that sells batch and flex execution.
DISCOUNT_BACKEND = "openai"
# Flex answers are slower (OpenAI's Flex guide raises its SDK's 10-minute default to 15
# minutes). The client's request timeout (300 s by default) is multiplied by this for Flex
# requests: 900 s, the guide's 15 minutes.
FLEX_TIMEOUT_FACTOR = 3.0
# The error code of OpenAI's Flex 429 when it lacks capacity (nothing is billed for it).
FLEX_UNAVAILABLE_CODE = "resource_unavailable"

_NAMES = {"batch": "the Batch API", "flex": "Flex processing"}


def discount_multiplier(
    model: str, mode: str, price_overrides: Mapping[str, Mapping[str, Any]] | None = None
) -> float | None:
    """What ``mode`` charges for ``model`` relative to its list price (``None``: not sold)."""
    if mode == "interactive":
        return 1.0
    try:
        price = price_for(model, price_overrides)
    except UnknownPriceError:
        return None
    return price.batch_multiplier if mode == "batch" else price.flex_multiplier


def execution_problem(
    stage: str,
    mode: str,
    model: str,
    backend: str,
    price_overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> str | None:
    """Why ``mode`` cannot serve ``stage``'s calls to ``model`` on ``backend``, in one line, or
    ``None``."""
    if mode == "interactive" or backend == "offline":
        return None
    what = _NAMES.get(mode, mode)
    fix = f"set execution {stage}: interactive"
    if backend != DISCOUNT_BACKEND:
        return (
            f"execution {stage}: {mode} cannot be used for {model}: backend '{backend}' has "
            f"no {what} (only OpenAI's own API does); {fix}, or route {model} to backend "
            f"openai"
        )
    if discount_multiplier(model, mode, price_overrides) is None:
        field = f"{mode}_multiplier"
        return (
            f"execution {stage}: {mode} cannot be used for {model}: {PRICE_TABLE_NAME} sells "
            f"no {what} for it ({field} is None); {fix}, or, if OpenAI now offers it, "
            f"-p 'price_overrides={{\"{model}\": {{{field}: 0.5}}}}'"
        )
    return None


# --- Lifecycle -----------------------------------------------------------------------------------

TODAY_ENV = "MEMCOST_TODAY"
WARN_DAYS = 30  # say so when a model has fewer days left than this
# Notebook parameters that name a model the run calls (lists: every entry).
RUN_MODEL_PARAMETERS = (
    "extraction_model", "reader_model", "embedding_model", "judge_model", "models",
)  # fmt: skip
BASELINE_SWITCHES = ("include_rolling_window", "include_no_context", "include_oracle")


def today(value: str | date | None = None) -> date:
    value = value if value is not None else os.environ.get(TODAY_ENV) or None
    if value is None:
        return date.today()
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value).strip())
    except ValueError:
        raise ValueError(f"{TODAY_ENV} must be a date as YYYY-MM-DD, got {value!r}") from None


@dataclass(frozen=True)
class ModelStatus:
    model: str
    shutdown_date: date | None
    successor: str | None
    source: str  # "registry" | "/v1/models"
    days_left: int | None

    @property
    def shut_down(self) -> bool:
        return self.days_left is not None and self.days_left <= 0

    def describe(self) -> str:
        when = "was shut down on" if self.shut_down else "shuts down on"
        instead = f"; its successor is {self.successor}" if self.successor else ""
        return f"{self.model} {when} {self.shutdown_date} ({self.source}){instead}"


def status(model: str, on: date, served: Mapping[str, str | None] | None = None) -> ModelStatus:
    """``model``'s lifecycle on ``on``; ``served`` (``GET /v1/models``: ``{id: shutdown_date}``)
    wins over the registry."""
    info = model_info(model) if is_known(model) else None
    reported = _served_date(model, served)
    registered = info.shutdown_date if info else None
    chosen, source = (reported, "/v1/models") if reported else (registered, "registry")
    when = date.fromisoformat(chosen) if chosen else None
    return ModelStatus(
        model, when, info.successor if info else None, source,
        (when - on).days if when else None,
    )  # fmt: skip


def _served_date(model: str, served: Mapping[str, str | None] | None) -> str | None:
    for name, when in (served or {}).items():
        if when and (name == model or canonical_name(name) == canonical_name(model)):
            return str(when)[:10]
    return None


def run_models(params: Mapping[str, Any]) -> list[str]:
    """The models a notebook's parameters call (baselines' only when they run; a memory system's own
    where its entry names one)."""
    keys = list(RUN_MODEL_PARAMETERS)
    if any(params.get(switch) for switch in BASELINE_SWITCHES):
        keys.append("baseline_models")
    values = [params.get(key) for key in keys]
    for entry in params.get("memory_systems") or []:
        for settings in entry.values() if isinstance(entry, Mapping) else []:
            if isinstance(settings, Mapping):
                values += [v for k, v in settings.items() if str(k).endswith("_model")]
    names: list[str] = []
    for value in values:
        for name in [value] if isinstance(value, str) else list(value or []):
            if name and str(name) not in names:
                names.append(str(name))
    return names


def successor_preset(preset_name: str, available: Iterable[str]) -> str | None:
    """``paper_locomo`` → ``current_locomo``, when that preset exists."""
    if preset_name.startswith("paper_"):
        candidate = "current_" + preset_name.removeprefix("paper_")
    elif preset_name.startswith("verify_") and not preset_name.startswith("verify_current_"):
        candidate = "verify_current_" + preset_name.removeprefix("verify_")
    else:
        return None
    return candidate if candidate in set(available) else None


def refusal(preset_name: str, gone: list[ModelStatus], successor: str | None, on: date) -> str:
    lines = [f"preset {preset_name}: {len(gone)} model(s) it calls are no longer served "
             f"(today is {on}; set {TODAY_ENV}=YYYY-MM-DD to check another day). Nothing has "
             "been sent or spent."]  # fmt: skip
    lines += [f"  - {s.describe()}" for s in gone]
    if successor:
        lines.append(f"Run the same study with the recommended successors: "
                     f"python -m memcost run --params {successor}")  # fmt: skip
    else:
        lines.append("Name the successor models in the preset (or override them with -p).")
    return "\n".join(lines)


def paper_models() -> set[str]:
    found: set[str] = set()
    for settings in PAPER_SETTINGS.values():
        found.update(run_models(settings))
    return found


def stands_in_for(model: str) -> str | None:
    """The paper model whose registered successor ``model`` is."""
    for paper_model in sorted(paper_models()):
        if is_known(paper_model) and model_info(paper_model).successor:
            if canonical_name(model_info(paper_model).successor) == canonical_name(model):
                return paper_model
    return None


def stand_ins(parameters_by_step: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    found: dict[str, str] = {}
    for params in parameters_by_step.values():
        for model in run_models(params or {}):
            paper_model = stands_in_for(model)
            if paper_model is not None:
                found[paper_model] = model
    return found


# --- Usage-tier rate limits ----------------------------------------------------------------------


def tier_limits(
    model: str, stated: Mapping[str, Mapping[str, float]] | None = None, tier: str = DEFAULT_TIER
) -> tuple[float | None, float | None, str]:
    """``(rpm, tpm, where from)`` for ``model``: the run's stated limits, else the tier's."""
    limits = per_model(stated, model)
    if limits is not None:
        return limits.get("rpm"), limits.get("tpm"), "stated"
    name = canonical_name(model)
    table = TIER_LIMITS[tier]
    if name in table:
        return (*table[name], tier)
    if name in ASSUMED_AS:
        return (*table[ASSUMED_AS[name]], f"{tier}, as {ASSUMED_AS[name]}")
    return None, None, "not known"


# --- The prompt-cache rule -----------------------------------------------------------------------

ROUTING_TOKENS = 256  # the prefix a request is routed by (with its prompt_cache_key)
RETENTION_S = 600.0  # kept this long after its last use (the documented 5-10 minutes, upper end)
MAX_REQUESTS_PER_PREFIX_PER_MINUTE = 15
OVERFLOW_WINDOW_S = 60.0


def cacheable(shared_tokens: int) -> int:
    if shared_tokens < CACHED_INPUT_MIN_TOKENS:
        return 0
    return shared_tokens // CACHED_INPUT_STEP_TOKENS * CACHED_INPUT_STEP_TOKENS


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share, compared a block at a time (a Python loop over
    100k-token prompts took most of a simulation's time)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        x, y = np.asarray(a), np.asarray(b)
        n = min(len(x), len(y))
        differ = np.flatnonzero(x[:n] != y[:n])
        return int(differ[0]) if len(differ) else n
    if not (type(a) is type(b) and type(a) in (list, tuple)):
        a, b = tuple(a), tuple(b)
    low, high = 0, min(len(a), len(b))
    if a[:high] == b[:high]:
        return high
    while high - low > 1:  # a[:low] == b[:low] and a[:high] != b[:high]
        middle = (low + high) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle
    return low


@dataclass
class _Entry:
    tokens: Sequence[int]  # a tuple, or a numpy array of token ids
    last_used: float


@dataclass
class PrefixCache:
    """A provider's prefix cache for one model, driven by arrival times: routed by the first
    :data:`ROUTING_TOKENS` tokens and ``key``; past ``max_per_minute`` a key overflows (no hit,
    nothing remembered)."""

    retention_s: float = RETENTION_S
    max_per_minute: int = MAX_REQUESTS_PER_PREFIX_PER_MINUTE
    keep: int = 512  # prompts remembered per key
    _entries: dict[str, deque[_Entry]] = field(default_factory=dict)
    _arrivals: dict[str, deque[float]] = field(default_factory=dict)

    def route_key(self, tokens: Sequence[int], key: str | None) -> str:
        return f"{key or ''}|" + ",".join(map(str, tokens[:ROUTING_TOKENS]))

    def overflowed(self, route: str, now: float) -> bool:
        arrivals = self._arrivals.setdefault(route, deque())
        while arrivals and now - arrivals[0] >= OVERFLOW_WINDOW_S:
            arrivals.popleft()
        arrivals.append(now)
        return len(arrivals) > self.max_per_minute

    def lookup(self, tokens: Sequence[int], now: float, key: str | None = None) -> int:
        """Cached prompt tokens for this request; remembers the prompt."""
        route = self.route_key(tokens, key)
        if self.overflowed(route, now):
            return 0
        entries = self._entries.setdefault(route, deque(maxlen=self.keep))
        best = 0
        for entry in entries:
            if now - entry.last_used > self.retention_s:
                continue
            shared = shared_prefix(entry.tokens, tokens)
            if shared >= CACHED_INPUT_MIN_TOKENS:
                entry.last_used = now
            best = max(best, shared)
        if len(tokens) >= CACHED_INPUT_MIN_TOKENS:
            kept = tokens if isinstance(tokens, np.ndarray) else tuple(tokens)
            entries.append(_Entry(kept, now))
        return cacheable(best)


def max_requests_per_minute(arrivals: Sequence[float]) -> int:
    """The most arrivals in any 60-second window."""
    times = sorted(arrivals)
    best, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= OVERFLOW_WINDOW_S:
            start += 1
        best = max(best, end - start + 1)
    return best
