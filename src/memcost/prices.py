"""Dated price schedules for every model the study calls (USD per 1M tokens).

Each model's price is a list of rows (:data:`PRICE_SCHEDULES`), each valid from a date and
naming its source. A row holds the input, cached-read and output prices, the cache-write price
per retention the provider sells (30 minutes, 12 hours, 24 hours), the long-context tier (a
threshold above which the whole request costs more) and the Batch and Flex multipliers.
:func:`price_for` picks the row in force on a date; :data:`PRICES` is the paper's table (the rows
in force on :data:`PRICE_TABLE_DATE`), so code and tables written for the paper are unchanged.

Cost tables are computed from the usage ledger and these rows, never typed in. A model missing
here is an error naming the model and this table, never a silent zero. Presets may override
entries (``price_overrides``) for another provider or a later date; the override is recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from memcost.models import canonical_name, is_known, model_info

PRICE_TABLE_NAME = "memcost.prices.PRICES"
PRICE_TABLE_DATE = "2025-09-15"  # list prices in force when the paper's runs were made (§8)
CURRENT_PRICE_DATE = "2026-11-30"  # the newest rows below were checked on this date
BATCH_API_MULTIPLIER = 0.5  # OpenAI Batch API: half price, results within 24 hours
FLEX_MULTIPLIER = 0.5  # OpenAI Flex processing: Batch-API prices on the interactive endpoints
CACHED_INPUT_MIN_TOKENS = 1_024  # OpenAI prompt caching applies to prefixes of >= 1,024 tokens
CACHED_INPUT_STEP_TOKENS = 128  # ... and grows in 128-token steps
# Cache retentions as sold, and the row field holding each one's write price.
RETENTION_FIELDS = {"30m": "cache_write_30m", "12h": "cache_write_12h", "24h": "cache_write_24h"}


@dataclass(frozen=True)
class Price:
    """Per-1M-token prices of one model.

    ``cached_input`` applies to prompt tokens the provider reports as served from its prompt
    cache (``None``: the provider has no cache discount, cached tokens cost ``input``);
    reasoning tokens are billed as ``output``. Embedding models have only ``input``.
    ``batch_multiplier`` is what the provider's batch interface charges relative to these
    prices (``None``: no batch interface).
    """

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

    @property
    def cached_rate(self) -> float:
        """USD per 1M cached prompt tokens (the input price when there is no discount)."""
        return self.input if self.cached_input is None else self.cached_input

    @property
    def cache_discount(self) -> float:
        """Fraction of the input price saved on a cached token (0.9 for the GPT-5 family)."""
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
        """Dollar cost of one call; ``completion_tokens`` includes reasoning tokens (as the API
        reports them).

        ``cache_write_tokens`` of the uncached prompt tokens are written to the cache with
        ``retention`` (``"30m"``, ``"12h"``, ``"24h"``) and billed at that write price. A prompt
        above :attr:`long_context_threshold` tokens bills the whole request at the tier's prices.
        Batch and Flex multiply the total; the provider sells no cache write on them, so written
        tokens are billed as plain input there.
        """
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
        """USD per 1M tokens written to the cache with ``retention`` (the input price when no
        write is charged; ``""``: no cache write)."""
        if not retention:
            return self.input
        if retention not in RETENTION_FIELDS:
            raise ValueError(f"unknown cache retention {retention!r}; known: {RETENTION_FIELDS}")
        rate = getattr(self, RETENTION_FIELDS[retention])
        return self.input if rate is None else rate

    def tier_multipliers(self, prompt_tokens: float) -> tuple[float, float]:
        """(input, output) multipliers for a request of ``prompt_tokens`` prompt tokens."""
        if self.long_context_threshold is not None and prompt_tokens > self.long_context_threshold:
            return self.long_context_input_multiplier, self.long_context_output_multiplier
        return 1.0, 1.0

    def execution_rate(self, execution: str) -> float:
        """The multiple of the list price a call sent in ``execution`` mode pays: the batch or
        Flex multiplier (an error where the table sells neither), else 1."""
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
        """The batch multiplier; asking for batch prices where there are none is an error."""
        if self.batch_multiplier is None:
            raise ValueError(
                f"{self.model}: no batch interface in {PRICE_TABLE_NAME} ({self.source})"
            )
        return self.batch_multiplier


_OPENAI = "https://openai.com/api/pricing (list prices, standard tier)"
# Today's rows, each checked on CURRENT_PRICE_DATE; the sources quote OpenAI's pricing page.
_TERRA = (
    "https://docs.litellm.ai/blog/gpt-6-1-terra and "
    "https://apidog.com/de/blog/gpt-6-1-terra-pricing/ "
    "(OpenAI pricing as quoted; checked 2026-11-30)"
)
_GPT6 = (
    "https://github.com/merefield/codexometer/releases/tag/v0.18.4 "
    "(OpenAI pricing as quoted; checked 2026-11-30)"
)
_LUNA = "https://developers.openai.com/ja-JP/api/docs/models/gpt-6-luna (checked 2026-11-30)"
_SOL61 = (
    "https://docs.litellm.ai/blog/gpt_6_1_sol and "
    "https://github.com/amine123max/Codex-Manager/releases/tag/0.4.7 (OpenAI's price card as "
    "quoted; checked 2026-11-30)"
)
_EMBED = "https://developers.openai.com/api/docs/models/text-embedding-3-large (checked 2026-11-30)"
# The GPT-5 family (paper era): in-memory caches are typically cleared after 5-10 minutes of
# inactivity (the upper end, 10, is used); extended retention keeps them up to 24 h; no write
# premium. Long-context tier: none (the models accept at most 272k prompt tokens).
# Flex processing at the Batch rate (half price; OpenAI's Flex guide: "priced at Batch API
# rates"): the pricing page's Flex tab listed the GPT-5 models from their launch.
_GPT5_FLEX = (
    "Flex: https://platform.openai.com/docs/pricing?latest-pricing=flex, listing GPT-5 as cited "
    "on 2025-08-08 in https://github.com/vercel/ai/issues/7889 (and flex use of gpt-5-mini in "
    "https://github.com/Skyvern-AI/skyvern/pull/4106); checked 2026-11-30"
)
_GPT5 = {
    "in_memory_retention_minutes": 10.0,
    "extended_retention_hours": 24.0,
    "flex_multiplier": FLEX_MULTIPLIER,
    "note": _GPT5_FLEX,
}
# GPT-6 rows: above 272K prompt tokens the whole request costs 2x input and cache, 1.5x output;
# 30-minute minimum cache life; Batch and Flex 50% off.
_GPT6_TIER = {
    "long_context_threshold": 272_000,
    "long_context_input_multiplier": 2.0,
    "long_context_output_multiplier": 1.5,
    "in_memory_retention_minutes": 30.0,
    "flex_multiplier": FLEX_MULTIPLIER,
}


def _rows(*rows: Price) -> dict[str, tuple[Price, ...]]:
    schedules: dict[str, list[Price]] = {}
    for row in rows:
        schedules.setdefault(row.model, []).append(row)
    return {m: tuple(sorted(r, key=lambda p: p.date)) for m, r in schedules.items()}


PRICE_SCHEDULES: dict[str, tuple[Price, ...]] = _rows(
    # The paper's models (study §8): GPT-5 family with a 90% cached-input discount.
    Price("gpt-5", 1.25, 0.125, 10.00, _OPENAI, PRICE_TABLE_DATE, **_GPT5),
    Price("gpt-5-mini", 0.25, 0.025, 2.00, _OPENAI, PRICE_TABLE_DATE, **_GPT5),
    Price("gpt-5-nano", 0.05, 0.005, 0.40, _OPENAI, PRICE_TABLE_DATE, **_GPT5),
    # Older small models, for presets that swap the reader or judge.
    Price("gpt-4.1-mini", 0.40, 0.10, 1.60, _OPENAI, PRICE_TABLE_DATE),
    Price("gpt-4o-mini", 0.15, 0.075, 0.60, _OPENAI, PRICE_TABLE_DATE),
    Price("text-embedding-3-small", 0.02, None, 0.0, _OPENAI, PRICE_TABLE_DATE, kind="embedding"),
    Price("text-embedding-3-small", 0.02, None, 0.0, _EMBED, CURRENT_PRICE_DATE, kind="embedding"),
    Price("text-embedding-3-large", 0.13, None, 0.0, _OPENAI, PRICE_TABLE_DATE, kind="embedding"),
    Price(
        "gpt-oss-120b",
        0.039,
        None,
        0.18,
        "openrouter.ai/openai/gpt-oss-120b (cheapest-provider listing; varies by provider)",
        "2026-11-01",
        provider_dependent=True,
        note=(
            "Open-weight model: the price depends on who serves it. The paper's measured bill "
            "($7.65 for 664 requests of ~101.6k tokens, §4.2) implies about $0.11 per 1M "
            "input tokens. Override with price_overrides for your provider."
        ),
        batch_multiplier=None,
    ),
    # Successors (launched 2026-10-26): cache write 1.25 (30 min) / 2.50 (12 h) against 1.00 input.
    Price(
        "gpt-6.1-terra",
        1.00,
        0.05,
        5.00,
        _TERRA,
        "2026-10-26",
        cache_write_30m=1.25,
        cache_write_12h=2.50,
        extended_retention_hours=12.0,
        **_GPT6_TIER,
    ),
    Price(
        "gpt-6-luna",
        0.10,
        0.01,
        0.50,
        _LUNA,
        "2026-09-22",
        cache_write_30m=0.125,
        note="OpenAI's page lists one cache-write price (taken as the 30-minute one) and no "
        "12-hour retention; the 272K tier (2x input and cache, 1.5x output), Batch and "
        "Flex (50%) are on the page",
        **_GPT6_TIER,
    ),
    # gpt-6.1-sol (launched 2026-09-29, successor of gpt-5): as gpt-6-sol but cached input
    # halved; above 272K input 4.00 / 0.20 / 15.00 (the GPT-6 tier rule); Flex 0.5x.
    Price(
        "gpt-6.1-sol",
        2.00,
        0.10,
        10.00,
        _SOL61,
        "2026-09-29",
        cache_write_30m=2.50,
        note="cache write as on gpt-6-sol "
        "(https://dev.to/hassann/how-to-use-gpt-61-sol-apl--45cg); "
        "no 12-hour price quoted",
        **_GPT6_TIER,
    ),
    Price(
        "gpt-6-sol",
        2.00,
        0.20,
        10.00,
        _GPT6,
        "2026-09-22",
        cache_write_30m=2.50,
        note="one cache-write price is quoted (taken as the 30-minute one); tier multipliers, "
        "Batch and Flex assumed as on gpt-6.1-terra",
        **_GPT6_TIER,
    ),
)


# The model that replaces each retired paper model (OpenAI deprecations page, notice 2026-06-11,
# https://developers.openai.com/api/docs/deprecations, checked 2026-11-30: gpt-5-mini ->
# gpt-6.1-terra; gpt-5-nano -> a GPT-6 model, gpt-6-luna the low-cost one). Prices only: the
# model registry (memcost.models) is the place for lifecycle facts; unify the two there.
def price_successor(model: str) -> str:
    """The successor whose price ``cost_model: current`` uses (the model itself if none): the
    one the model registry names from the provider's deprecations page."""
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
_FIELDS = {f.name for f in fields(Price)}


class UnknownPriceError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return str(self.args[0])


def price_for(
    model: str, overrides: Mapping[str, Mapping[str, Any]] | None = None, on: str | None = None
) -> Price:
    """The price of ``model`` (provider prefix and snapshot date ignored), with any override.

    ``on`` (``YYYY-MM-DD``) picks the row in force that day; ``None`` the paper's table
    (:data:`PRICES`). The row's ``date`` says which prices were used.

    An override of a model that is not in the table must give at least ``input`` and
    ``output``: a field left out would otherwise become a silent zero.
    """
    name = canonical_name(model)
    if overrides:
        for key, values in overrides.items():
            if canonical_name(key) != name:
                continue
            values = dict(values)
            unknown = sorted(set(values) - _FIELDS)
            if unknown:
                raise ValueError(
                    f"price_overrides[{key!r}] has unknown field(s) {unknown}; "
                    f"valid: input, cached_input, output, batch_multiplier, source, date, note"
                )
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


def price_table(
    overrides: Mapping[str, Mapping[str, Any]] | None = None, on: str | None = None
) -> list[dict[str, Any]]:
    """The table as records (overrides applied and listed too), for notebooks and the report;
    ``on``: the rows in force that day (models without one are left out)."""
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
    """Every dated row of every model, oldest first per model (the notebook's price table)."""
    return [
        {**asdict(row), "cache_discount": round(row.cache_discount, 4)}
        for rows in PRICE_SCHEDULES.values()
        for row in rows
    ]
