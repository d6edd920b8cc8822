"""The cost model with time in it (notebook 07): questions arriving at given times, a prompt cache
that expires."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from memcost.catalog import Price
from memcost.catalog import cacheable as _provider_cacheable
from memcost.costs.break_even import first_break_even

MINUTE = 60.0
HOUR = 3_600.0
DAY = 86_400.0
WEEK = 7 * DAY

# The policies a deployer can choose (and the paper's assumption).
RETENTION_POLICIES: tuple[str, ...] = ("always", "in_memory", "extended", "none")
RETENTION_LABELS = {
    "always": "always cached (the paper's assumption, §3.5)",
    "in_memory": "in-memory retention",
    "extended": "extended retention",
    "none": "no caching",
}


@dataclass(frozen=True)
class Retention:
    policy: str  # one of RETENTION_POLICIES
    window_seconds: float  # an idle prefix lives this long (inf: forever; 0: never cached)
    sold_as: str  # the cache-write price that applies: "30m" | "12h" | "24h" | "" (plain input)

    @property
    def caches(self) -> bool:
        return self.window_seconds > 0


def retention_for(price: Price, policy: str) -> Retention:
    """The retention ``policy`` on ``price``'s row: its window and cache-write price."""
    if policy == "always":
        return Retention(policy, math.inf, "")
    if policy == "none":
        return Retention(policy, 0.0, "")
    if policy == "in_memory":
        sold = "30m" if price.cache_write_30m is not None else ""
        return Retention(policy, price.in_memory_retention_minutes * MINUTE, sold)
    if policy == "extended":
        hours = price.extended_retention_hours
        if hours is None:
            raise ValueError(
                f"{price.model} ({price.date}): no extended cache retention is sold "
                f"(source: {price.source})"
            )
        sold = "12h" if price.cache_write_12h is not None else "24h"
        if sold == "24h" and price.cache_write_24h is None:
            sold = ""  # extended retention without a write premium (GPT-5 family)
        return Retention(policy, hours * HOUR, sold)
    raise ValueError(f"unknown cache retention {policy!r}; known: {', '.join(RETENTION_POLICIES)}")


def is_alive(last_request_time: float | None, now: float, retention: Retention) -> bool:
    """Whether a prefix last used at ``last_request_time`` is still cached at ``now`` (a gap as long
    as the window still hits)."""
    if last_request_time is None or not retention.caches:
        return False
    return now - last_request_time <= retention.window_seconds


def cacheable_tokens(shared_tokens: float, *, exact: bool = False) -> float:
    """Tokens of a shared prefix the cache serves: the provider's grid, or (``exact``) every one, as
    the paper's model bills them."""
    if exact:
        return float(shared_tokens)
    return float(_provider_cacheable(int(shared_tokens)))


ARRIVAL_PROCESSES = ("back_to_back", "fixed_gap", "poisson", "sessions", "dataset")


def back_to_back(n: int) -> np.ndarray:
    """All questions at once (the paper's case)."""
    return np.zeros(int(n))


def fixed_gaps(n: int, gap_seconds: float) -> np.ndarray:
    return np.arange(int(n), dtype=float) * float(gap_seconds)


def poisson(n: int, rate_per_day: float, seed: int = 0) -> np.ndarray:
    if rate_per_day <= 0:
        raise ValueError(f"rate_per_day must be positive, not {rate_per_day}")
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(DAY / rate_per_day, size=max(int(n) - 1, 0))
    return np.concatenate([[0.0], np.cumsum(gaps)])


def sessions(
    n: int, per_session: int, gap_seconds: float, within_seconds: float = MINUTE
) -> np.ndarray:
    """Sessions of ``per_session`` questions ``within_seconds`` apart, ``gap_seconds`` between
    sessions."""
    if per_session < 1:
        raise ValueError(f"per_session must be at least 1, not {per_session}")
    gaps = [within_seconds if i % per_session else gap_seconds for i in range(1, int(n))]
    return np.concatenate([[0.0], np.cumsum(gaps)]) if n > 0 else np.zeros(0)


def from_gaps(n: int, gaps_seconds: Sequence[float]) -> np.ndarray:
    """``n`` arrivals whose gaps repeat ``gaps_seconds`` (a user's own rhythm)."""
    gaps = np.asarray(gaps_seconds, dtype=float)
    if gaps.size == 0:
        raise ValueError("no gaps to repeat: a user with a single dated session has none")
    reps = np.resize(gaps, max(int(n) - 1, 0))
    return np.concatenate([[0.0], np.cumsum(reps)])


def _seconds(values: pd.Series) -> np.ndarray:
    stamps = pd.to_datetime(values, errors="coerce").dropna().sort_values()
    return (stamps - stamps.iloc[0]).dt.total_seconds().to_numpy() if len(stamps) else np.zeros(0)


def dataset_gaps(conversations: pd.DataFrame, questions: pd.DataFrame | None = None) -> dict:
    """Per user, the gaps in seconds between its dated sessions, then to its question date where
    given (LongMemEval)."""
    sessions_ = (
        conversations.dropna(subset=["session_datetime"])
        .groupby(["conversation_id", "session_index"], sort=False)["session_datetime"]
        .first()
        .reset_index()
    )
    dated_questions = {}
    if questions is not None and "question_date" in questions:
        dated = questions.dropna(subset=["question_date"])
        dated_questions = dated.groupby("conversation_id")["question_date"].max().to_dict()
    out = {}
    for user, group in sessions_.groupby("conversation_id", sort=False):
        stamps = list(group["session_datetime"])
        if user in dated_questions:
            stamps.append(dated_questions[user])
        offsets = _seconds(pd.Series(stamps))
        gaps = np.diff(offsets)
        out[str(user)] = gaps[gaps >= 0]
    return out


PAPER_OUTPUT_TOKENS = 527.0  # §3.5: output tokens per long-context answer implied by Tables 4-5
PAPER_QUESTION_TOKENS = 0.0  # §3.5: Tables 4-5 bill the whole prompt as cached from turn 2
PAPER_WRITE_USD_PER_TOKEN = 4.296e-7  # §3.5: Table 5 write column ÷ L (extraction + embeddings)
PAPER_READ_USD = 0.001317  # §3.5: Table 4 memory column's slope (one question from memory)
BREAK_EVEN_FIRST_PREFIX = 32  # questions priced before the first look for a break-even


@dataclass(frozen=True)
class LongContext:
    price: Price  # the long-context model's dated price row
    retention: Retention  # the cache policy (window and write price)
    output_tokens: float = PAPER_OUTPUT_TOKENS  # per answer, reasoning included (§3.5)
    question_tokens: float = PAPER_QUESTION_TOKENS  # uncached tokens after the history (§3.5: 0)
    exact_cache: bool = True  # §3.5: every shared token cached (False: 1,024/128-token grid)
    flex: bool = False  # Flex processing (half price, slower; no cache-write price)

    @classmethod
    def on(cls, price: Price, policy: str, **values: Any) -> LongContext:
        return cls(price=price, retention=retention_for(price, policy), **values)


@dataclass(frozen=True)
class Memory:
    write_usd_per_token: float = PAPER_WRITE_USD_PER_TOKEN  # extraction + update + embeddings
    read_usd: float = PAPER_READ_USD  # retrieval + reader call, per question
    source: str = "paper constants implied by Tables 4-5 (§3.5)"
    price_date: str = ""  # the price rows these costs were computed with


def long_context_requests(
    setup: LongContext, times: Sequence[float], history_tokens: Sequence[float]
) -> pd.DataFrame:
    return pd.DataFrame(_long_context_columns(setup, times, history_tokens))


def _long_context_columns(
    setup: LongContext, times: Sequence[float], history_tokens: Sequence[float]
) -> dict[str, np.ndarray]:
    times = np.asarray(times, dtype=float)
    history = np.broadcast_to(np.asarray(history_tokens, dtype=float), times.shape)
    n = len(times)
    prompt = history + setup.question_tokens
    alive, tier = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    cached, written, usd = np.zeros(n), np.zeros(n), np.zeros(n)
    # A user's requests repeat a few shapes (back-to-back questions on a fixed history are all
    # alike from the second on): each shape is priced once.
    priced: dict[tuple[float, float, float], tuple[float, bool]] = {}
    last, previous_history = None, 0.0
    for i in range(n):
        alive[i] = is_alive(last, times[i], setup.retention)
        if alive[i]:
            cached[i] = cacheable_tokens(min(previous_history, prompt[i]), exact=setup.exact_cache)
        if setup.retention.caches:
            written[i] = max(cacheable_tokens(prompt[i], exact=setup.exact_cache) - cached[i], 0.0)
        shape = (prompt[i], cached[i], written[i])
        if shape not in priced:
            priced[shape] = (
                setup.price.cost(
                    prompt_tokens=prompt[i],
                    cached_prompt_tokens=cached[i],
                    completion_tokens=setup.output_tokens,
                    cache_write_tokens=written[i],
                    retention=setup.retention.sold_as,
                    flex=setup.flex,
                ),
                setup.price.tier_multipliers(prompt[i]) != (1.0, 1.0),
            )
        usd[i], tier[i] = priced[shape]
        last, previous_history = times[i], history[i]
    return {
        "time_s": times,
        "history_tokens": np.array(history),
        "prompt_tokens": prompt,
        "cache_alive": alive,
        "cached_tokens": cached,
        "written_tokens": written,
        "plain_tokens": prompt - cached - written,
        "long_context_tier": tier,
        "usd": usd,
    }


def memory_requests(memory: Memory, history_tokens: Sequence[float]) -> np.ndarray:
    """Per question: the write of the history not yet ingested plus one read."""
    history = np.asarray(history_tokens, dtype=float)
    new = np.diff(history, prepend=0.0)
    return memory.write_usd_per_token * new + memory.read_usd


def timeline(
    setup: LongContext,
    memory: Memory,
    times: Sequence[float],
    history_tokens: float | Sequence[float],
) -> pd.DataFrame:
    """Per-question and cumulative costs of both systems for questions at ``times``."""
    times = np.asarray(times, dtype=float)
    history = np.broadcast_to(np.asarray(history_tokens, dtype=float), times.shape)
    columns = _long_context_columns(setup, times, history)
    long_context_usd = columns.pop("usd")
    memory_usd = memory_requests(memory, history)
    return pd.DataFrame(
        {
            "question": np.arange(1, len(times) + 1),
            **columns,
            "long_context_usd": long_context_usd,
            "memory_usd": memory_usd,
            "long_context_cumulative_usd": np.cumsum(long_context_usd),
            "memory_cumulative_usd": np.cumsum(memory_usd),
            "price_date": setup.price.date,
        }
    )


def break_even_of(frame: pd.DataFrame) -> int | None:
    return first_break_even(frame["memory_usd"], frame["long_context_usd"])


def timeline_break_even(
    setup: LongContext,
    memory: Memory,
    times: Sequence[float],
    history_tokens: float | Sequence[float],
) -> int | None:
    """Break-even N of questions at ``times``, computed on growing prefixes of the timeline (a
    question's costs depend only on those before it)."""
    times = np.asarray(times, dtype=float)
    history = np.broadcast_to(np.asarray(history_tokens, dtype=float), times.shape)
    length = BREAK_EVEN_FIRST_PREFIX
    while True:
        length = min(length, len(times))
        columns = _long_context_columns(setup, times[:length], history[:length])
        found = first_break_even(memory_requests(memory, history[:length]), columns["usd"])
        if found is not None or length == len(times):
            return found
        length *= 4
