"""How few questions tell the paper's headline gap from zero: the sizing of the verify_* presets
(docs/architecture.md, "The verify presets")."""

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
    return p_a * (1 - p_b) + p_b * (1 - p_a) - (p_a - p_b) ** 2


def design_effect(per_conversation: float, icc: float = ICC) -> float:
    return 1 + (per_conversation - 1) * icc


def _z() -> float:
    normal = NormalDist()
    return normal.inv_cdf(1 - ALPHA / 2) + normal.inv_cdf(POWER)


def detectable_gap(questions: int, per_conversation: float, dataset: str) -> float:
    """The smallest gap ``questions`` judged questions (``m`` per conversation) tell from zero at
    95% with 80% power."""
    p_a, p_b = _accuracies(dataset)
    return _z() * math.sqrt(paired_variance(p_a, p_b) * design_effect(per_conversation) / questions)


def _accuracies(dataset: str) -> tuple[float, float]:
    row = paper.TABLE3[dataset]
    return row[LONG_CONTEXT] / 100, row[MEMORY] / 100


@dataclass(frozen=True)
class SubsetPlan:
    """``conversations`` × ``per_conversation`` judged questions; ``sampled``: the questions to
    draw."""

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
    """The cheapest subset (``cost(conversations, questions)``) that detects the paper's gap, else
    :data:`FALLBACK_MULTIPLE` times it."""
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
