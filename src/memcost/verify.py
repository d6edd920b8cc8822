"""How few questions tell the paper's headline gap from zero: the sizing of the verify_* presets.

The headline is one paired comparison per dataset: long context with GPT-5-mini against the
paper's memory, on the same questions (Table 3). Each question gives a difference d = (long
context right) - (memory right), in {-1, 0, 1}; the report's interval for the mean difference
resamples whole conversations (the dialogue-cluster bootstrap, :mod:`memcost.stats`), so the
sizing counts questions the way that interval does:

- the variance of one difference, from the paper's two accuracies with the systems' errors
  taken as independent (the largest variance those accuracies allow short of systems that fail
  on opposite questions): ``p_a (1 - p_b) + p_b (1 - p_a) - (p_a - p_b)^2``;
- a design effect ``1 + (m - 1) ICC`` for ``m`` questions per conversation, with an assumed
  intra-conversation correlation :data:`ICC` (the paper gives none);
- ``n = (z_{1-alpha/2} + z_{power})^2 variance x design effect / gap^2`` questions, so that an
  interval at 95% excludes zero with 80% power when the gap is the paper's.

Of the subsets that satisfy it (``k`` conversations, ``m`` questions each, at least
:data:`MIN_CONVERSATIONS` conversations so that the cluster bootstrap has something to
resample), :func:`plan` takes the cheapest under a cost function the caller gives (the run's
estimate). Where no subset of the benchmark is large enough (PersonaMem's 7-point gap), the plan
says so and is sized for :data:`FALLBACK_MULTIPLE` times the paper's gap instead: it can tell a
gap that large from zero, and cannot confirm the paper's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

from memcost import paper

ALPHA = 0.05  # two-sided: an interval at 95%
POWER = 0.80
ICC = 0.2  # assumed correlation of two questions' differences within one conversation
MIN_CONVERSATIONS = 5
FALLBACK_MULTIPLE = 2.0
LONG_CONTEXT, MEMORY = "long_context_gpt-5-mini", paper.PAPER_MEMORY
# The questions the paper judges: LoCoMo's category 5 (adversarial) is left out.
JUDGED_SHARE = {"locomo": 1540 / 1986}


def paired_variance(p_a: float, p_b: float) -> float:
    """Variance of one question's difference, the two systems' errors independent."""
    return p_a * (1 - p_b) + p_b * (1 - p_a) - (p_a - p_b) ** 2


def design_effect(per_conversation: float, icc: float = ICC) -> float:
    return 1 + (per_conversation - 1) * icc


def _z() -> float:
    normal = NormalDist()
    return normal.inv_cdf(1 - ALPHA / 2) + normal.inv_cdf(POWER)


def detectable_gap(questions: int, per_conversation: float, dataset: str) -> float:
    """The smallest gap (accuracy points / 100) that ``questions`` judged questions, ``m`` per
    conversation, tell from zero at 95% with 80% power (the paper's variance)."""
    p_a, p_b = _accuracies(dataset)
    return _z() * math.sqrt(paired_variance(p_a, p_b) * design_effect(per_conversation) / questions)


def _accuracies(dataset: str) -> tuple[float, float]:
    row = paper.TABLE3[dataset]
    return row[LONG_CONTEXT] / 100, row[MEMORY] / 100


@dataclass(frozen=True)
class SubsetPlan:
    """A subset: ``conversations`` x ``per_conversation`` judged questions; ``sampled`` is the
    questions to draw (more than judged where the judge leaves a category out)."""

    dataset: str
    conversations: int
    per_conversation: int
    sampled: int
    paper_gap: float
    sized_for: float  # the gap the subset is sized to detect (the paper's, unless it cannot be)
    detectable: float  # the smallest gap it tells from zero

    @property
    def judged(self) -> int:
        return self.conversations * self.per_conversation

    @property
    def shows_paper_gap(self) -> bool:
        return self.detectable <= self.paper_gap + 1e-12

    def describe(self) -> str:
        """What the subset can and cannot show, in one sentence."""
        can = (
            f"tells the paper's gap of {100 * self.paper_gap:.1f} points from zero"
            if self.shows_paper_gap
            else f"cannot confirm the paper's gap of {100 * self.paper_gap:.1f} points (no subset "
            "of the benchmark could: it is too small for that gap)"
        )
        return (
            f"{self.judged} judged questions over {self.conversations} conversations "
            f"detect a gap of {100 * self.detectable:.1f} points or more at 95% with 80% "
            f"power (assumed intra-conversation correlation {ICC}): this subset {can}; it "
            "cannot estimate either system's accuracy to better than about "
            f"±{100 * self.accuracy_margin:.0f} points, nor compare categories"
        )

    @property
    def accuracy_margin(self) -> float:
        """Half the 95% interval of one system's accuracy at worst (p = 0.5)."""
        return 1.96 * math.sqrt(0.25 * design_effect(self.per_conversation) / self.judged)


def plan(dataset: str, cost: Callable[[int, int], float]) -> SubsetPlan:
    """The cheapest subset of ``dataset`` (``cost(conversations, sampled questions)`` in
    dollars) that detects the paper's gap, else :data:`FALLBACK_MULTIPLE` times it."""
    n_conversations, n_questions = paper.TABLE1[dataset][0], paper.TABLE2[dataset][0]
    share = JUDGED_SHARE.get(dataset, 1.0)
    p_a, p_b = _accuracies(dataset)
    gap = p_a - p_b
    for target in (gap, FALLBACK_MULTIPLE * gap):
        base = _z() ** 2 * paired_variance(p_a, p_b) / target**2
        options = []
        # Questions per conversation: at most what a conversation holds on average (one for
        # LongMemEval); for each, the fewest conversations that reach the size cost least.
        for m in range(1, max(1, int(n_questions * share / n_conversations)) + 1):
            k = max(MIN_CONVERSATIONS, math.ceil(base * design_effect(m) / m))
            if k <= n_conversations:
                sampled = math.ceil(k * m / share)
                options.append((cost(k, sampled), k, m, sampled))
        if options:
            _, k, m, sampled = min(options)
            return SubsetPlan(
                dataset, k, m, sampled, gap, target, detectable_gap(k * m, m, dataset)
            )
    raise ValueError(f"{dataset}: no subset detects even {FALLBACK_MULTIPLE} times its gap")
