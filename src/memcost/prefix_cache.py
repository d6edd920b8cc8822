"""The one prompt-cache rule: which prompt tokens a provider serves from its prefix cache.

OpenAI's prompt caching (https://developers.openai.com/api/docs/guides/prompt-caching, read
2026-11-30): a prompt's prefix is cached once it is at least 1,024 tokens long, and hits are
counted in 128-token steps; a cached prefix is kept for a while after its last use (5-10 minutes
of inactivity by default, up to an hour off-peak); requests are routed to a machine by a hash of
the prompt's first tokens (typically 256) together with the ``prompt_cache_key``, and above
about 15 requests a minute for one prefix and key the overflow goes to other machines, where it
misses.

:class:`PrefixCache` applies the rule to a stream of requests. The local test server simulates
a provider's cache with it, the dispatch benchmark measures with it, and an offline simulation
can replay a run's requests through it; nobody else restates these numbers.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

# The two token numbers are the price table's (where the discount they earn is priced).
from memcost.prices import CACHED_INPUT_MIN_TOKENS as MIN_PREFIX_TOKENS
from memcost.prices import CACHED_INPUT_STEP_TOKENS as PREFIX_STEP_TOKENS

ROUTING_TOKENS = 256  # the prefix a request is routed by (with its prompt_cache_key)
RETENTION_S = 600.0  # kept this long after its last use (the documented 5-10 minutes, upper end)
MAX_REQUESTS_PER_PREFIX_PER_MINUTE = 15
OVERFLOW_WINDOW_S = 60.0


def cacheable(shared_tokens: int) -> int:
    """Tokens billed as cached when ``shared_tokens`` of the prompt match a cached prefix."""
    if shared_tokens < MIN_PREFIX_TOKENS:
        return 0
    return shared_tokens // PREFIX_STEP_TOKENS * PREFIX_STEP_TOKENS


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` have in common.

    Compared a block at a time (a slice comparison runs in C), halving the block where the two
    differ: prompts of 100k tokens that share all but their last lines are compared thousands of
    times by a simulation, and a loop over their tokens in Python took most of its time."""
    if not (type(a) is type(b) and type(a) in (list, tuple)):
        a, b = tuple(a), tuple(b)
    low, high = 0, min(len(a), len(b))
    if a[:high] == b[:high]:
        return high
    while high - low > 1:  # a[:low] == b[:low] and a[:high] != b[:high]
        middle = (low + high) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle
    return low


@dataclass
class _Entry:
    tokens: tuple[int, ...]
    last_used: float


@dataclass
class PrefixCache:
    """A provider's prefix cache for one model, driven by request arrival times (seconds).

    A request is routed by its first :data:`ROUTING_TOKENS` tokens and its ``key`` (the
    ``prompt_cache_key``, if any). When its key has already seen
    ``max_per_minute`` requests in the last minute it overflows to another machine: no hit, and
    nothing is remembered there.
    """

    retention_s: float = RETENTION_S
    max_per_minute: int = MAX_REQUESTS_PER_PREFIX_PER_MINUTE
    keep: int = 512  # prompts remembered per key
    _entries: dict[str, deque[_Entry]] = field(default_factory=dict)
    _arrivals: dict[str, deque[float]] = field(default_factory=dict)

    def route_key(self, tokens: Sequence[int], key: str | None) -> str:
        return f"{key or ''}|" + ",".join(map(str, tokens[:ROUTING_TOKENS]))

    def overflowed(self, route: str, now: float) -> bool:
        """Record an arrival on ``route``; ``True`` when it is past the per-minute limit."""
        arrivals = self._arrivals.setdefault(route, deque())
        while arrivals and now - arrivals[0] >= OVERFLOW_WINDOW_S:
            arrivals.popleft()
        arrivals.append(now)
        return len(arrivals) > self.max_per_minute

    def lookup(self, tokens: Sequence[int], now: float, key: str | None = None) -> int:
        """Cached prompt tokens for this request; remembers the prompt for later ones."""
        route = self.route_key(tokens, key)
        if self.overflowed(route, now):
            return 0
        entries = self._entries.setdefault(route, deque(maxlen=self.keep))
        best = 0
        for entry in entries:
            if now - entry.last_used > self.retention_s:
                continue
            shared = shared_prefix(entry.tokens, tokens)
            if shared >= MIN_PREFIX_TOKENS:
                entry.last_used = now
            best = max(best, shared)
        if len(tokens) >= MIN_PREFIX_TOKENS:
            entries.append(_Entry(tuple(tokens), now))
        return cacheable(best)


def max_requests_per_minute(arrivals: Sequence[float]) -> int:
    """The most arrivals in any 60-second window (a prefix's peak rate)."""
    times = sorted(arrivals)
    best, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= OVERFLOW_WINDOW_S:
            start += 1
        best = max(best, end - start + 1)
    return best
