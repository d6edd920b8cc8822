"""Is memory worth it today? Notebook 05's section 7: the break-even at today's prices, with
cache expiry, under each dataset's own time structure, across the long-context tier, and with
Batch prices for the write. Every table names the price date it used.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from memcost.catalog import Price
from memcost.today.arrivals import back_to_back, fixed_gaps, from_gaps, poisson, sessions
from memcost.today.retention import DAY, HOUR, MINUTE, RETENTION_LABELS
from memcost.today.scenarios import (
    CURRENT,
    CURRENT_LUNA,
    PAPER,
    PAPER_ASSUMPTIONS,
    Assumptions,
    PriceScenario,
    default_policy,
    long_context_for,
    memory_for,
)
from memcost.today.timeline import (
    LongContext,
    Memory,
    break_even_of,
    timeline,
    timeline_break_even,
)

MAX_QUESTIONS = 1_000  # break-even searched up to this many questions (None beyond)


def scenario_timeline(
    s: PriceScenario,
    context_tokens: float,
    times: Sequence[float],
    *,
    policy: str | None = None,
    assumptions: Assumptions = PAPER_ASSUMPTIONS,
    growth_tokens: float = 0.0,
) -> pd.DataFrame:
    """Per-question costs of scenario ``s`` for questions at ``times`` (history grows by
    ``growth_tokens`` between questions)."""
    history = context_tokens + growth_tokens * np.arange(len(times))
    return timeline(*_billing(s, policy, assumptions), times, history)


def scenario_break_even_at(
    s: PriceScenario,
    context_tokens: float,
    times: Sequence[float],
    *,
    policy: str | None = None,
    assumptions: Assumptions = PAPER_ASSUMPTIONS,
) -> int | None:
    """Break-even N of scenario ``s`` for questions at ``times`` on a fixed history (``None``:
    not within them); what :func:`scenario_timeline` would give, without the questions after."""
    return timeline_break_even(*_billing(s, policy, assumptions), times, context_tokens)


def _billing(
    s: PriceScenario, policy: str | None, assumptions: Assumptions
) -> tuple[LongContext, Memory]:
    """How scenario ``s`` bills a long-context question (under ``policy``, else the scenario's
    own) and memory."""
    return long_context_for(s, policy or default_policy(s), assumptions), memory_for(s, assumptions)


def scenario_break_even(
    s: PriceScenario,
    context_tokens: float,
    *,
    gap_seconds: float = 0.0,
    policy: str | None = None,
    assumptions: Assumptions = PAPER_ASSUMPTIONS,
    max_questions: int = MAX_QUESTIONS,
) -> int | None:
    """Break-even N of one user whose questions come ``gap_seconds`` apart."""
    times = fixed_gaps(max_questions, gap_seconds)
    return scenario_break_even_at(s, context_tokens, times, policy=policy, assumptions=assumptions)


def break_even_table_for(
    s: PriceScenario,
    contexts: Iterable[float],
    *,
    policy: str | None = None,
    assumptions: Assumptions = PAPER_ASSUMPTIONS,
) -> pd.DataFrame:
    """Table 5's layout for scenario ``s`` (back-to-back questions), with its price date."""
    rows = []
    policy = policy or default_policy(s)
    for L in contexts:
        frame = scenario_timeline(
            s, L, back_to_back(MAX_QUESTIONS), policy=policy, assumptions=assumptions
        )
        rows.append(
            {
                "scenario": s.name,
                "lc_model": s.lc_model,
                "price_date": s.date,
                "policy": policy,
                "context_tokens": int(L),
                "write_usd": float(frame["memory_usd"].iloc[0] - frame["memory_usd"].iloc[1]),
                "read_usd": float(frame["memory_usd"].iloc[1]),
                "lc_turn1_usd": float(frame["long_context_usd"].iloc[0]),
                "lc_turn_n_usd": float(frame["long_context_usd"].iloc[1]),
                "break_even_n": break_even_of(frame),
            }
        )
    return pd.DataFrame(rows)


def cumulative_table_for(
    s: PriceScenario,
    context_tokens: float,
    turns: Iterable[int],
    *,
    policy: str | None = None,
    assumptions: Assumptions = PAPER_ASSUMPTIONS,
) -> pd.DataFrame:
    """Table 4's layout for scenario ``s`` (back-to-back questions)."""
    turns = np.asarray(list(turns), dtype=int)
    frame = scenario_timeline(
        s, context_tokens, back_to_back(int(turns.max())), policy=policy, assumptions=assumptions
    )
    picked = frame.set_index("question").loc[turns]
    return pd.DataFrame(
        {
            "scenario": s.name,
            "price_date": s.date,
            "n_turns": turns,
            "memory_usd": picked["memory_cumulative_usd"].to_numpy(),
            "long_context_usd": picked["long_context_cumulative_usd"].to_numpy(),
        }
    )


def cost_difference_grid_for(
    s: PriceScenario,
    contexts: Sequence[float],
    turns: Sequence[int],
    *,
    policy: str | None = None,
    assumptions: Assumptions = PAPER_ASSUMPTIONS,
) -> tuple[np.ndarray, np.ndarray]:
    """Figure 1's data for scenario ``s``: ``C_LC − C_Mem`` (rows = turns, columns = L) and the
    break-even per L (NaN beyond the last turn)."""
    n = int(max(turns))
    columns, boundary = [], []
    for L in contexts:
        frame = scenario_timeline(s, L, back_to_back(n), policy=policy, assumptions=assumptions)
        diff = frame["long_context_cumulative_usd"] - frame["memory_cumulative_usd"]
        columns.append(diff.to_numpy()[np.asarray(turns) - 1])
        be = break_even_of(frame)
        boundary.append(np.nan if be is None else be)
    return np.column_stack(columns), np.asarray(boundary, dtype=float)


def gap_break_even_table(
    scenarios: Sequence[PriceScenario],
    policies: Sequence[str],
    gaps_seconds: Sequence[float],
    context_tokens: float,
    *,
    assumptions: Assumptions = PAPER_ASSUMPTIONS,
) -> pd.DataFrame:
    """Break-even N against the gap between questions, per scenario and cache policy (a policy
    a model's price row does not sell gives no row)."""
    rows = []
    for s in scenarios:
        for policy in policies:
            for gap in gaps_seconds:
                try:
                    be = scenario_break_even(
                        s, context_tokens, gap_seconds=gap, policy=policy, assumptions=assumptions
                    )
                except ValueError:
                    break  # this retention is not sold on this model
                rows.append(
                    {
                        "scenario": s.name,
                        "price_date": s.date,
                        "lc_model": s.lc_model,
                        "policy": policy,
                        "policy_label": RETENTION_LABELS[policy],
                        "context_tokens": int(context_tokens),
                        "gap_seconds": float(gap),
                        "break_even_n": be,
                    }
                )
    return pd.DataFrame(rows)


def dataset_break_even_table(
    gaps_by_dataset: Mapping[str, Mapping[str, np.ndarray]],
    scenarios: Sequence[PriceScenario],
    policies: Sequence[str],
    context_tokens: float | Mapping[str, float],
    *,
    max_questions: int = 200,
    assumptions: Assumptions = PAPER_ASSUMPTIONS,
) -> pd.DataFrame:
    """Per dataset, scenario and policy: the median over users of each user's break-even when
    questions come with the gaps of that user's own dated sessions (repeated in order)."""
    rows = []
    for dataset, users in gaps_by_dataset.items():
        usable = {u: g for u, g in users.items() if len(g)}
        L = context_tokens.get(dataset) if isinstance(context_tokens, Mapping) else context_tokens
        if not usable or L is None:
            continue
        all_gaps = np.concatenate(list(usable.values()))
        for s in scenarios:
            for policy in policies:
                try:
                    values = [
                        scenario_break_even_at(
                            s,
                            L,
                            from_gaps(max_questions, g),
                            policy=policy,
                            assumptions=assumptions,
                        )
                        for g in usable.values()
                    ]
                except ValueError:
                    continue
                found = [v for v in values if v is not None]
                rows.append(
                    {
                        "dataset": dataset,
                        "scenario": s.name,
                        "price_date": s.date,
                        "policy": policy,
                        "users": len(values),
                        "context_tokens": int(L),
                        "median_gap_hours": float(np.median(all_gaps)) / 3600,
                        "break_even_median": float(np.median(found)) if found else np.nan,
                        "break_even_min": min(found) if found else None,
                        "break_even_max": max(found) if found else None,
                        "users_never": len(values) - len(found),
                    }
                )
    return pd.DataFrame(rows)


def tier_table(
    s: PriceScenario,
    contexts: Sequence[float],
    *,
    policy: str | None = None,
    assumptions: Assumptions = PAPER_ASSUMPTIONS,
) -> pd.DataFrame:
    """Per L: the first long-context turn, a later turn and the break-even, with the price
    row's long-context tier and without it (what the tier costs)."""
    rows = []
    price = s.price(s.lc_model)
    flat = replace(s, name=f"{s.name} without tier")
    for L in contexts:
        with_tier = break_even_table_for(s, [L], policy=policy, assumptions=assumptions).iloc[0]
        without = _without_tier(flat, price, L, policy, assumptions)
        rows.append(
            {
                "scenario": s.name,
                "price_date": s.date,
                "context_tokens": int(L),
                "tier_threshold": price.long_context_threshold,
                "above_tier": bool(price.tier_multipliers(L) != (1.0, 1.0)),
                "lc_turn1_usd": with_tier["lc_turn1_usd"],
                "lc_turn_n_usd": with_tier["lc_turn_n_usd"],
                "break_even_n": with_tier["break_even_n"],
                "lc_turn1_usd_no_tier": without["lc_turn1_usd"],
                "break_even_n_no_tier": without["break_even_n"],
            }
        )
    return pd.DataFrame(rows)


def _without_tier(
    s: PriceScenario, price: Price, L: float, policy: str | None, assumptions: Assumptions
) -> pd.Series:
    lc = replace(
        long_context_for(s, policy or default_policy(s), assumptions),
        price=replace(price, long_context_threshold=None),
    )
    frame = timeline(lc, memory_for(s, assumptions), back_to_back(MAX_QUESTIONS), L)
    return pd.Series(
        {"lc_turn1_usd": frame["long_context_usd"].iloc[0], "break_even_n": break_even_of(frame)}
    )


def tier_crossing(context_tokens: float, growth_tokens: float, threshold: int) -> int | None:
    """The first question whose history exceeds ``threshold`` when it starts at
    ``context_tokens`` and grows by ``growth_tokens`` per question."""
    if context_tokens > threshold:
        return 1
    if growth_tokens <= 0:
        return None
    return int(np.floor((threshold - context_tokens) / growth_tokens)) + 2


def batch_table(
    scenarios: Sequence[PriceScenario],
    contexts: Sequence[float],
    assumptions: Assumptions = PAPER_ASSUMPTIONS,
) -> pd.DataFrame:
    """Break-even with list prices and with the write (extraction + embeddings) through the
    Batch API; answering stays interactive. (Judging is evaluation, not a per-user cost.)"""
    rows = []
    for s in scenarios:
        for label, variant in (
            ("list prices", replace(assumptions, batch_write=False)),
            ("batch write", replace(assumptions, batch_write=True)),
        ):
            table = break_even_table_for(s, contexts, assumptions=variant)
            for r in table.itertuples():
                rows.append(
                    {
                        "scenario": s.name,
                        "price_date": s.date,
                        "variant": label,
                        "context_tokens": r.context_tokens,
                        "write_usd": r.write_usd,
                        "break_even_n": r.break_even_n,
                    }
                )
    return pd.DataFrame(rows)


def headline_table(
    context_tokens: float = 100_000, assumptions: Assumptions = PAPER_ASSUMPTIONS
) -> pd.DataFrame:
    """The four break-evens side by side, each computed: the paper's; today's back to back;
    today's with one question a day (in-memory retention); the same under extended retention.
    The same three cases follow with everything on gpt-6-luna (a retention the model does not
    sell gives no number and says so)."""
    cases = [
        ("paper's break-even", PAPER, "always", 0.0),
        ("today, back to back", CURRENT, "in_memory", 0.0),
        ("today, one question a day", CURRENT, "in_memory", DAY),
        ("today, one question a day, extended retention", CURRENT, "extended", DAY),
        ("today on gpt-6-luna, back to back", CURRENT_LUNA, "in_memory", 0.0),
        ("today on gpt-6-luna, one question a day", CURRENT_LUNA, "in_memory", DAY),
        (
            "today on gpt-6-luna, one question a day, extended retention",
            CURRENT_LUNA,
            "extended",
            DAY,
        ),
    ]
    rows = []
    for label, s, policy, gap in cases:
        try:
            be, note = (
                scenario_break_even(
                    s, context_tokens, gap_seconds=gap, policy=policy, assumptions=assumptions
                ),
                "",
            )
        except ValueError as error:  # the retention is not sold on this model
            be, note = None, str(error).split(" (source")[0]
        rows.append(
            {
                "case": label,
                "scenario": s.name,
                "lc_model": s.lc_model,
                "price_date": s.date,
                "policy": policy,
                "gap_seconds": gap,
                "context_tokens": int(context_tokens),
                "break_even_n": be,
                "note": note,
            }
        )
    return pd.DataFrame(rows)


def arrival_processes(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """The arrival processes compared in the notebook, all at about one question a day except
    the paper's back-to-back case (a Poisson draw is one seeded user)."""
    return {
        "back to back (the paper)": back_to_back(n),
        "a question every hour": fixed_gaps(n, HOUR),
        "a question a day": fixed_gaps(n, DAY),
        "Poisson, 1 a day": poisson(n, 1.0, seed),
        "Poisson, 24 a day": poisson(n, 24.0, seed),
        "sessions of 3 (1 min apart), a day apart": sessions(n, 3, DAY, MINUTE),
    }


def arrival_table(
    scenarios: Sequence[PriceScenario],
    policies: Sequence[str],
    context_tokens: float,
    *,
    seeds: int = 20,
    max_questions: int = 300,
    assumptions: Assumptions = PAPER_ASSUMPTIONS,
) -> pd.DataFrame:
    """Break-even per arrival process, scenario and policy: the median over ``seeds`` users
    (only the Poisson processes differ between seeds)."""
    rows = []
    for s in scenarios:
        for policy in policies:
            try:
                long_context_for(s, policy, assumptions)
            except ValueError:
                continue  # this retention is not sold on this model
            found: dict[str, list] = {}
            for seed in range(seeds):
                for name, times in arrival_processes(max_questions, seed).items():
                    if seed and not name.startswith("Poisson"):
                        continue
                    found.setdefault(name, []).append(
                        scenario_break_even_at(
                            s, context_tokens, times, policy=policy, assumptions=assumptions
                        )
                    )
            for name, values in found.items():
                hits = [v for v in values if v is not None]
                rows.append(
                    {
                        "scenario": s.name,
                        "price_date": s.date,
                        "policy": policy,
                        "arrivals": name,
                        "context_tokens": int(context_tokens),
                        "users": len(values),
                        "break_even_median": float(np.median(hits)) if hits else np.nan,
                        "users_never": len(values) - len(hits),
                    }
                )
    return pd.DataFrame(rows)
