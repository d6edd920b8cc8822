"""Costs (notebooks 05, 07): the cost model and its break-even, what a run cost, what it will cost,
and today's prices."""

# ruff: noqa: F401 - the names the notebooks use
from memcost.costs.break_even import first_break_even, sustained_break_even
from memcost.costs.calibration import (
    calibration_table,
    constraint_slack,
    published_constraints,
    solve_implied_constants,
)
from memcost.costs.ledger import (
    ESTIMATE_NOTE,
    as_successors,
    is_estimate,
    latency_table,
    ledger_paths,
    load_ledger,
    price_calls,
    question_latencies,
    with_published,
    workload,
)
from memcost.costs.measured import (
    break_even_by_user_summary,
    cost_per_correct,
    lc_cached_share,
    majority_votes,
    measured_break_even,
    measured_constants,
    per_memory_system,
    question_costs,
    run_judgments,
    stage_costs,
    summary_table,
    token_ratios,
    user_costs,
    write_cost_lines,
)
from memcost.costs.model import (
    PAPER_INGESTION_MULTIPLIER,
    CostConstants,
    break_even_curve,
    break_even_from_rounded_rows,
    break_even_table,
    compare_with_paper,
    cost_difference_grid,
    cumulative_table,
    growing_conversation_series,
    round_table,
    sensitivity_batch,
    sensitivity_cache_discount,
    sensitivity_output_tokens,
    token_vs_dollar_table,
)
