"""The cost model against every published cell, the break-even, and the calibration solver."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from memcost import costs, paper
from memcost.catalog import price_for
from memcost.costs.model import (
    PAPER_CONSTANTS,
    STATED_CONSTANTS,
    CostModel,
    ingestion_multiplier,
    token_break_even,
)

PAPER = PAPER_CONSTANTS
TABLE4_CELLS = [
    (row.n_turns, column, getattr(row, column))
    for row in paper.TABLE4.itertuples()
    for column in ("memory_usd", "long_context_usd")
]
TABLE5_CELLS = [
    (row.context_tokens, column, getattr(row, column))
    for row in paper.TABLE5.itertuples()
    for column in ("write_usd", "lc_turn1_usd", "lc_turn_n_usd", "break_even_n")
]


def test_there_are_26_published_cells():
    assert len(TABLE4_CELLS) + len(TABLE5_CELLS) == 26


@pytest.mark.parametrize(("n_turns", "column", "published"), TABLE4_CELLS)
def test_table4_cell(n_turns, column, published):
    table = costs.cumulative_table(PAPER.at(101_601), [n_turns])
    assert round(float(table[column].iloc[0]), 4) == published


@pytest.mark.parametrize(("context_tokens", "column", "published"), TABLE5_CELLS)
def test_table5_cell(context_tokens, column, published):
    table = costs.break_even_table(PAPER, [context_tokens])
    assert round(float(table[column].iloc[0]), 4) == published


def test_break_even_column_and_rounded_rows():
    table = costs.break_even_table(PAPER, [30_000, 100_000, 200_000, 500_000])
    assert table["break_even_n"].tolist() == [13, 10, 9, 9]
    rounded = costs.break_even_from_rounded_rows(PAPER, [30_000, 100_000, 200_000, 500_000])
    assert rounded["break_even_from_rounded"].tolist() == [13, 9, 9, 9]
    # the published rows themselves, rounded, give 9 at 100k (with read rounded to $0.0013 too)
    row = paper.TABLE5.set_index("context_tokens").loc[100_000]
    printed = CostModel(row["write_usd"], 0.0013, row["lc_turn1_usd"], row["lc_turn_n_usd"])
    assert printed.break_even() == 9


def test_paper_constants_use_the_price_tables_gpt5_mini_prices():
    price = price_for("gpt-5-mini-2025-08-07")
    assert (
        PAPER.input_usd_per_mtok,
        PAPER.cached_input_usd_per_mtok,
        PAPER.output_usd_per_mtok,
    ) == (price.input, price.cached_input, price.output)
    assert (
        costs.CostConstants.for_price(
            price,
            write_usd_per_token=4.296e-7,
            read_usd=0.001317,
            output_tokens=527,
            cached_share=1.0,
            source=PAPER.source,
        )
        == PAPER
    )


def random_models(count: int, seed: int = 7) -> list[CostModel]:
    rng = np.random.default_rng(seed)
    models = []
    for _ in range(count):
        write, read, first, cached = rng.uniform(0, 0.1, size=4)
        models.append(CostModel(write, read, first, cached))
    # ties and edge cases: equal slopes, memory cheaper at once, exact float ties
    models += [
        CostModel(0.05, 0.002, 0.03, 0.002),  # parallel lines, memory dearer: never
        CostModel(0.01, 0.002, 0.03, 0.002),  # memory cheaper from the first question
        CostModel(0.1, 0.003, 0.01, 0.001),  # memory's slope is steeper: never
        CostModel(0.3, 0.1, 0.1, 0.2),  # exact tie at N=2 (0.5 vs 0.3): first win at 3
        CostModel(0.0, 0.0, 0.0, 0.0),  # equal everywhere: never strictly cheaper
    ]
    return models


def break_even_brute_force(model: CostModel, max_turns: int) -> int | None:
    """The definition, literally: try N = 1, 2, ..."""
    return next(
        (n for n in range(1, max_turns + 1) if model.memory(n) < model.long_context(n)), None
    )


def test_break_even_equals_brute_force():
    for model in random_models(2_000):
        assert model.break_even(max_turns=3_000) == break_even_brute_force(model, 3_000), model


def test_break_even_respects_max_turns():
    model = PAPER.at(100_000)
    assert model.break_even(max_turns=10) == 10
    assert model.break_even(max_turns=9) is None


def test_break_even_never_increases_with_context_length():
    contexts = np.geomspace(1_000, 5_000_000, 400)
    values = [PAPER.at(L).break_even() for L in contexts]
    finite = [v for v in values if v is not None]
    assert finite, "memory should win somewhere"
    first_finite = values.index(finite[0])
    assert all(v is None for v in values[:first_finite])  # short histories: never
    assert all(a >= b for a, b in zip(finite, finite[1:], strict=False))


def test_cost_difference_grid_matches_the_model():
    contexts, turns = [30_000, 101_601, 700_000], [1, 9, 10, 50]
    grid = costs.cost_difference_grid(PAPER, contexts, turns)
    for j, L in enumerate(contexts):
        model = PAPER.at(L)
        for i, n in enumerate(turns):
            assert grid[i, j] == model.long_context(n) - model.memory(n)
    boundary = costs.break_even_curve(PAPER, contexts, max_turns=50)
    assert boundary.tolist() == [13, 10, 9]


def test_sustained_and_first_break_even_differ_on_a_spiky_series():
    # memory gets ahead at turn 2, an ingestion spike at turn 4 puts it behind, ahead again at 6
    memory = [1.0, 1.0, 1.0, 5.0, 1.0, 1.0, 1.0, 1.0]
    lc = [1.5, 2.0, 1.0, 2.0, 2.0, 2.0, 1.0, 1.0]
    # cumulative memory 1 2 3 8 9 10 11 12; long context 1.5 3.5 4.5 6.5 8.5 10.5 11.5 12.5
    assert costs.first_break_even(memory, lc) == 1
    assert costs.sustained_break_even(memory, lc) == 6
    # when memory is behind at the last turn there is no sustained break-even
    assert costs.sustained_break_even([1, 1, 9], [2, 2, 2]) is None
    assert costs.first_break_even([1, 1, 9], [2, 2, 2]) == 1


def test_sustained_equals_first_for_the_paper_model():
    model = PAPER.at(100_000)
    n = np.arange(1, 60)
    memory = np.diff(np.concatenate([[0.0], model.memory(n)]))
    lc = np.diff(np.concatenate([[0.0], model.long_context(n)]))
    assert costs.sustained_break_even(memory, lc) == costs.first_break_even(memory, lc) == 10


def test_growing_conversation_first_and_sustained_differ():
    series = costs.growing_conversation_series(
        PAPER, turns=80, message_tokens=1_000, ingest_every=10
    )
    first = costs.first_break_even(series["memory_usd"], series["long_context_usd"])
    sustained = costs.sustained_break_even(series["memory_usd"], series["long_context_usd"])
    assert first is not None and sustained is not None and first < sustained


def test_solver_intervals_contain_chosen_and_exclude_stated():
    intervals = costs.solve_implied_constants().set_index("constant")
    assert intervals["chosen_inside"].all()
    write, read = intervals.loc["write_usd_per_token"], intervals.loc["read_usd"]
    assert not write["stated_inside"] and not read["stated_inside"]
    # in the text's own units: $0.0435 per 101,601-token history and $0.0013 per read
    L = paper.TABLE4_CONTEXT_TOKENS
    assert not write["low"] * L <= 0.0435 <= write["high"] * L
    assert not read["low"] <= 0.0013 <= read["high"]
    assert write["low"] * L <= 0.04365 <= write["high"] * L
    # the intervals are tight enough to be informative
    assert write["high"] / write["low"] < 1.001
    assert (
        524 < intervals.loc["output_tokens", "low"] < 527 < intervals.loc["output_tokens", "high"]
    )
    assert intervals.loc["cached_share", "low"] > 0.999


def test_solver_fails_when_prices_make_the_cells_inconsistent():
    inconsistent = costs.published_constraints(input_usd_per_mtok=0.5)
    with pytest.raises(ValueError, match="admit no constants"):
        costs.solve_implied_constants(inconsistent)


def test_chosen_constants_satisfy_every_constraint_and_stated_do_not():
    constraints = costs.published_constraints()
    assert costs.constraint_slack(constraints, PAPER)["satisfied"].all()
    assert not costs.constraint_slack(constraints, STATED_CONSTANTS)["satisfied"].all()


def test_calibration_table_scores_the_variants():
    table = costs.calibration_table(
        {
            "implied": PAPER,
            "stated": STATED_CONSTANTS,
            "no output": PAPER.replace(output_tokens=0),
        }
    )
    scores = dict(zip(table["constants"], table["cells_matched"], strict=True))
    assert scores["implied"] == 26
    assert scores["stated"] < 26 and scores["no output"] < 26


def test_sensitivity_tables():
    contexts = [30_000, 100_000]
    discount = costs.sensitivity_cache_discount(PAPER, [0.0, 0.9], contexts)
    assert discount.set_index(["cache_discount", "context_tokens"])["break_even_n"].to_dict() == {
        (0.0, 30_000): 2,
        (0.0, 100_000): 2,
        (0.9, 30_000): 13,
        (0.9, 100_000): 10,
    }
    output = costs.sensitivity_output_tokens(PAPER, [527], contexts)
    assert output["break_even_n"].tolist() == [13, 10]
    batch = costs.sensitivity_batch(PAPER, contexts, 0.5).set_index(["scenario", "context_tokens"])
    assert batch.loc[("list prices", 100_000), "break_even_n"] == 10
    assert batch.loc[("batch everything", 100_000), "break_even_n"] == 10  # all halved: same N
    assert batch.loc[("batch write", 100_000), "break_even_n"] < 10


def test_token_level_break_even():
    assert token_break_even(300, 100, 0) == 3.0
    assert token_break_even(300, 100, 40, 10) == pytest.approx(300 / 70)
    assert token_break_even(300, 100, 100) == float("inf")
    assert ingestion_multiplier(330, 100) == pytest.approx(3.3)
    table = costs.token_vs_dollar_table(PAPER, [101_601]).iloc[0]
    assert table["ingestion_multiplier"] == pytest.approx(costs.PAPER_INGESTION_MULTIPLIER)
    assert 3.2 < table["token_break_even"] < 3.4
    assert (table["dollar_break_even_no_cache"], table["dollar_break_even_cached"]) == (2, 10)


def test_compare_with_paper_flags_a_wrong_cell():
    table4 = costs.cumulative_table(PAPER.at(101_601), [1, 5, 10, 15, 20])
    table5 = costs.break_even_table(PAPER, [30_000, 100_000, 200_000, 500_000])
    assert costs.compare_with_paper(table4, table5)["match"].all()
    broken = table5.assign(write_usd=lambda f: f["write_usd"] + 0.0001)
    cells = costs.compare_with_paper(table4, broken)
    assert (~cells["match"]).sum() == 4
    assert isinstance(cells, pd.DataFrame) and len(cells) == 26


def test_the_spend_is_what_the_provider_billed_where_it_says_and_failed_billed_calls_count():
    from memcost.calls import spent_usd
    from memcost.costs.ledger import ledger_from_records, price_calls

    base = dict(
        stage="read",
        model="gpt-5-mini-2025-08-07",
        provider="openrouter.ai",
        backend="openrouter",
        prompt_version="t@v1",
        prompt_tokens=1000,
        cached_prompt_tokens=0,
        completion_tokens=100,
        reasoning_tokens=0,
        latency_s=0.1,
        attempts=1,
        cached=False,
        error=None,
        sample_index=0,
        request_hash="h",
        dataset="locomo",
    )
    records = [
        {**base, "request_hash": "a", "billed_usd": 0.5},  # the provider's own charge
        {**base, "request_hash": "b"},  # no charge reported: the list price
        {**base, "request_hash": "c", "error": "finish_reason=length: no answer"},  # billed
        {
            **base,
            "request_hash": "d",
            "error": "HTTP 500",
            "prompt_tokens": 0,
            "completion_tokens": 0,
        },  # never answered: nothing billed
    ]
    priced = price_calls(ledger_from_records(records)).set_index("request_hash")
    list_price = float(priced.loc["b", "cost_usd"])
    assert list_price == pytest.approx(1000 * 0.25 / 1e6 + 100 * 2.0 / 1e6)
    assert priced.loc["a", "spent_usd"] == pytest.approx(0.5)  # not the list price
    assert priced.loc["a", "cost_usd"] == pytest.approx(list_price)  # list price kept beside it
    assert priced.loc["c", "spent_usd"] == pytest.approx(list_price)
    assert priced.loc["d", "spent_usd"] == 0.0
    assert float(priced["spent_usd"].sum()) == pytest.approx(spent_usd(records))  # one rule


def test_the_write_cost_sentence_is_read_from_the_table():
    """Notebook 05 once said graph memory pays more up front while its table showed less: the
    sentence now comes from the table, both ways."""
    table = pd.DataFrame(
        {
            "dataset": ["locomo"] * 3,
            "memory_system": ["memory_mem0_style", "memory_graph", "memory_rag"],
            "write_usd": [0.0020, 0.0030, 0.0001],
            "prices": ["paper's"] * 3,
        }
    )
    assert costs.write_cost_lines(table) == [
        "locomo, paper's prices: memory_graph writes $0.0030 per user, 1.50x the paper's memory "
        "($0.0020): it pays more up front",
        "locomo, paper's prices: memory_rag writes $0.0001 per user, 0.05x the paper's memory "
        "($0.0020): it pays less up front",
    ]
    assert costs.write_cost_lines(table.iloc[1:]) == []  # no paper's memory to compare with
