"""What prompt caching can save on one conversation (notebook 03, section 2).

Two questions about the same user send prompts that are identical up to the end of the history;
the provider can serve that shared beginning from its cache on the second question. OpenAI
caches prefixes of at least 1,024 tokens and extends them in 128-token steps
(:mod:`memcost.catalog`, the one statement of that rule), so the cached part is the shared
prefix rounded down to that grid. This is the arithmetic the cost model's
"cached from the second question on" assumption rests on (study §8), computed on real prompts.
"""

from __future__ import annotations

from dataclasses import dataclass

from memcost.catalog import cacheable, shared_prefix
from memcost.longctx.answer import messages_for
from memcost.longctx.plan import Plan
from memcost.text import decode, encode


def cacheable_tokens(shared: int) -> int:
    """The tokens a provider can serve from its cache when ``shared`` leading tokens match a
    prompt it has seen (the one rule, :func:`memcost.catalog.cacheable`)."""
    return cacheable(shared)


def prompt_token_ids(plan: Plan) -> list[int]:
    """The o200k token ids of a plan's messages, in order (their count is ``prompt_tokens``)."""
    return [t for _, text in messages_for(plan) for t in encode(text)]


@dataclass(frozen=True)
class PrefixShare:
    """Two prompts about one conversation: what they share and what the second gets cached."""

    first_question_id: str
    second_question_id: str
    first_tokens: int
    second_tokens: int
    shared_tokens: int  # identical leading tokens
    cached_tokens: int  # what the cache can serve the second prompt
    before: str  # the text just before the prompts diverge
    first_after: str  # the first prompt's text just after
    second_after: str  # the second prompt's text just after

    @property
    def cached_share(self) -> float:
        """Cached tokens ÷ the second prompt's tokens."""
        return self.cached_tokens / self.second_tokens if self.second_tokens else 0.0


def prefix_share(first: Plan, second: Plan, *, show_tokens: int = 12) -> PrefixShare:
    """Compare two plans' prompts token by token: where they diverge, and what the second one
    would get from the cache once the first has been sent."""
    a, b = prompt_token_ids(first), prompt_token_ids(second)
    shared = shared_prefix(a, b)
    return PrefixShare(
        first_question_id=first.question_id,
        second_question_id=second.question_id,
        first_tokens=len(a),
        second_tokens=len(b),
        shared_tokens=shared,
        cached_tokens=min(cacheable_tokens(shared), len(b)),
        before=decode(a[max(0, shared - show_tokens) : shared]),
        first_after=decode(a[shared : shared + show_tokens]),
        second_after=decode(b[shared : shared + show_tokens]),
    )


__all__ = ["PrefixShare", "cacheable_tokens", "prefix_share", "prompt_token_ids"]
