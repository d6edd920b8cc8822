"""The ``execution`` parameter: how each ledger stage's calls are sent, and what they cost."""

from __future__ import annotations

import pandas as pd
import pytest

from memcost.calls import STAGES, list_cost
from memcost.catalog import price_for
from memcost.costs.ledger import price_calls
from memcost.params import normalise_execution


def test_stages_left_out_are_interactive():
    modes = normalise_execution({"extract": "batch", "judge": "flex"})
    assert set(modes) == set(STAGES)
    assert modes["extract"] == "batch" and modes["judge"] == "flex"
    assert modes["long_context"] == "interactive"


def test_star_sets_every_stage_and_named_stages_win():
    modes = normalise_execution({"*": "batch", "long_context": "interactive"})
    assert modes["extract"] == modes["judge"] == modes["embed"] == "batch"
    assert modes["long_context"] == "interactive"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"extraction": "batch"}, "execution['extraction']: unknown stage; stages are extract"),
        ({"judge": "cheap"}, "execution['judge']='cheap': choose one of interactive, batch, flex"),
        ("batch", "execution='batch': expected a mapping of stage to mode"),
    ],
)
def test_bad_values_name_the_entry_and_the_choices(value, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        normalise_execution(value)


def test_a_batch_or_flex_record_costs_half_the_interactive_one():
    record = {
        "model": "gpt-6.1-terra",
        "prompt_tokens": 120_000,
        "cached_prompt_tokens": 20_000,
        "completion_tokens": 3_000,
    }
    interactive = list_cost(record)
    price = price_for("gpt-6.1-terra")
    expected = (100_000 * price.input + 20_000 * price.cached_rate + 3_000 * price.output) / 1e6
    assert interactive == pytest.approx(expected)
    assert list_cost({**record, "execution": "batch"}) == pytest.approx(expected / 2)
    assert list_cost({**record, "execution": "flex"}) == pytest.approx(expected / 2)


def test_flex_on_a_model_sold_without_it_is_an_error_not_a_silent_list_price():
    record = {"model": "gpt-4.1-mini", "prompt_tokens": 1_000, "completion_tokens": 10}
    with pytest.raises(ValueError, match="gpt-4.1-mini: no Flex processing"):
        list_cost({**record, "execution": "flex"})


def test_notebook_05_prices_batch_and_flex_records_at_their_multiplier():
    base = {
        "stage": "judge",
        "model": "gpt-5-mini-2025-08-07",
        "backend": "openai",
        "prompt_tokens": 10_000,
        "cached_prompt_tokens": 2_000,
        "completion_tokens": 1_500,
        "reasoning_tokens": 1_000,
        "cached": False,
        "error": None,
        "attempts": 1,
    }
    rows = [base, {**base, "execution": "batch"}, {**base, "execution": "flex"}]
    priced = price_calls(pd.DataFrame(rows))
    full = list_cost(base)
    assert list(priced["cost_usd"]) == pytest.approx([full, full / 2, full / 2])
    assert list(priced["spent_usd"]) == pytest.approx([full, full / 2, full / 2])
