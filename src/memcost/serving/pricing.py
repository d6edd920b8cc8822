"""Dollars for the serving rows: one function, the project's dated price table.

Chat stages are priced as the row's model; the similarity search (``retrieve``) and the
embedding of new facts (``ingest_embed``) as the embedding model. Reasoning tokens are billed as
output. A model the table does not know is an error naming it (add ``price_overrides``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from memcost.catalog import PRICE_TABLE_DATE, price_for

EMBEDDING_STAGES = ("retrieve", "ingest_embed")


def price_rows(
    rows: pd.DataFrame,
    *,
    embedding_model: str,
    price_overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    """``rows`` with ``priced_as`` and ``usd`` (list prices; cached tokens at the cached rate)."""
    out = rows.copy()
    embed = out["stage"].isin(EMBEDDING_STAGES)
    out["priced_as"] = out["model"].where(~embed, embedding_model)
    usd = pd.Series(0.0, index=out.index)
    for model, part in out.groupby("priced_as", sort=True):
        price = price_for(str(model), price_overrides)
        uncached = part["prompt_tokens"] - part["cached_tokens"]
        usd.loc[part.index] = (
            uncached * price.input
            + part["cached_tokens"] * price.cached_rate
            + (part["output_tokens"] + part["reasoning_tokens"]) * price.output
        ) / 1_000_000
    out["usd"] = usd
    return out


def prices_used(
    models: list[str],
    embedding_model: str,
    price_overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    """The price of every model the serving tables are priced with, and the table's date."""
    rows = []
    for model in [*models, embedding_model]:
        price = price_for(model, price_overrides)
        rows.append(
            {
                "model": model,
                "input": price.input,
                "cached_input": price.cached_input,
                "output": price.output,
                "date": price.date,
                "source": price.source,
                "price_table_date": PRICE_TABLE_DATE,
            }
        )
    return pd.DataFrame(rows)
