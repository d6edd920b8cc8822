"""The cost model with time in it: hand-computed small cases of cache expiry, write premiums and
the long-context tier; the paper's Tables 4-5 reproduced through it; arrival processes; the
explorer drawing the table's break-even."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest

from memcost import costs, paper
from memcost.catalog import price_for
from memcost.costs import timeline as arrivals
from memcost.costs import today
from memcost.costs.ledger import ledger_from_records
from memcost.costs.timeline import (
    BREAK_EVEN_FIRST_PREFIX,
    DAY,
    HOUR,
    MINUTE,
    LongContext,
    Memory,
    break_even_of,
    is_alive,
    long_context_requests,
    retention_for,
    timeline,
    timeline_break_even,
)

TERRA = price_for("gpt-6.1-terra", on="2026-11-30")
MINI = price_for("gpt-5-mini")


def two_questions(price, policy, gap, tokens=10_000, output=0.0):
    setup = LongContext.on(price, policy, output_tokens=output)
    return long_context_requests(setup, [0.0, gap], [tokens, tokens])


def test_four_minutes_apart_in_memory_second_is_cached():
    rows = two_questions(TERRA, "in_memory", 4 * MINUTE)
    assert rows["cache_alive"].tolist() == [False, True]
    assert rows["usd"].tolist() == pytest.approx([10_000 * 1.25 / 1e6, 10_000 * 0.05 / 1e6])
    paper_rows = two_questions(MINI, "in_memory", 4 * MINUTE)  # GPT-5: no write premium
    assert paper_rows["usd"].tolist() == pytest.approx([10_000 * 0.25 / 1e6, 10_000 * 0.025 / 1e6])


def test_two_hours_apart_in_memory_second_is_uncached():
    rows = two_questions(TERRA, "in_memory", 2 * HOUR)
    assert rows["cache_alive"].tolist() == [False, False]
    assert rows["cached_tokens"].tolist() == [0, 0]
    assert rows["usd"].tolist() == pytest.approx([0.0125, 0.0125])  # written again, at 1.25
    assert two_questions(MINI, "in_memory", 2 * HOUR)["usd"].iloc[1] == pytest.approx(0.0025)
    # extended retention (12 h on gpt-6.1-terra) still holds it after two hours
    assert two_questions(TERRA, "extended", 2 * HOUR)["cache_alive"].tolist() == [False, True]


def test_write_premium_on_the_first_question_under_extended_retention():
    rows = two_questions(TERRA, "extended", MINUTE, output=100)
    assert rows["written_tokens"].tolist() == [10_000, 0]
    assert rows["usd"].iloc[0] == pytest.approx((10_000 * 2.50 + 100 * 5.00) / 1e6)
    assert rows["usd"].iloc[1] == pytest.approx((10_000 * 0.05 + 100 * 5.00) / 1e6)
    none = two_questions(TERRA, "none", MINUTE, output=100)  # no caching: plain input each time
    assert none["usd"].tolist() == pytest.approx([(10_000 + 500) / 1e6] * 2)


def test_a_300k_request_is_billed_at_the_long_context_tier():
    assert TERRA.cost(prompt_tokens=300_000, completion_tokens=1_000) == pytest.approx(
        (300_000 * 1.00 * 2 + 1_000 * 5.00 * 1.5) / 1e6
    )
    assert TERRA.cost(prompt_tokens=272_000, completion_tokens=1_000) == pytest.approx(
        (272_000 * 1.00 + 1_000 * 5.00) / 1e6
    )  # at the threshold: standard prices
    rows = two_questions(TERRA, "in_memory", MINUTE, tokens=300_000, output=1_000)
    assert rows["long_context_tier"].tolist() == [True, True]
    assert rows["usd"].tolist() == pytest.approx(
        [(300_000 * 1.25 * 2 + 1_000 * 7.50) / 1e6, (300_000 * 0.10 + 1_000 * 7.50) / 1e6]
    )
    assert MINI.cost(prompt_tokens=300_000) == pytest.approx(300_000 * 0.25 / 1e6)  # no tier


def test_retention_rule():
    in_memory = retention_for(MINI, "in_memory")
    assert is_alive(0.0, 10 * MINUTE, in_memory) and not is_alive(0.0, 10 * MINUTE + 1, in_memory)
    assert not is_alive(None, 0.0, in_memory)
    assert retention_for(TERRA, "in_memory").sold_as == "30m"
    assert retention_for(TERRA, "extended").window_seconds == 12 * HOUR
    assert retention_for(MINI, "extended").window_seconds == DAY
    assert is_alive(0.0, 1e9, retention_for(MINI, "always"))
    with pytest.raises(ValueError, match="no extended cache retention"):
        retention_for(price_for("gpt-6-luna"), "extended")
    grid = LongContext.on(MINI, "in_memory", output_tokens=0, exact_cache=False)
    rows = long_context_requests(grid, [0, MINUTE], [10_000, 10_000])
    assert rows["cached_tokens"].iloc[1] == 1_024 + 70 * 128  # 1,024 then 128-token steps


def test_history_growth_is_written_by_memory_and_read_uncached_by_long_context():
    setup = LongContext.on(MINI, "always", output_tokens=0)
    frame = timeline(
        setup, Memory(write_usd_per_token=1e-6, read_usd=0.001), [0, 0, 0], [1_000, 1_500, 2_500]
    )
    assert frame["cached_tokens"].tolist() == [0, 1_000, 1_500]
    assert frame["written_tokens"].tolist() == [1_000, 500, 1_000]
    assert frame["memory_usd"].tolist() == pytest.approx([0.002, 0.0015, 0.002])
    assert (frame["price_date"] == MINI.date).all()


def test_paper_tables_unchanged_through_the_timeline():
    table4 = today.cumulative_table_for(
        today.PAPER, paper.TABLE4_CONTEXT_TOKENS, [1, 5, 10, 15, 20]
    )
    table5 = today.break_even_table_for(today.PAPER, paper.TABLE5["context_tokens"])
    cells = costs.compare_with_paper(
        table4[["n_turns", "memory_usd", "long_context_usd"]],
        table5[["context_tokens", "write_usd", "lc_turn1_usd", "lc_turn_n_usd", "break_even_n"]],
    )
    assert len(cells) == 26 and cells["match"].all()
    assert table5["break_even_n"].tolist() == [13, 10, 9, 9]
    assert set(table5["price_date"]) == {"2025-09-15"}
    # and the closed form agrees with the timeline below the tier at today's prices
    now = today.break_even_table_for(today.CURRENT_LOW_COST, [30_000, 100_000, 200_000])
    closed = costs.break_even_table(
        today.constants_for(today.CURRENT_LOW_COST), [30_000, 100_000, 200_000]
    )
    assert now["break_even_n"].tolist() == closed["break_even_n"].tolist()


def test_the_break_even_on_prefixes_is_the_whole_timelines():
    # questions at random times on a growing history, with break-evens before and after the
    # first prefix, and none at all: the prefix search finds what the whole timeline finds
    rng = np.random.default_rng(7)
    found = []
    for case in range(120):
        setup = LongContext.on(MINI, ["in_memory", "extended", "none"][case % 3], output_tokens=300)
        n = int(rng.integers(1, 400))
        times = np.cumsum(rng.choice([0.0, MINUTE, HOUR, DAY], size=n))
        history = rng.uniform(2_000, 300_000) + np.cumsum(rng.uniform(0, 2_000, size=n))
        memory = Memory(write_usd_per_token=rng.uniform(1e-8, 2e-6), read_usd=rng.uniform(0, 0.01))
        whole = break_even_of(timeline(setup, memory, times, history))
        assert timeline_break_even(setup, memory, times, history) == whole, case
        found.append(whole)
    assert None in found
    assert any(n and n > BREAK_EVEN_FIRST_PREFIX for n in found)
    assert any(n and n <= BREAK_EVEN_FIRST_PREFIX for n in found)


def test_headline_is_computed():
    table = today.headline_table().set_index("case")
    assert table.loc["paper's break-even", "break_even_n"] == 10
    assert table["price_date"].tolist() == ["2025-09-15"] + ["2026-11-30"] * 6
    luna = table.loc["today on gpt-6-luna, one question a day, extended retention"]
    assert pd.isna(luna["break_even_n"]) and "no extended cache retention" in luna["note"]
    assert table.loc["today, one question a day", "gap_seconds"] == DAY


def test_arrival_processes():
    assert arrivals.back_to_back(3).tolist() == [0, 0, 0]
    assert arrivals.fixed_gaps(3, 60).tolist() == [0, 60, 120]
    assert arrivals.sessions(5, 2, gap_seconds=DAY, within_seconds=60).tolist() == [
        0,
        60,
        60 + DAY,
        120 + DAY,
        120 + 2 * DAY,
    ]
    times = arrivals.poisson(2_001, rate_per_day=4, seed=1)
    assert np.all(np.diff(times) >= 0) and np.diff(times).mean() == pytest.approx(DAY / 4, rel=0.1)
    assert arrivals.from_gaps(4, [10, 20]).tolist() == [0, 10, 30, 40]
    conversations = pd.DataFrame(
        {
            "conversation_id": ["a"] * 3 + ["b"],
            "session_index": [0, 0, 1, 0],
            "session_datetime": [
                "2023-05-01T10:00:00",
                "2023-05-01T10:00:00",
                "2023-05-03T10:00:00",
                "2023-01-01T00:00:00",
            ],
        }
    )
    questions = pd.DataFrame({"conversation_id": ["b"], "question_date": ["2023-01-01T06:00:00"]})
    gaps = arrivals.dataset_gaps(conversations, questions)
    assert gaps["a"].tolist() == [2 * DAY] and gaps["b"].tolist() == [6 * HOUR]


def test_break_even_by_dataset_time():
    gaps = {"toy": {"u1": np.array([60.0]), "u2": np.array([DAY])}}
    table = today.dataset_break_even_table(gaps, [today.PAPER], ["in_memory"], 100_000)
    row = table.iloc[0]
    assert (row["break_even_min"], row["break_even_max"]) == (2, 10)  # minute vs day gaps


@pytest.fixture(autouse=True)
def _close_figures():
    """The explorer draws a figure per slider change: close them after each test."""
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.mark.parametrize("gap", [MINUTE, DAY])
@pytest.mark.parametrize("name", ["current", "current (all gpt-6-luna)", "paper"])
def test_explorer_draws_the_tables_break_even(gap, name):
    from memcost.plots.today import explorer_update

    s = today.scenario(name)
    table = today.gap_break_even_table([s], ["in_memory"], [gap], 101_601)
    expected = int(table["break_even_n"].iloc[0])
    fig, drawn = explorer_update(
        {
            "gap_seconds": gap,
            "scenario": name,
            "questions": 120,
            "retention": "in_memory",
            "context_tokens": 101_601,
        }
    )
    assert drawn == expected
    assert f"break-even {expected}" in fig.axes[0].get_title()
    with pytest.raises(ValueError, match="unknown explorer setting"):
        explorer_update({"gapp": 1})


def test_tier_table_and_crossing():
    tier = today.tier_table(today.CURRENT_LOW_COST, [200_000, 300_000]).set_index("context_tokens")
    assert tier["above_tier"].tolist() == [False, True]
    luna = price_for("gpt-6-luna")
    # the first turn at 300K: the whole history written at 2 × 0.125, 527 output at 1.5 × 0.50
    assert tier.loc[300_000, "lc_turn1_usd"] == pytest.approx(
        (300_000 * 0.125 * 2 + 527 * 0.50 * 1.5) / 1e6
    )
    assert tier.loc[300_000, "lc_turn1_usd_no_tier"] == pytest.approx(
        (300_000 * 0.125 + 527 * 0.50) / 1e6
    )
    assert tier.loc[300_000, "break_even_n"] < tier.loc[300_000, "break_even_n_no_tier"]
    assert luna.long_context_threshold == 272_000
    assert today.tier_crossing(101_601, 1_000, 272_000) == 172  # history 272,601 at question 172
    assert today.tier_crossing(300_000, 0, 272_000) == 1
    assert today.tier_crossing(100_000, 0, 272_000) is None


def test_batch_write_halves_memorys_write():
    table = today.batch_table([today.CURRENT_LOW_COST], [100_000]).set_index("variant")
    assert table.loc["batch write", "write_usd"] == pytest.approx(
        table.loc["list prices", "write_usd"] * 0.5
    )
    assert table.loc["batch write", "break_even_n"] < table.loc["list prices", "break_even_n"]


def test_report_shows_todays_break_evens_side_by_side(tmp_path):
    from memcost.io import write_csv
    from memcost.paths import RunPaths
    from memcost.run.report.costs import section_today
    from memcost.run.report.view import RunView

    run = RunPaths(tmp_path / "run").ensure()
    headline = today.headline_table()
    write_csv(run.table.break_even_headline, headline)
    write_csv(run.table.table5_today, today.break_even_table_for(today.PAPER, [100_000]))
    view = RunView(run, {})
    text = "\n".join(section_today(view))
    assert "| paper's break-even | gpt-5-mini | 2025-09-15 | always | 100,000 | 10 |" in text
    assert "today, one question a day, extended retention" in text
    assert "not sold" in text  # gpt-6-luna sells no extended retention
    assert "| 100,000 | 10 |" in text  # Table 5 today, the paper's column
    assert section_today(RunView(RunPaths(tmp_path / "empty"), {})) == []
    # the successors and what moved are the registry's and the price rows', never typed in
    assert (
        f"({today.CURRENT.lc_model} for gpt-5-mini, {today.CURRENT.extraction_model} for " in text
    )
    assert f"Since the paper, {today.what_moved()}." in text


def test_what_moved_is_read_from_the_price_rows():
    from dataclasses import replace

    from memcost.catalog import price_for

    now = today.CURRENT
    lc, extract = price_for(now.lc_model, on=now.date), price_for(now.extraction_model, on=now.date)
    assert today.what_moved() == (
        f"long context's input price went from $0.25 (gpt-5-mini) to ${lc.input:.2f} per 1M "
        f"tokens ({now.lc_model}), ×{lc.input / 0.25:.1f}, and its first turn writes the cache "
        f"at ${lc.cache_write_30m:.2f} per 1M tokens; extraction's went from $0.05 (gpt-5-nano) "
        f"to ${extract.input:.2f} ({now.extraction_model}), ×{extract.input / 0.05:.1f}"
    )
    # a model whose row sells no cache write: no write clause; the paper's own rows: ×1.0
    gpt5 = replace(today.PAPER, lc_model="gpt-5", paper_calibrated=False)
    assert today.what_moved(now=gpt5) == (
        "long context's input price went from $0.25 (gpt-5-mini) to $1.25 per 1M tokens "
        "(gpt-5), ×5.0; extraction's went from $0.05 (gpt-5-nano) to $0.05 (gpt-5-nano), ×1.0"
    )


def test_the_low_cost_scenario_is_named_after_the_registrys_successor():
    from memcost.catalog import price_successor

    low = price_successor("gpt-5-nano-2025-08-07")
    assert today.CURRENT_LOW_COST.name == f"current (all {low})"
    assert today.CURRENT_LOW_COST.lc_model == today.CURRENT_LOW_COST.reader_model == low
    cases = today.headline_table()["case"].tolist()
    assert f"today on {low}, back to back" in cases


def test_arrival_table_and_the_explorer_widgets():
    table = today.arrival_table([today.PAPER], ["in_memory"], 101_601, seeds=3, max_questions=60)
    by = table.set_index("arrivals")["break_even_median"]
    assert by["back to back (the paper)"] == 10 and by["a question a day"] == 2
    assert by["sessions of 3 (1 min apart), a day apart"] == 4  # 2 of 3 questions cached
    assert table.set_index("arrivals").loc["Poisson, 1 a day", "users"] == 3
    from memcost.plots.today import EXPLORER_DEFAULTS, explorer_widgets

    box = explorer_widgets({"gap_seconds": DAY})
    assert len(box.children) == len(EXPLORER_DEFAULTS) + 1  # one control per setting + output


def test_priced_ledger_names_its_price_date():
    from test_usage import record

    priced = costs.price_calls(
        ledger_from_records(
            [
                record("long_context", "gpt-5-mini-2025-08-07", 1_000, 10),
                record("long_context", "gpt-6.1-terra", 1_000, 10),
                record("long_context", "gpt-6.1-terra", 300_000, 10),
            ]
        )
    )
    assert priced["price_date"].tolist() == ["2025-09-15", "2026-10-26", "2026-10-26"]
    assert priced["cost_usd"].tolist() == pytest.approx(
        [
            (1_000 * 0.25 + 10 * 2.0) / 1e6,
            (1_000 + 10 * 5.0) / 1e6,
            (300_000 * 2.0 + 10 * 7.5) / 1e6,
        ]
    )  # the 300K record at the long-context tier
