"""The cost model with time in it: Eq. 1-2 generalised to questions arriving at given times.

The paper (§8) bills a user's long-context questions as ``C_first + (N − 1)·C_cached``: the
history is cached from the second question on. Here each question ``i`` arrives at a time
``t_i`` (seconds) with a history of ``H_i`` tokens, and is priced as one request:

* long context sends ``P_i = H_i + q`` prompt tokens (``q`` question tokens). If the prefix cached
  by the previous request is still alive (:func:`~memcost.today.retention.is_alive`: the
  retention policy and the time since the last request), the part of ``P_i`` it shares (the old
  history ``H_{i−1}``) is a cached read; the rest is written to the cache at the write price of
  the retention sold (or billed as plain input when nothing is cached). Above the long-context
  tier threshold the whole request costs the tier's prices (:meth:`memcost.catalog.Price.cost`);
* memory pays the write of the history it has not ingested yet (extraction, update and
  embeddings: all of ``H_1`` at the first question, the growth ``H_i − H_{i−1}`` later) and one
  read per question.

With the paper's prices, retention ``always``, back-to-back arrivals and no growth this is
exactly Eq. 1-2: Tables 4-5 and the break-evens 13/10/9/9 come out unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from memcost.catalog import Price
from memcost.today.retention import Retention, cacheable_tokens, is_alive, retention_for

PAPER_OUTPUT_TOKENS = 527.0  # §8: output tokens per long-context answer implied by Tables 4-5
PAPER_QUESTION_TOKENS = 0.0  # §8: Tables 4-5 bill the whole prompt as cached from turn 2
PAPER_WRITE_USD_PER_TOKEN = 4.296e-7  # §8: Table 5 write column ÷ L (extraction + embeddings)
PAPER_READ_USD = 0.001317  # §8: Table 4 memory column's slope (one question from memory)
BREAK_EVEN_FIRST_PREFIX = 32  # questions priced before the first look for a break-even


@dataclass(frozen=True)
class LongContext:
    """How one long-context question is billed."""

    price: Price  # the long-context model's dated price row
    retention: Retention  # the cache policy (window and write price)
    output_tokens: float = PAPER_OUTPUT_TOKENS  # per answer, reasoning included (§8)
    question_tokens: float = PAPER_QUESTION_TOKENS  # uncached tokens after the history (§8: 0)
    exact_cache: bool = True  # §8: every shared token cached (False: 1,024/128-token grid)
    flex: bool = False  # Flex processing (half price, slower; no cache-write price)

    @classmethod
    def on(cls, price: Price, policy: str, **values: Any) -> LongContext:
        return cls(price=price, retention=retention_for(price, policy), **values)

    def with_policy(self, policy: str) -> LongContext:
        return replace(self, retention=retention_for(self.price, policy))


@dataclass(frozen=True)
class Memory:
    """What memory costs: a write per history token ingested and a read per question."""

    write_usd_per_token: float = PAPER_WRITE_USD_PER_TOKEN  # extraction + update + embeddings
    read_usd: float = PAPER_READ_USD  # retrieval + reader call, per question
    source: str = "paper constants implied by Tables 4-5 (§8)"
    price_date: str = ""  # the price rows these costs were computed with


def long_context_requests(
    setup: LongContext, times: Sequence[float], history_tokens: Sequence[float]
) -> pd.DataFrame:
    """One row per question: its prompt, cached, written and plain tokens, tier and dollars."""
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
    """First question after which memory's cumulative cost is below long context's."""
    hits = np.flatnonzero(
        frame["memory_cumulative_usd"].to_numpy() < frame["long_context_cumulative_usd"].to_numpy()
    )
    return int(frame["question"].iloc[hits[0]]) if hits.size else None


def _first_crossing(long_context_usd: np.ndarray, memory_usd: np.ndarray) -> int | None:
    """:func:`break_even_of` on the per-question costs of questions 1, 2, ... (no frame)."""
    hits = np.flatnonzero(np.cumsum(memory_usd) < np.cumsum(long_context_usd))
    return int(hits[0]) + 1 if hits.size else None


def timeline_break_even(
    setup: LongContext,
    memory: Memory,
    times: Sequence[float],
    history_tokens: float | Sequence[float],
) -> int | None:
    """Break-even N of questions arriving at ``times`` (``None``: not within them).

    A question's costs depend on the questions before it only, so the timeline is computed on
    growing prefixes and stops at the first that holds the crossing: the same N as the whole
    timeline's, without pricing the hundreds of questions after a break-even near 10."""
    times = np.asarray(times, dtype=float)
    history = np.broadcast_to(np.asarray(history_tokens, dtype=float), times.shape)
    length = BREAK_EVEN_FIRST_PREFIX
    while True:
        length = min(length, len(times))
        columns = _long_context_columns(setup, times[:length], history[:length])
        found = _first_crossing(columns["usd"], memory_requests(memory, history[:length]))
        if found is not None or length == len(times):
            return found
        length *= 4
