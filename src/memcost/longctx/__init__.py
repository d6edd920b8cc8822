"""Long-context answering (notebook 03, study §3.2): the whole history in every prompt.

Each question is answered by a model that reads the user's entire history, rendered with session
dates and speakers, followed by the instructions, the question's date and the question. Three
baselines share the prompt and the answer-file format and differ only in the history part: a
rolling window of the last W turns (study §9), no context (a floor, study §10) and an oracle
that keeps only the sessions holding the evidence (a ceiling).

The files follow the notebook: ``history`` (render and count once), ``prompt`` (history first,
question last), ``cache`` (the shared prefix and what the cache serves), ``context`` (the four
kinds of context, context limits), ``plan`` (every prompt sized before any call), ``answer``
(requests and answer records), ``simulated_cache`` (offline: what the one prefix-cache rule
would have served), ``summary`` (what the notebook reports). The offline method is
:mod:`memcost.offline`; the figure is :mod:`memcost.plots.longctx`.
"""

from memcost.data import read_prepared as load_prepared
from memcost.longctx.answer import (
    STAGE,
    answer_questions,
    answer_record,
    build_request,
    group_plans,
    messages_for,
)
from memcost.longctx.cache import PrefixShare, cacheable_tokens, prefix_share, prompt_token_ids
from memcost.longctx.context import (
    BASELINES,
    FORMAT_OVERHEAD_TOKENS,
    GENERATION_KEYS,
    KINDS,
    OVERFLOW_MODES,
    PAPER_GENERATION,
    Context,
    ContextOverflow,
    context_limits,
    full_context,
    generation_settings,
    no_context,
    oracle_context,
    oracle_sessions,
    prompt_limit,
    sessions_context,
    truncate_oldest,
    window_contexts,
)
from memcost.longctx.history import (
    History,
    HistoryTurn,
    SessionBlock,
    build_histories,
    history_table,
)
from memcost.longctx.plan import Plan, Planned, fit_table, plan_questions, prompt_size_table
from memcost.longctx.prompt import PROMPT, option_letter, question_block, shown_options
from memcost.longctx.simulated_cache import (
    SIMULATION_LABEL,
    PromptIds,
    simulate_conversation,
    simulate_prompt_cache,
    simulated_cache_summary,
)
from memcost.longctx.summary import (
    answers_summary,
    load_system_answers,
    percentile,
    shared_prefixes,
    step_metrics,
)
from memcost.offline import (
    NO_HISTORY_ANSWER,
    NOT_MENTIONED,
    UNDECIDED,
    ExtractiveAnswerer,
    OfflineJob,
)

__all__ = [
    "BASELINES",
    "FORMAT_OVERHEAD_TOKENS",
    "GENERATION_KEYS",
    "KINDS",
    "NOT_MENTIONED",
    "NO_HISTORY_ANSWER",
    "OVERFLOW_MODES",
    "PAPER_GENERATION",
    "PROMPT",
    "SIMULATION_LABEL",
    "STAGE",
    "UNDECIDED",
    "Context",
    "ContextOverflow",
    "ExtractiveAnswerer",
    "History",
    "OfflineJob",
    "Plan",
    "Planned",
    "PrefixShare",
    "PromptIds",
    "SessionBlock",
    "HistoryTurn",
    "answer_questions",
    "answer_record",
    "answers_summary",
    "build_histories",
    "build_request",
    "cacheable_tokens",
    "context_limits",
    "fit_table",
    "full_context",
    "generation_settings",
    "group_plans",
    "history_table",
    "load_prepared",
    "load_system_answers",
    "messages_for",
    "no_context",
    "option_letter",
    "oracle_context",
    "oracle_sessions",
    "percentile",
    "plan_questions",
    "prefix_share",
    "prompt_limit",
    "prompt_size_table",
    "prompt_token_ids",
    "question_block",
    "sessions_context",
    "shared_prefixes",
    "shown_options",
    "simulate_conversation",
    "simulate_prompt_cache",
    "simulated_cache_summary",
    "step_metrics",
    "truncate_oldest",
    "window_contexts",
]
