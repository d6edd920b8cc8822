"""The dated price table: the paper's list prices, overrides, and errors instead of zeros."""

from __future__ import annotations

import re

import pytest

from memcost import catalog
from memcost.catalog import UnknownPriceError, price_for, price_table


def test_paper_list_prices():
    expected = {
        "gpt-5-mini": (0.25, 0.025, 2.00),
        "gpt-5-nano": (0.05, 0.005, 0.40),
        "gpt-5": (1.25, 0.125, 10.00),
    }
    for model, (inp, cached, out) in expected.items():
        p = price_for(model)
        assert (p.input, p.cached_input, p.output) == (inp, cached, out)
        assert p.cache_discount == pytest.approx(0.9)
        assert p.date == catalog.PRICE_TABLE_DATE
    assert price_for("text-embedding-3-small").input == 0.02
    assert catalog.BATCH_API_MULTIPLIER == 0.5


def test_snapshot_and_provider_prefix_are_ignored():
    assert price_for("gpt-5-mini-2025-08-07") is price_for("gpt-5-mini")
    assert price_for("openai/gpt-oss-120b").model == "gpt-oss-120b"


def test_gpt_oss_is_provider_dependent_and_has_no_batch_price():
    p = price_for("openai/gpt-oss-120b")
    assert p.provider_dependent and p.note
    with pytest.raises(ValueError, match="no batch interface"):
        p.cost(prompt_tokens=10, batch=True)


def test_cost_of_one_call():
    p = price_for("gpt-5-mini")
    # 1,000 uncached + 9,000 cached prompt tokens, 500 output tokens
    assert p.cost(prompt_tokens=10_000, cached_prompt_tokens=9_000, completion_tokens=500) == (
        pytest.approx((1_000 * 0.25 + 9_000 * 0.025 + 500 * 2.0) / 1e6)
    )
    assert p.cost(prompt_tokens=10_000, completion_tokens=500, batch=True) == pytest.approx(
        (10_000 * 0.25 + 500 * 2.0) / 1e6 * 0.5
    )
    with pytest.raises(ValueError, match="exceeds"):
        p.cost(prompt_tokens=1, cached_prompt_tokens=2)


def test_missing_model_is_an_error_naming_model_and_table():
    with pytest.raises(UnknownPriceError) as info:
        price_for("claude-imaginary-9")
    message = str(info.value)
    assert "claude-imaginary-9" in message and "memcost/assets/prices.csv" in message


def test_overrides():
    p = price_for("gpt-oss-120b", {"openai/gpt-oss-120b": {"input": 0.11, "output": 0.5}})
    assert (p.input, p.output, p.source) == (0.11, 0.5, "price_overrides")
    new = price_for("local-llama", {"local-llama": {"input": 0.0, "output": 0.0}})
    assert new.input == 0.0 and new.cached_rate == 0.0  # an explicit zero is allowed
    with pytest.raises(UnknownPriceError, match="no output"):
        price_for("local-llama", {"local-llama": {"input": 0.1}})
    with pytest.raises(ValueError, match="unknown field"):
        price_for("gpt-5-mini", {"gpt-5-mini": {"inptu": 0.1}})


def test_price_table_records():
    rows = price_table({"local-llama": {"input": 0.1, "output": 0.2}})
    names = [r["model"] for r in rows]
    assert "gpt-5-mini" in names and "local-llama" in names
    assert all({"input", "cached_input", "output", "source", "date"} <= set(r) for r in rows)


def test_dated_schedules_pick_the_row_in_force():
    assert price_for("gpt-5-mini", on="2026-11-30").date == catalog.PRICE_TABLE_DATE
    terra = price_for("gpt-6.1-terra", on=catalog.CURRENT_PRICE_DATE)
    assert (terra.input, terra.cached_input, terra.output) == (1.00, 0.05, 5.00)
    assert (terra.cache_write_30m, terra.cache_write_12h) == (1.25, 2.50)
    assert terra.long_context_threshold == 272_000
    assert (terra.batch_multiplier, terra.flex_multiplier) == (0.5, 0.5)
    luna = price_for("gpt-6-luna", on=catalog.CURRENT_PRICE_DATE)
    assert (luna.input, luna.cached_input, luna.cache_write_30m, luna.output) == (
        0.10,
        0.01,
        0.125,
        0.50,
    )
    with pytest.raises(UnknownPriceError, match="first row is from 2026-10-26"):
        price_for("gpt-6.1-terra", on="2026-01-01")
    embedding = catalog.PRICE_SCHEDULES["text-embedding-3-small"]
    assert [r.date for r in embedding] == [catalog.PRICE_TABLE_DATE, catalog.CURRENT_PRICE_DATE]
    assert price_for("text-embedding-3-small") is embedding[0]  # the paper's table by default


def test_every_row_names_a_source_url_and_a_date():
    for rows in catalog.PRICE_SCHEDULES.values():
        for row in rows:
            assert len(row.date) == 10 and row.date[4] == "-"
            assert "http" in row.source or "openrouter.ai" in row.source
            if row.date > catalog.PRICE_TABLE_DATE and row.model != "gpt-oss-120b":
                assert re.search(r"checked 20\d\d-\d\d-\d\d", row.source), row.source
    assert catalog.price_successor("gpt-5-mini-2025-08-07") == "gpt-6.1-terra"
    assert catalog.price_successor("gpt-5-nano") == "gpt-6-luna"
    records = catalog.price_schedule_table()
    assert {"cache_write_30m", "long_context_threshold", "flex_multiplier"} <= set(records[0])
    assert [r["model"] for r in catalog.price_table(on="2025-01-01")] == []


def test_write_premium_batch_and_flex():
    terra = price_for("gpt-6.1-terra")
    assert terra.cost(prompt_tokens=1_000, cache_write_tokens=1_000, retention="12h") == (
        pytest.approx(1_000 * 2.50 / 1e6)
    )
    # no cache-write price on Batch or Flex: written tokens are plain input, then half price
    assert terra.cost(
        prompt_tokens=1_000, cache_write_tokens=1_000, retention="30m", flex=True
    ) == pytest.approx(1_000 * 1.00 / 1e6 * 0.5)
    with pytest.raises(ValueError, match="exceeds the uncached"):
        terra.cost(prompt_tokens=10, cached_prompt_tokens=5, cache_write_tokens=6)
    with pytest.raises(ValueError, match="unknown cache retention"):
        terra.write_rate("1h")
    assert price_for("gpt-5-mini").write_rate("24h") == 0.25  # GPT-5: no write premium
