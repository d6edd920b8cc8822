"""Long context (notebook 03, paper §3.2): the whole history in every prompt, and the baselines."""

# ruff: noqa: F401 - the names the notebooks use
from memcost.longctx.cache import (
    SIMULATION_LABEL,
    answers_summary,
    load_system_answers,
    prefix_share,
    shared_prefixes,
    simulate_conversation,
    simulate_prompt_cache,
    simulated_cache_summary,
    step_metrics,
)
from memcost.longctx.history import (
    PROMPT,
    ContextOverflow,
    build_histories,
    context_limits,
    history_table,
)
from memcost.longctx.plan import answer_questions, messages_for, plan_questions, prompt_size_table
