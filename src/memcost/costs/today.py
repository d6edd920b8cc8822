"""Is memory worth it today? The break-even at dated prices with a prompt cache that expires, under
each dataset's own time, across the long-context tier and with a Batch write (notebook 07)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from memcost import paper
from memcost.catalog import CURRENT_PRICE_DATE, PRICE_TABLE_DATE, Price, price_for, price_successor
from memcost.costs.model import CostConstants
from memcost.costs.timeline import (
    DAY,
    HOUR,
    MINUTE,
    PAPER_OUTPUT_TOKENS,
    PAPER_QUESTION_TOKENS,
    PAPER_READ_USD,
    PAPER_WRITE_USD_PER_TOKEN,
    RETENTION_LABELS,
    LongContext,
    Memory,
    back_to_back,
    break_even_of,
    dataset_gaps,
    fixed_gaps,
    from_gaps,
    poisson,
    retention_for,
    sessions,
    timeline,
    timeline_break_even,
)
from memcost.data.benchmark import read_conversation_stats, read_conversations, read_questions
from memcost.paper import EMBEDDING_MODEL, EXTRACTION_MODEL, READER_MODEL
from memcost.paths import RunPaths

_PER_HISTORY_TOKEN = paper.MEASURED["conversations"] * paper.TABLE4_CONTEXT_TOKENS


@dataclass(frozen=True)
class Assumptions:
    """What the cost model assumes beyond prices; defaults are the paper's."""

    output_tokens: float = PAPER_OUTPUT_TOKENS  # paper §3.5: per long-context answer (Tables 4-5)
    question_tokens: float = PAPER_QUESTION_TOKENS  # paper §3.5: whole prompt cached from turn 2
    write_usd_per_token: float = PAPER_WRITE_USD_PER_TOKEN  # paper §3.5: paper write cost per token
    read_usd: float = PAPER_READ_USD  # paper §3.5: paper read cost per question
    # §4.2: 122.6M extraction prompt and 41.6M completion tokens, 1.842M embedding tokens, for
    # 500 histories of 101,601 tokens: the token mix behind the write cost.
    extraction_prompt_per_token: float = (
        paper.MEASURED["extraction_prompt_tokens"] / _PER_HISTORY_TOKEN
    )
    extraction_completion_per_token: float = (
        paper.MEASURED["extraction_completion_tokens"] / _PER_HISTORY_TOKEN
    )
    embedding_tokens_per_fact: float = (  # §4.2: 1.842M tokens for 103,183 facts
        paper.MEASURED["embedding_tokens"] / paper.MEASURED["embedding_facts"]
    )
    # §4.2: 1,046 retrieved fact tokens per question; + ~300 tokens of instructions and the
    # question (this repository's reader prompt, an assumption). The reader's output tokens are
    # then whatever makes the paper's read cost at gpt-5-mini prices (computed, not typed).
    reader_prompt_tokens: float = paper.MEASURED["read_retrieved_tokens_per_question"] + 300
    # §4.2: 103,183 facts for 500 histories of 101,601 tokens (memory grows with the history)
    facts_per_user: float = paper.MEASURED["embedding_facts"] / paper.MEASURED["conversations"]
    exact_cache: bool = True  # paper §3.5: every shared token billed as cached
    batch_write: bool = False  # extraction and embeddings through the Batch API
    flex_answers: bool = False  # long-context answers with Flex processing

    @property
    def embedding_per_token(self) -> float:
        return self.facts_per_user / paper.TABLE4_CONTEXT_TOKENS * self.embedding_tokens_per_fact


PAPER_ASSUMPTIONS = Assumptions()  # the paper's values throughout


@dataclass(frozen=True)
class PriceScenario:
    name: str
    date: str  # YYYY-MM-DD: the price rows in force that day
    lc_model: str
    extraction_model: str
    reader_model: str
    embedding_model: str = EMBEDDING_MODEL
    paper_calibrated: bool = field(default=False)  # use the paper's costs as printed

    def price(self, model: str) -> Price:
        return price_for(model, on=self.date)

    @property
    def label(self) -> str:
        return f"{self.name}: long context {self.lc_model}, prices of {self.date}"


PAPER = PriceScenario(
    "paper", PRICE_TABLE_DATE, "gpt-5-mini", "gpt-5-nano", "gpt-5-mini", paper_calibrated=True
)
CURRENT = PriceScenario(
    "current",
    CURRENT_PRICE_DATE,
    price_successor(READER_MODEL),
    price_successor(EXTRACTION_MODEL),
    price_successor(READER_MODEL),
)
# Everything on the extraction model's successor, the low-cost one: long context and reader too
# (a deployer's cheap option). Named after the model the registry gives, never typed in.
CURRENT_LOW_COST = replace(
    CURRENT,
    name=f"current (all {CURRENT.extraction_model})",
    lc_model=CURRENT.extraction_model,
    reader_model=CURRENT.extraction_model,
)
SCENARIOS: dict[str, PriceScenario] = {s.name: s for s in (PAPER, CURRENT, CURRENT_LOW_COST)}


def _per_million(usd: float) -> str:
    return f"${usd:,.2f}" if round(usd, 2) == usd else f"${usd:g}"


def what_moved(paper_prices: PriceScenario = PAPER, now: PriceScenario = CURRENT) -> str:
    """The price facts behind the break-even's change since the paper, read from the dated rows."""
    old_lc, new_lc = paper_prices.price(paper_prices.lc_model), now.price(now.lc_model)
    old_ex, new_ex = (s.price(s.extraction_model) for s in (paper_prices, now))
    text = (
        f"long context's input price went from {_per_million(old_lc.input)} "
        f"({paper_prices.lc_model}) to {_per_million(new_lc.input)} per 1M tokens "
        f"({now.lc_model}), ×{new_lc.input / old_lc.input:.1f}"
    )
    sold = retention_for(new_lc, default_policy(now)).sold_as
    if sold and new_lc.write_rate(sold) > new_lc.input:
        text += (
            f", and its first turn writes the cache at {_per_million(new_lc.write_rate(sold))} "
            "per 1M tokens"
        )
    return text + (
        f"; extraction's went from {_per_million(old_ex.input)} ({paper_prices.extraction_model})"
        f" to {_per_million(new_ex.input)} ({now.extraction_model}), "
        f"×{new_ex.input / old_ex.input:.1f}"
    )


def scenario(name: str) -> PriceScenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise ValueError(
            f"unknown price scenario {name!r}; known: {', '.join(SCENARIOS)}"
        ) from None


def _write_mix(s: PriceScenario, a: Assumptions, batch: bool) -> float:
    """USD per history token of extraction and embedding at ``s``'s prices (the token mix
    of §4.2)."""
    extract, embed = s.price(s.extraction_model), s.price(s.embedding_model)
    usd = (
        a.extraction_prompt_per_token * extract.input
        + a.extraction_completion_per_token * extract.output
    ) * (extract.batch_rate() if batch else 1.0)
    usd += a.embedding_per_token * embed.input * (embed.batch_rate() if batch else 1.0)
    return usd / 1e6


def reader_output_tokens(a: Assumptions) -> float:
    """Reader output tokens that make the paper's read cost at its reader's prices."""
    p = PAPER.price(PAPER.reader_model)
    return (a.read_usd * 1e6 - a.reader_prompt_tokens * p.input) / p.output


def memory_for(s: PriceScenario, a: Assumptions = PAPER_ASSUMPTIONS) -> Memory:
    """Memory's costs in ``s``: the paper's calibrated costs, re-priced."""
    write = a.write_usd_per_token * _write_mix(s, a, a.batch_write) / _write_mix(PAPER, a, False)
    if s.paper_calibrated:
        read = a.read_usd
    else:  # reader prompts: plain input (its cacheable prefix is instructions only, < 1,024)
        reader = s.price(s.reader_model)
        read = reader.cost(
            prompt_tokens=a.reader_prompt_tokens, completion_tokens=reader_output_tokens(a)
        )
    source = (
        f"{s.name}: write re-priced from the paper's by the §4.2 token mix at "
        f"{s.extraction_model}/{s.embedding_model}{' (Batch API)' if a.batch_write else ''}, "
        f"read at {s.reader_model}, prices of {s.date}"
    )
    return Memory(write_usd_per_token=write, read_usd=read, source=source, price_date=s.date)


def long_context_for(
    s: PriceScenario, policy: str, a: Assumptions = PAPER_ASSUMPTIONS
) -> LongContext:
    return LongContext.on(
        s.price(s.lc_model),
        policy,
        output_tokens=a.output_tokens,
        question_tokens=a.question_tokens,
        exact_cache=a.exact_cache,
        flex=a.flex_answers,
    )


def default_policy(s: PriceScenario) -> str:
    """The paper assumes the history always cached; today's default is in-memory retention."""
    return "always" if s.paper_calibrated else "in_memory"


def constants_for(s: PriceScenario, a: Assumptions = PAPER_ASSUMPTIONS) -> CostConstants:
    """Eq. 1-2's constants for ``s``, back to back under its default policy (the first turn at that
    policy's cache-write price); the timeline's below the long-context tier."""
    lc = long_context_for(s, default_policy(s), a)
    memory = memory_for(s, a)
    return CostConstants(
        write_usd_per_token=memory.write_usd_per_token,
        read_usd=memory.read_usd,
        output_tokens=a.output_tokens,
        cached_share=1.0,
        input_usd_per_mtok=lc.price.write_rate(lc.retention.sold_as),
        cached_input_usd_per_mtok=lc.price.cached_rate,
        output_usd_per_mtok=lc.price.output,
        source=f"{s.label}; {lc.retention.policy} retention (first turn at the write price)",
    )


def run_dataset_time(run: RunPaths) -> tuple[dict[str, dict], dict[str, float], list[str]]:
    """``(gaps per dataset and user, median history tokens per dataset, notes)`` for the datasets
    notebook 00 prepared (one without dated sessions is noted and left out)."""
    gaps, contexts, notes = {}, {}, []
    for ds in run.datasets():
        if not ds.conversations.is_file():
            notes.append(f"{ds.name}: no prepared conversations (notebook 00 has not run)")
            continue
        conversations = read_conversations(ds)
        questions = read_questions(ds) if ds.questions.is_file() else None
        users = dataset_gaps(conversations, questions)
        if not any(len(g) for g in users.values()):
            notes.append(f"{ds.name}: no user has two dated sessions")
            continue
        gaps[ds.name] = users
        try:
            stats = read_conversation_stats(ds)
            contexts[ds.name] = float(np.median(stats["history_tokens"]))
        except FileNotFoundError:
            notes.append(f"{ds.name}: no conversation_stats.parquet; history length unknown")
            gaps.pop(ds.name)
    return gaps, contexts, notes


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
    """Per-question costs of ``s`` for questions at ``times`` (the history growing by
    ``growth_tokens``)."""
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
    """Break-even N of ``s`` for questions at ``times`` on a fixed history."""
    return timeline_break_even(*_billing(s, policy, assumptions), times, context_tokens)


def _billing(
    s: PriceScenario, policy: str | None, assumptions: Assumptions
) -> tuple[LongContext, Memory]:
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
    times = fixed_gaps(max_questions, gap_seconds)
    return scenario_break_even_at(s, context_tokens, times, policy=policy, assumptions=assumptions)


def break_even_table_for(
    s: PriceScenario,
    contexts: Iterable[float],
    *,
    policy: str | None = None,
    assumptions: Assumptions = PAPER_ASSUMPTIONS,
) -> pd.DataFrame:
    """Table 5's layout for ``s`` (back to back), with its price date."""
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
    """Table 4's layout for ``s`` (back to back)."""
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
    """Figure 1's data for ``s``: ``C_LC − C_Mem`` and the break-even per L (NaN beyond the last
    turn)."""
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
    """Break-even N against the gap between questions, per scenario and cache policy (a policy not
    sold gives no row)."""
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
    """Per dataset, scenario and policy: the median user's break-even when questions come with the
    gaps of the user's own dated sessions."""
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
    """Per L: the first and a later turn and the break-even, with the long-context tier and without
    it."""
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
    """The first question whose history exceeds ``threshold``."""
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
    """Break-even at list prices and with the write through the Batch API (answering
    interactive)."""
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
    """The break-evens side by side, each computed: the paper's; today's back to back, one question
    a day, under extended retention; the same on the low-cost successor."""
    low = f"today on {CURRENT_LOW_COST.lc_model}"
    cases = [
        ("paper's break-even", PAPER, "always", 0.0),
        ("today, back to back", CURRENT, "in_memory", 0.0),
        ("today, one question a day", CURRENT, "in_memory", DAY),
        ("today, one question a day, extended retention", CURRENT, "extended", DAY),
        (f"{low}, back to back", CURRENT_LOW_COST, "in_memory", 0.0),
        (f"{low}, one question a day", CURRENT_LOW_COST, "in_memory", DAY),
        (f"{low}, one question a day, extended retention", CURRENT_LOW_COST, "extended", DAY),
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
    """The arrival processes compared, about one question a day but the paper's back to back (a
    Poisson draw is one seeded user)."""
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
    """Break-even per arrival process, scenario and policy: the median over ``seeds`` users."""
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
