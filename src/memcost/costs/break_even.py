"""The break-even: the question after which memory's cumulative cost is below long context's.

Every table, figure and notebook of the study and its plugins counts it here, from per-question
(or per-turn) costs, or in closed form from the cost model's four constants (paper §3.5).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def _cumulative(memory_usd: Sequence[float], lc_usd: Sequence[float]) -> tuple[np.ndarray, ...]:
    memory = np.cumsum(np.asarray(memory_usd, dtype=float))
    lc = np.cumsum(np.asarray(lc_usd, dtype=float))
    if memory.shape != lc.shape:
        raise ValueError(f"series lengths differ: memory {memory.shape}, long context {lc.shape}")
    return memory, lc


def first_break_even(memory_usd: Sequence[float], lc_usd: Sequence[float]) -> int | None:
    """The first question (1-based) at which memory's cumulative cost is below long context's,
    from the per-question costs of questions 1, 2, ...; ``None``: not within them."""
    memory, lc = _cumulative(memory_usd, lc_usd)
    hits = np.flatnonzero(memory < lc)
    return int(hits[0]) + 1 if hits.size else None


def sustained_break_even(memory_usd: Sequence[float], lc_usd: Sequence[float]) -> int | None:
    """The first question (1-based) from which memory's cumulative cost stays below long
    context's to the last; ``None`` when it is not below at the last (also when it was below
    for a while and crossed back: ingestion spikes, a growing history)."""
    start = stays_below_from(*_cumulative(memory_usd, lc_usd))
    return None if start is None else start + 1


def stays_below_from(lower: Sequence[float], upper: Sequence[float]) -> int | None:
    """The sustained crossing of two cumulative curves: the first index (0-based) from which
    ``lower`` stays below ``upper`` to the end; ``None`` when it is not below at the end."""
    low, up = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    if low.shape != up.shape:
        raise ValueError(f"series lengths differ: {low.shape} and {up.shape}")
    below = low < up
    if below.size == 0 or not below[-1]:
        return None
    not_below = np.flatnonzero(~below)
    return 0 if not_below.size == 0 else int(not_below[-1]) + 1


def break_even(
    write_usd: float,
    read_usd: float,
    lc_first_usd: float,
    lc_cached_usd: float,
    max_turns: int | None = None,
) -> int | None:
    """:func:`first_break_even` for the cost model's constant costs (Eq. 1-2), without the series.

    ``C_Mem(N) < C_LC(N)`` ⇔ ``N·(C_cached − C_read) > C_write − C_first + C_cached``; the answer
    is then checked against the two sums at it and the turn before, so that floating-point ties
    fall as the series would put them."""

    def cheaper(n: int) -> bool:
        return write_usd + n * read_usd < lc_first_usd + (n - 1) * lc_cached_usd

    if cheaper(1):
        n: int | None = 1
    elif lc_cached_usd - read_usd <= 0:
        n = None  # each question costs memory at least as much: the gap never shrinks
    else:
        gap = write_usd - lc_first_usd + lc_cached_usd
        n = max(1, math.floor(gap / (lc_cached_usd - read_usd)) + 1)
        while n > 1 and cheaper(n - 1):
            n -= 1
        while not cheaper(n):
            n += 1
    return None if n is not None and max_turns is not None and n > max_turns else n
