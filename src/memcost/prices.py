"""One dated price table for every model the study calls (USD per 1M tokens).

Cost tables are computed from the usage ledger and this table, never typed in. A model missing
here is an error naming the model and this table, never a silent zero. Presets may override
entries (``price_overrides``) for another provider or a later date; the override is recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from memcost.models import canonical_name

PRICE_TABLE_DATE = "2025-09-15"  # list prices in force when the paper's runs were made
BATCH_API_MULTIPLIER = 0.5  # OpenAI Batch API: half price, results within 24 hours
CACHED_INPUT_MIN_TOKENS = 1_024  # OpenAI prompt caching applies to prefixes of >= 1,024 tokens
CACHED_INPUT_STEP_TOKENS = 128  # ... and grows in 128-token steps


@dataclass(frozen=True)
class Price:
    """Per-1M-token prices of one model.

    ``cached_input`` applies to prompt tokens the provider reports as served from its prompt
    cache; reasoning tokens are billed as ``output``. Embedding models have only ``input``.
    """

    model: str
    input: float
    cached_input: float | None
    output: float
    source: str
    date: str
    provider_dependent: bool = False
    note: str = ""

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
                f"cached_prompt_tokens ({cached_prompt_tokens}) exceeds prompt_tokens ({prompt_tokens})"
            )
        cached_rate = self.input if self.cached_input is None else self.cached_input
        dollars = (
            (prompt_tokens - cached_prompt_tokens) * self.input
            + cached_prompt_tokens * cached_rate
            + completion_tokens * self.output
        ) / 1_000_000
        return dollars * (BATCH_API_MULTIPLIER if batch else 1.0)


_OPENAI = "https://openai.com/api/pricing (list prices, standard tier)"

PRICES: dict[str, Price] = {
    p.model: p
    for p in (
        Price("gpt-5", 1.25, 0.125, 10.00, _OPENAI, PRICE_TABLE_DATE),
        Price("gpt-5-mini", 0.25, 0.025, 2.00, _OPENAI, PRICE_TABLE_DATE),
        Price("gpt-5-nano", 0.05, 0.005, 0.40, _OPENAI, PRICE_TABLE_DATE),
        Price("text-embedding-3-small", 0.02, None, 0.0, _OPENAI, PRICE_TABLE_DATE),
        Price("text-embedding-3-large", 0.13, None, 0.0, _OPENAI, PRICE_TABLE_DATE),
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
        ),
    )
}


class UnknownPriceError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return str(self.args[0])


def price_for(model: str, overrides: Mapping[str, Mapping[str, Any]] | None = None) -> Price:
    """The price of ``model`` (provider prefix and snapshot date ignored), with any override."""
    name = canonical_name(model)
    if overrides:
        for key, fields in overrides.items():
            if canonical_name(key) == name:
                base = PRICES.get(name) or Price(name, 0.0, None, 0.0, "override", "override")
                return replace(base, **{"source": "price_overrides", **dict(fields)})
    if name not in PRICES:
        raise UnknownPriceError(
            f"no price for model {model!r} in memcost.prices.PRICES (dated {PRICE_TABLE_DATE}); "
            f"known: {', '.join(sorted(PRICES))}. Add it there or pass price_overrides."
        )
    return PRICES[name]


def price_table() -> list[dict[str, Any]]:
    """The table as records, for notebooks and the report."""
    return [asdict(p) for p in PRICES.values()]
