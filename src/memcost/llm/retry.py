"""Retry policy: bounded exponential backoff with jitter, and the server's own wait hints.

Hints, in order: ``retry-after-ms``, ``Retry-After`` (seconds or an HTTP date), then OpenAI's
``x-ratelimit-reset-requests`` / ``x-ratelimit-reset-tokens`` (durations such as ``6m0s`` or
``20ms``; the longer of the two). The backoff grows to a minutes-long cap (``max_delay_s``, a
client parameter), so a low usage tier slows a run down instead of failing its items. Pacing to
the account's limits in the first place, and spacing the retries after a 429, is
:mod:`memcost.llm.pacing`'s.

The SDK's own retries are switched off so that every HTTP attempt passes through here and is
counted in the ledger (the paper's LC runs sent 504 and 664 requests for 500 questions because
of such retries; a reproduction should be able to show the same).
"""

from __future__ import annotations

import email.utils
import math
import random
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry transient failures.

    ``max_attempts`` counts the first try. Backoff is ``base * 2**(n-1)`` capped at
    ``max_delay_s``, scaled by a random factor in [0.5, 1] so that parallel workers that failed
    together do not retry together. A server's Retry-After wins over the backoff (capped at
    ``max_retry_after_s``).
    """

    max_attempts: int = 10  # with the defaults: about 8 minutes of backoff before giving up
    base_delay_s: float = 1.0
    max_delay_s: float = 300.0
    max_retry_after_s: float = 600.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        if retry_after is not None and math.isfinite(retry_after) and retry_after >= 0:
            return min(retry_after, self.max_retry_after_s)
        backoff = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
        return backoff * (0.5 + 0.5 * rng.random())


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: str) -> float | None:
    """``"6m0s"`` → 360.0, ``"20ms"`` → 0.02, ``"1.5s"`` → 1.5, ``"2"`` → 2.0; else ``None``."""
    value = str(value).strip().lower()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the server asks us to wait: ``retry-after-ms``, then ``Retry-After`` as seconds
    or as an HTTP date, then the longer of ``x-ratelimit-reset-requests`` and
    ``x-ratelimit-reset-tokens``; ``None`` when absent or unreadable."""
    if not headers:
        return None
    hinted = explicit_retry_after(headers)
    if hinted is not None:
        return hinted
    resets = [
        parse_duration(headers[name])
        for name in ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")
        if headers.get(name) is not None
    ]
    resets = [r for r in resets if r is not None and math.isfinite(r)]
    return max(resets) if resets else None


def explicit_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """``retry-after-ms``, else ``Retry-After`` (seconds or an HTTP date): what the server asks
    for in so many words (not the time until a limit is full again)."""
    if not headers:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            if name == "retry-after":
                parsed = email.utils.parsedate_tz(value)
                if parsed is not None:
                    return max(0.0, email.utils.mktime_tz(parsed) - time.time())
            continue
        if math.isfinite(seconds):
            return max(0.0, seconds)
    return None
