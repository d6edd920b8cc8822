"""A simulated prompt cache for offline runs (notebook 03, section 7).

The offline backend has no provider, so nothing reports cached tokens. This module replays the
planned prompts through :class:`memcost.catalog.PrefixCache`, the one prefix-cache rule the
local test server also uses (retention, a prefix of at least 1,024 tokens grown in 128-token
steps, overflow above a number of requests a minute per prefix), and reports what a provider
following that rule *would* have served from its cache. Every number here is a **simulation**:
it never enters the ledger or the billed usage, and every table it makes says so.

The schedule it assumes is the dispatcher's: the questions about one conversation go one after
another, ``gap_s`` seconds apart (the first alone, then the rest), and each conversation is its
own prefix (the dispatcher sends the conversation as ``prompt_cache_key``), replayed in its own
cache. Each cache remembers the conversation's latest prompt (``keep=1``): every earlier prompt
of a conversation holds the same history, so the latest holds everything a later question can
reuse, and a lookup compares one prompt instead of all of them (a 26k-token LoCoMo conversation
with 200 questions would otherwise take minutes).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

from memcost.catalog import (
    CACHED_INPUT_MIN_TOKENS,
    CACHED_INPUT_STEP_TOKENS,
    MAX_REQUESTS_PER_PREFIX_PER_MINUTE,
    PrefixCache,
    shared_prefix,
)
from memcost.longctx.plan import Plan, Planned
from memcost.longctx.prompt import HEAD, INSTRUCTIONS, PROMPT
from memcost.text import encode

SIMULATION_LABEL = (
    "SIMULATED (offline): memcost.catalog's prompt-cache rule, not a provider's report"
)
DEFAULT_GAP_S = 60.0 / MAX_REQUESTS_PER_PREFIX_PER_MINUTE  # the dispatcher's pace per prefix


class PromptIds:
    """o200k token ids of plans' prompts, from parts encoded once: the system message and the
    template's fixed text once, each history once per context, each question block once. The
    parts end where o200k always splits (as :mod:`memcost.longctx.plan` counts them), so the
    concatenation equals the ids of the whole prompt."""

    def __init__(self) -> None:
        self._fixed = (
            encode(PROMPT.system),
            encode(HEAD),
            encode(INSTRUCTIONS),
        )
        self._contexts: dict[tuple, list[int]] = {}

    def __call__(self, plan: Plan) -> list[int]:
        system, head, instructions = self._fixed
        key = plan.context.key
        if key not in self._contexts:
            self._contexts = {key: encode(plan.context.text)}  # one conversation at a time
        return [
            *system,
            *head,
            *self._contexts[key],
            *instructions,
            *encode(plan.question_block),
        ]


@dataclass(frozen=True)
class CacheStep:
    """One question of one conversation, through the simulated cache."""

    position: int  # 1 for the conversation's first question
    question_id: str
    arrival_s: float
    prompt_tokens: int
    shared_tokens: int  # leading tokens identical to the previous question's prompt
    cached_tokens: int  # what the rule serves from the cache
    reason: str


def _reason(
    position: int, prompt: int, shared: int, cached: int, elapsed: float, cache: PrefixCache
) -> str:
    """Why the rule served ``cached`` tokens (read off its result and its settings)."""
    if position == 1:
        kept = (
            "remembered"
            if prompt >= CACHED_INPUT_MIN_TOKENS
            else (f"not remembered: under {CACHED_INPUT_MIN_TOKENS:,} tokens")
        )
        return f"first question: nothing sent before it ({kept})"
    if cached:
        steps = (cached - CACHED_INPUT_MIN_TOKENS) // CACHED_INPUT_STEP_TOKENS
        return (
            f"hit: {shared:,} shared tokens, rounded down to {CACHED_INPUT_MIN_TOKENS:,} + "
            f"{steps} × {CACHED_INPUT_STEP_TOKENS}"
        )
    if shared < CACHED_INPUT_MIN_TOKENS:
        return f"miss: the shared prefix ({shared:,}) is under {CACHED_INPUT_MIN_TOKENS:,} tokens"
    if elapsed > cache.retention_s:
        return (
            f"miss: {elapsed:,.0f} s since the last use, over the {cache.retention_s:,.0f} s kept"
        )
    return (
        f"miss: over {cache.max_per_minute} requests a minute for this prefix, sent to a "
        "machine that has not seen it"
    )


def simulate_conversation(
    plans: Sequence[Plan],
    *,
    gap_s: float = DEFAULT_GAP_S,
    ids: PromptIds | None = None,
    cache: PrefixCache | None = None,
) -> list[CacheStep]:
    """The questions of one conversation (one system), ``gap_s`` seconds apart, through one
    :class:`PrefixCache`: what it serves each of them, and why."""
    if gap_s < 0:
        raise ValueError(f"gap_s must be at least 0 seconds, got {gap_s}")
    if len(plans) == 1 and cache is None:
        # asked once (every LongMemEval history): a fresh cache has nothing to serve the first
        # prompt, so there is no need to tokenise a 100k-token history to learn that
        plan = plans[0]
        return [
            CacheStep(
                1,
                plan.question_id,
                0.0,
                plan.prompt_tokens,
                0,
                0,
                _reason(1, plan.prompt_tokens, 0, 0, gap_s, PrefixCache()),
            )
        ]
    ids = ids or PromptIds()
    cache = cache or PrefixCache(keep=1)
    key = plans[0].conversation_id if plans else None
    steps: list[CacheStep] = []
    previous: list[int] = []
    for i, plan in enumerate(plans):
        prompt = ids(plan)
        now = i * gap_s
        cached = cache.lookup(prompt, now, key)
        shared = shared_prefix(previous, prompt)
        steps.append(
            CacheStep(
                i + 1,
                plan.question_id,
                now,
                len(prompt),
                shared,
                cached,
                _reason(i + 1, len(prompt), shared, cached, gap_s, cache),
            )
        )
        previous = prompt
    return steps


def _by_conversation(plans: Iterable[Plan], system: str) -> dict[str, list[Plan]]:
    groups: dict[str, list[Plan]] = {}
    for p in plans:
        if p.system == system:
            groups.setdefault(p.conversation_id, []).append(p)
    return groups


def simulate_prompt_cache(
    planned: Planned, *, systems: Sequence[str] | None = None, gap_s: float = DEFAULT_GAP_S
) -> pd.DataFrame:
    """Every planned question of ``systems`` (default: all) through the simulated cache, one
    row per question: system, conversation, position, arrival, prompt, shared and simulated
    cached tokens, and the reason. Each (system, conversation) is its own fresh cache."""
    ids = PromptIds()
    rows = []
    for system in systems or planned.systems:
        for conversation, plans in _by_conversation(planned.plans, system).items():
            for step in simulate_conversation(plans, gap_s=gap_s, ids=ids):
                rows.append({"system": system, "conversation_id": conversation, **step.__dict__})
    frame = pd.DataFrame(rows)
    return frame.rename(columns={"cached_tokens": "simulated_cached_tokens"})


def simulated_cache_summary(steps: pd.DataFrame) -> pd.DataFrame:
    """Per system: questions, prompt tokens, simulated cached tokens, their share of all input
    tokens and of the later questions' (the cost model assumes 100% of those), labelled."""
    rows = []
    for system, part in steps.groupby("system", sort=False):
        later = part.loc[part["position"] > 1]
        total, later_total = int(part["prompt_tokens"].sum()), int(later["prompt_tokens"].sum())
        cached = int(part["simulated_cached_tokens"].sum())
        rows.append(
            {
                "system": system,
                "questions": len(part),
                "conversations": part["conversation_id"].nunique(),
                "prompt_tokens": total,
                "simulated_cached_tokens": cached,
                "simulated_cached_share": cached / total if total else float("nan"),
                "later_questions": len(later),
                "simulated_share_after_first": (
                    int(later["simulated_cached_tokens"].sum()) / later_total
                    if later_total
                    else float("nan")
                ),
                "source": SIMULATION_LABEL,
            }
        )
    return pd.DataFrame(rows)


__all__ = [
    "DEFAULT_GAP_S",
    "SIMULATION_LABEL",
    "PromptIds",
    "CacheStep",
    "simulate_conversation",
    "simulate_prompt_cache",
    "simulated_cache_summary",
]
