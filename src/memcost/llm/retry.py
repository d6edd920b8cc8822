"""Retry policy: bounded exponential backoff with jitter, and the server's Retry-After.

The SDK's own retries are switched off so that every HTTP attempt passes through here and is
counted in the ledger (the paper's LC runs sent 504 and 664 requests for 500 questions because
of such retries; a reproduction should be able to show the same).
"""

from __future__ import annotations

import email.utils
import math
import random
import threading
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

    max_attempts: int = 6
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    max_retry_after_s: float = 120.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        if retry_after is not None and math.isfinite(retry_after) and retry_after >= 0:
            return min(retry_after, self.max_retry_after_s)
        backoff = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
        return backoff * (0.5 + 0.5 * rng.random())


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the server asks us to wait: ``retry-after-ms``, then ``Retry-After`` as seconds
    or as an HTTP date; ``None`` when absent or unreadable."""
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


class PauseGate:
    """A pause shared by all workers: after a 429 with Retry-After, nobody sends until it ends.

    Without it, the other workers would keep hitting a rate-limited endpoint and each collect
    its own 429.
    """

    def __init__(self) -> None:
        self._until = 0.0
        self._lock = threading.Lock()

    def pause(self, seconds: float) -> None:
        with self._lock:
            self._until = max(self._until, time.monotonic() + seconds)

    def wait(self, stop: threading.Event | None = None) -> None:
        """Return once the pause is over (or ``stop`` is set)."""
        while True:
            with self._lock:
                remaining = self._until - time.monotonic()
            if remaining <= 0 or (stop is not None and stop.is_set()):
                return
            if stop is not None:
                stop.wait(min(remaining, 0.5))
            else:
                time.sleep(min(remaining, 0.5))
