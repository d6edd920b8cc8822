"""Published rate limits of a usage tier, for estimating how long a run's calls take.

The client never assumes these: it paces to the limits a run states (``client: {rate_limits:
...}``) and to what each reply's ``x-ratelimit-*`` headers say (:mod:`memcost.llm.transport`). The
estimate needs a figure before any reply, so it uses the stated limits where a run gives them
and this table otherwise, and says which. An account on a higher tier runs faster: state its
limits. A model missing here is estimated by its latency and ``max_concurrency`` alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from memcost.models import canonical_name, per_model

DEFAULT_TIER = "tier 1"
# OpenAI's model pages, Tier 1 (after the first $5 paid), as raised on 2025-09-12 for gpt-5 and
# gpt-5-mini: requests and tokens per minute per model.
TIER_SOURCE = "OpenAI's model pages, usage tier 1, as of 2025-09-12"
# The successors' pages were not checked here: they are assumed to have the limits of the model
# they replace, and the estimate says so.
ASSUMED_AS = {"gpt-6.1-terra": "gpt-5-mini", "gpt-6-luna": "gpt-5-nano"}
TIER_LIMITS: dict[str, dict[str, tuple[int, int]]] = {
    "tier 1": {
        "gpt-5": (500, 500_000),
        "gpt-5-mini": (500, 500_000),
        "gpt-5-nano": (500, 200_000),
        "text-embedding-3-small": (3_000, 1_000_000),
    },
}


def tier_limits(
    model: str, stated: Mapping[str, Mapping[str, float]] | None = None, tier: str = DEFAULT_TIER
) -> tuple[float | None, float | None, str]:
    """``(rpm, tpm, where from)`` for ``model``: the run's stated limits, else the tier's
    (``None``: not known)."""
    limits = per_model(stated, model)
    if limits is not None:
        return limits.get("rpm"), limits.get("tpm"), "stated"
    name = canonical_name(model)
    table = TIER_LIMITS[tier]
    if name in table:
        return (*table[name], tier)
    if name in ASSUMED_AS:
        return (*table[ASSUMED_AS[name]], f"{tier}, as {ASSUMED_AS[name]}")
    return None, None, "not known"
