"""Notebook 07's analysis: is memory worth it today, with today's prices and a cache that expires.

The paper's cost model (:mod:`memcost.costs`) bills every question after the first as cached and
prices gpt-5-mini and gpt-5-nano as of the paper. This package gives the same Eq. 1-2 time and
today's dated price rows, one module per idea:

* :mod:`~memcost.today.retention` — the prompt-cache retention rule (is a prefix still alive);
* :mod:`~memcost.today.arrivals` — when questions arrive (back to back, gaps, Poisson, sessions,
  a dataset's own dates);
* :mod:`~memcost.today.timeline` — Eq. 1-2 with time in it: cache expiry, write premiums, tiers;
* :mod:`~memcost.today.scenarios` — the paper's prices and today's (successor models), and every
  assumption beyond prices with the paper's value;
* :mod:`~memcost.today.break_even` — the break-even today: by gap, arrivals, dataset, tier, Batch;
* :mod:`~memcost.today.dataset_time` — the gaps between sessions of the datasets a run prepared.

With the paper's prices, "always cached" and back-to-back questions it is exactly the paper's
model (the tests check all 26 published cells through it). It imports :mod:`memcost.costs`,
never the other way round.
"""

from memcost.today.break_even import (
    arrival_processes,
    arrival_table,
    batch_table,
    break_even_table_for,
    cost_difference_grid_for,
    cumulative_table_for,
    dataset_break_even_table,
    gap_break_even_table,
    headline_table,
    scenario_break_even,
    scenario_timeline,
    tier_crossing,
    tier_table,
)
from memcost.today.scenarios import (
    CURRENT,
    CURRENT_LUNA,
    PAPER,
    PAPER_ASSUMPTIONS,
    SCENARIOS,
    Assumptions,
    PriceScenario,
    constants_for,
    long_context_for,
    memory_for,
    scenario,
)
from memcost.today.timeline import LongContext, Memory, break_even_of, timeline

__all__ = [
    "CURRENT",
    "CURRENT_LUNA",
    "PAPER",
    "PAPER_ASSUMPTIONS",
    "SCENARIOS",
    "Assumptions",
    "LongContext",
    "Memory",
    "PriceScenario",
    "arrival_processes",
    "arrival_table",
    "batch_table",
    "break_even_of",
    "break_even_table_for",
    "constants_for",
    "cost_difference_grid_for",
    "cumulative_table_for",
    "dataset_break_even_table",
    "gap_break_even_table",
    "headline_table",
    "long_context_for",
    "memory_for",
    "scenario",
    "scenario_break_even",
    "scenario_timeline",
    "tier_crossing",
    "tier_table",
    "timeline",
]
