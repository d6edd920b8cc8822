"""The prompt-cache retention rule of the cost model: is a cached prefix still alive, and how
many of its tokens can be served from the cache.

A provider keeps a prompt's prefix for a while after the last request that used it. OpenAI's
in-memory cache is typically cleared after 5-10 minutes of inactivity (GPT-5 family; the newer
models sell a 30-minute life with a write premium) and always within an hour; extended retention
(``prompt_cache_retention``) keeps it up to 24 h (12 h as sold on gpt-6.1-terra). Each request
that hits the prefix starts its idle clock again. The paper's cost model (§8) assumes the
history is cached from the second question on whatever the gap: that is the policy ``always``.

The interface is deliberately small, so that one rule can serve the cost model and any
simulation of a provider's cache:

* :func:`retention_for` — a policy name and a price row → a :class:`Retention` (how long an idle
  prefix lives, and which cache-write price applies);
* :func:`is_alive` — ``is_alive(last_request_time, now, retention)``;
* :func:`cacheable_tokens` — how many of a shared prefix's tokens the cache can serve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from memcost.catalog import Price
from memcost.catalog import cacheable as _provider_cacheable

MINUTE = 60.0
HOUR = 3_600.0
DAY = 86_400.0
WEEK = 7 * DAY

# The policies a deployer can choose (and the paper's assumption).
RETENTION_POLICIES: tuple[str, ...] = ("always", "in_memory", "extended", "none")
RETENTION_LABELS = {
    "always": "always cached (the paper's assumption, §8)",
    "in_memory": "in-memory retention",
    "extended": "extended retention",
    "none": "no caching",
}


@dataclass(frozen=True)
class Retention:
    """One retention policy on one price row."""

    policy: str  # one of RETENTION_POLICIES
    window_seconds: float  # an idle prefix lives this long (inf: forever; 0: never cached)
    sold_as: str  # the cache-write price that applies: "30m" | "12h" | "24h" | "" (plain input)

    @property
    def caches(self) -> bool:
        return self.window_seconds > 0


def retention_for(price: Price, policy: str) -> Retention:
    """The retention ``policy`` on ``price``'s row: its window and its cache-write price."""
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
    """Whether a prefix last used at ``last_request_time`` (seconds; ``None``: never sent) is
    still cached at ``now``. A gap exactly as long as the window still hits."""
    if last_request_time is None or not retention.caches:
        return False
    return now - last_request_time <= retention.window_seconds


def cacheable_tokens(shared_tokens: float, *, exact: bool = False) -> float:
    """Tokens of a ``shared_tokens``-long prefix the cache can serve.

    ``exact=False``: the provider's grid (at least 1,024 tokens, then 128-token steps);
    ``exact=True``: every shared token, as the paper's cost model bills it (§8).
    """
    if exact:
        return float(shared_tokens)
    return float(_provider_cacheable(int(shared_tokens)))
