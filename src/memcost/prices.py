"""One dated price table for every model the study calls (USD per 1M tokens).

Cost tables are computed from the usage ledger and this table, never typed in. A model missing
here is an error naming the model and this table, never a silent zero. Presets may override
entries (``price_overrides``) for another provider or a later date; the override is recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from memcost.models import canonical_name

PRICE_TABLE_NAME = "memcost.prices.PRICES"
PRICE_TABLE_DATE = "2025-09-15"  # list prices in force when the paper's runs were made
BATCH_API_MULTIPLIER = 0.5  # OpenAI Batch API: half price, results within 24 hours
CACHED_INPUT_MIN_TOKENS = 1_024  # OpenAI prompt caching applies to prefixes of >= 1,024 tokens
CACHED_INPUT_STEP_TOKENS = 128  # ... and grows in 128-token steps


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
    ) -> float:
        """Dollar cost of one call; ``completion_tokens`` includes reasoning tokens (as the API
        reports them)."""
        if cached_prompt_tokens > prompt_tokens:
            raise ValueError(
                f"cached_prompt_tokens ({cached_prompt_tokens}) exceeds "
                f"prompt_tokens ({prompt_tokens})"
            )
        dollars = (
            (prompt_tokens - cached_prompt_tokens) * self.input
            + cached_prompt_tokens * self.cached_rate
            + completion_tokens * self.output
        ) / 1_000_000
        return dollars * (self.batch_rate() if batch else 1.0)

    def batch_rate(self) -> float:
        """The batch multiplier; asking for batch prices where there are none is an error."""
        if self.batch_multiplier is None:
            raise ValueError(
                f"{self.model}: no batch interface in {PRICE_TABLE_NAME} ({self.source})"
            )
        return self.batch_multiplier


_OPENAI = "https://openai.com/api/pricing (list prices, standard tier)"

PRICES: dict[str, Price] = {
    p.model: p
    for p in (
        # The paper's models (study §8): GPT-5 family with a 90% cached-input discount.
        Price("gpt-5", 1.25, 0.125, 10.00, _OPENAI, PRICE_TABLE_DATE),
        Price("gpt-5-mini", 0.25, 0.025, 2.00, _OPENAI, PRICE_TABLE_DATE),
        Price("gpt-5-nano", 0.05, 0.005, 0.40, _OPENAI, PRICE_TABLE_DATE),
        # Older small models, for presets that swap the reader or judge.
        Price("gpt-4.1-mini", 0.40, 0.10, 1.60, _OPENAI, PRICE_TABLE_DATE),
        Price("gpt-4o-mini", 0.15, 0.075, 0.60, _OPENAI, PRICE_TABLE_DATE),
        Price(
            "text-embedding-3-small", 0.02, None, 0.0, _OPENAI, PRICE_TABLE_DATE, kind="embedding"
        ),
        Price(
            "text-embedding-3-large", 0.13, None, 0.0, _OPENAI, PRICE_TABLE_DATE, kind="embedding"
        ),
        # The successors of the paper's models (shut down 2026-12-11), flat standard-tier rows
        # for prompts up to 272K input tokens, checked 2026-11-30. Cache writes (1.25x input for
        # 30-minute retention) and the long-context rates (2x input, 1.5x output above 272K)
        # are not modelled here.
        Price(
            "gpt-6.1-terra", 1.00, 0.05, 5.00,
            "https://docs.litellm.ai/blog/gpt-6-1-terra (OpenAI pricing as quoted; also "
            "https://apidog.com/de/blog/gpt-6-1-terra-pricing/)", "2026-10-26",
            note="cache write 1.25 (30-minute retention) / 2.50 (12-hour) per 1M; above 272K "
            "input tokens the whole request costs 2.00 / 0.10 / 7.50",
        ),  # fmt: skip
        Price(
            "gpt-6-luna", 0.10, 0.01, 0.50,
            "https://github.com/merefield/codexometer/releases/tag/v0.18.4 (OpenAI pricing as "
            "quoted)", "2026-09-22",
            note="cache write 0.125 per 1M; long-context pricing above 272K input tokens",
        ),  # fmt: skip
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
    )
}

_REQUIRED_FOR_NEW = ("input", "output")  # an override may not invent a price by omission
_FIELDS = {f.name for f in fields(Price)}


class UnknownPriceError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return str(self.args[0])


def price_for(model: str, overrides: Mapping[str, Mapping[str, Any]] | None = None) -> Price:
    """The price of ``model`` (provider prefix and snapshot date ignored), with any override.

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
            if name in PRICES:
                return replace(PRICES[name], **{"source": "price_overrides", **values})
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
    return PRICES[name]


def price_table(overrides: Mapping[str, Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The table as records (overrides applied and listed too), for notebooks and the report."""
    names = list(PRICES)
    for key in overrides or {}:
        if canonical_name(key) not in names:
            names.append(canonical_name(key))
    rows = []
    for name in names:
        price = price_for(name, overrides)
        rows.append({**asdict(price), "cache_discount": round(price.cache_discount, 4)})
    return rows
