"""Notebook 05's analysis: the paper's cost model, what this run cost, and when memory pays off.

One module per section of the notebook:

* :mod:`~memcost.costs.model` — the paper's cost model (Eq. 1-2), Tables 4-5, rounding, Figure 1;
* :mod:`~memcost.costs.calibration` — the published cells as constraints, the implied constants;
* :mod:`~memcost.costs.sensitivity` — the break-even under other cache discounts, answer lengths
  and Batch-API prices;
* :mod:`~memcost.costs.growth` — first and sustained break-even, a growing conversation, the
  token-level break-even;
* :mod:`~memcost.costs.ledger` — ``calls.sqlite`` loaded (through :mod:`memcost.calls`) and priced;
* :mod:`~memcost.costs.measured` — the bill per stage, user and question, cached share, token
  ratios, cost per correct answer;
* :mod:`~memcost.costs.measured_model` — the cost model's constants measured on a run, per
  memory system;
* :mod:`~memcost.costs.latency` — search and answer latency per system, Mem0's beside;
* :mod:`~memcost.costs.estimate` — the bill estimated before a run, from notebook 00's counts;
* :mod:`~memcost.costs.profile` — the datasets' shape against the paper's Tables 1-2.

The same model at today's prices, with time, cache retention and tiers in it, is
:mod:`memcost.today` (notebook 07). Analysis reads files; it never imports the model client
(``memcost.llm``).
"""

from memcost.costs.calibration import (
    SOLVER_VARIABLES,
    CellConstraint,
    calibration_table,
    constraint_slack,
    published_constraints,
    solve_implied_constants,
)
from memcost.costs.estimate import (
    effective_parameters,
    estimate_dataset,
    estimate_run,
    summary_text,
)
from memcost.costs.growth import (
    PAPER_INGESTION_MULTIPLIER,
    first_break_even,
    growing_conversation_series,
    ingestion_multiplier,
    sustained_break_even,
    token_break_even,
    token_vs_dollar_table,
)
from memcost.costs.latency import (
    MEM0_PUBLISHED,
    latency_table,
    question_latencies,
    with_published,
)
from memcost.costs.ledger import (
    ESTIMATE,
    ESTIMATE_NOTE,
    LEDGER_COLUMNS,
    MEASURED,
    TAG_COLUMNS,
    TOKEN_COLUMNS,
    WRITE_STAGES,
    answer_system,
    as_successors,
    basis_of,
    is_estimate,
    ledger_from_records,
    ledger_paths,
    load_ledger,
    normalise_ledger,
    phase_of,
    price_calls,
    workload,
)
from memcost.costs.measured import (
    cost_per_correct,
    lc_cached_share,
    majority_votes,
    question_costs,
    run_judgments,
    stage_costs,
    summary_table,
    token_ratios,
    user_costs,
)
from memcost.costs.measured_model import (
    break_even_by_user_summary,
    measured_break_even,
    measured_constants,
    measured_cost_model,
    per_memory_system,
    per_user_series,
)
from memcost.costs.model import (
    PAPER_CONSTANTS,
    ROUNDING_HALF_WIDTH,
    STATED_CONSTANTS,
    TOKENS_PER_MILLION,
    CostConstants,
    CostModel,
    break_even,
    break_even_brute_force,
    break_even_curve,
    break_even_from_rounded_rows,
    break_even_table,
    compare_with_paper,
    cost_difference_grid,
    cumulative_table,
    round_table,
)
from memcost.costs.sensitivity import (
    BATCH_SCENARIOS,
    sensitivity_batch,
    sensitivity_cache_discount,
    sensitivity_output_tokens,
)

__all__ = [
    "MEM0_PUBLISHED",
    "latency_table",
    "question_latencies",
    "with_published",
    "BATCH_SCENARIOS",
    "ESTIMATE",
    "ESTIMATE_NOTE",
    "LEDGER_COLUMNS",
    "MEASURED",
    "PAPER_CONSTANTS",
    "PAPER_INGESTION_MULTIPLIER",
    "ROUNDING_HALF_WIDTH",
    "SOLVER_VARIABLES",
    "STATED_CONSTANTS",
    "TAG_COLUMNS",
    "TOKENS_PER_MILLION",
    "TOKEN_COLUMNS",
    "WRITE_STAGES",
    "CellConstraint",
    "CostConstants",
    "CostModel",
    "answer_system",
    "as_successors",
    "basis_of",
    "break_even",
    "break_even_brute_force",
    "break_even_by_user_summary",
    "break_even_curve",
    "break_even_from_rounded_rows",
    "break_even_table",
    "calibration_table",
    "compare_with_paper",
    "constraint_slack",
    "cost_difference_grid",
    "cost_per_correct",
    "cumulative_table",
    "effective_parameters",
    "estimate_dataset",
    "estimate_run",
    "first_break_even",
    "growing_conversation_series",
    "ingestion_multiplier",
    "is_estimate",
    "lc_cached_share",
    "ledger_from_records",
    "ledger_paths",
    "load_ledger",
    "majority_votes",
    "measured_break_even",
    "measured_constants",
    "measured_cost_model",
    "normalise_ledger",
    "per_memory_system",
    "per_user_series",
    "phase_of",
    "price_calls",
    "published_constraints",
    "question_costs",
    "round_table",
    "run_judgments",
    "sensitivity_batch",
    "sensitivity_cache_discount",
    "sensitivity_output_tokens",
    "solve_implied_constants",
    "stage_costs",
    "summary_table",
    "summary_text",
    "sustained_break_even",
    "token_break_even",
    "token_ratios",
    "token_vs_dollar_table",
    "user_costs",
    "workload",
]
