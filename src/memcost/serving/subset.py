"""The LoCoMo accuracy subset: four whole conversations that look like the full set (study §3).

Among the subsets of ``size`` conversations with the target number of questions (665 in the
study, category 5 left out), choose the one whose distributions over three axes are closest to
the full set's: the smallest sum of Jensen–Shannon divergences (base 2, so each lies in [0, 1])
over

- ``category``: the LoCoMo category number (1-4; 5 is left out),
- ``evidence_turns``: how many evidence turns a question cites, binned ``0, 1, 2, 3, 4+``,
- ``evidence_span``: how many sessions its evidence spans (last - first + 1), binned
  ``none, 1, 2, 3-5, 6+``.

When no subset has exactly the target (the bundled sample has fewer conversations), every
subset of ``min(size, conversations)`` is a candidate and the choice says the target was not met.
Ties go to the subset whose sorted ids come first.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
from scipy.spatial.distance import jensenshannon

AXES = ("category", "evidence_turns", "evidence_span")
BINNING = {
    "category": "LoCoMo category number 1-4 (category 5, adversarial, left out)",
    "evidence_turns": "number of evidence dia_ids: 0, 1, 2, 3, 4+",
    "evidence_span": "sessions from first to last evidence turn: none, 1, 2, 3-5, 6+",
}
_SESSION = re.compile(r"D(\d+):")


def _turns_bin(n: int) -> str:
    return "4+" if n >= 4 else str(n)


def _span_bin(evidence: list[str]) -> str:
    sessions = [int(m.group(1)) for e in evidence for m in [_SESSION.match(str(e))] if m]
    if not sessions:
        return "none"
    span = max(sessions) - min(sessions) + 1
    return "6+" if span >= 6 else "3-5" if span >= 3 else str(span)


def question_axes(questions: pd.DataFrame) -> pd.DataFrame:
    """One row per question (category 5 dropped): ``conversation_id`` and its bin on each axis."""
    kept = questions[questions["category_id"].fillna(0).astype(int) != 5]
    evidence = kept["evidence"].apply(lambda e: [] if e is None else list(e))
    return pd.DataFrame(
        {
            "question_id": kept["question_id"].to_numpy(),
            "conversation_id": kept["conversation_id"].to_numpy(),
            "category": kept["category_id"].fillna(0).astype(int).astype(str).to_numpy(),
            "evidence_turns": evidence.apply(lambda e: _turns_bin(len(e))).to_numpy(),
            "evidence_span": evidence.apply(_span_bin).to_numpy(),
        }
    )


def divergence(part: pd.Series, whole: pd.Series) -> float:
    """Jensen–Shannon divergence (base 2) between two samples' bin frequencies."""
    bins = sorted(set(whole) | set(part))
    p = part.value_counts().reindex(bins, fill_value=0).to_numpy(float)
    q = whole.value_counts().reindex(bins, fill_value=0).to_numpy(float)
    return float(jensenshannon(p / p.sum(), q / q.sum(), base=2) ** 2)


@dataclass
class SubsetChoice:
    conversations: list[str]
    questions: int
    divergences: dict[str, float]
    total_divergence: float
    target_questions: int
    target_met: bool
    candidates: int
    available_conversations: int
    binning: dict[str, str] = field(default_factory=lambda: dict(BINNING))

    def as_dict(self) -> dict:
        return asdict(self)


def choose_subset(
    questions: pd.DataFrame, *, size: int = 4, target_questions: int = 665
) -> SubsetChoice:
    """The subset of ``size`` conversations closest to the full set (see the module text)."""
    axes = question_axes(questions)
    if axes.empty:
        raise ValueError("no LoCoMo questions outside category 5 to choose a subset from")
    counts = axes.groupby("conversation_id").size()
    ids = sorted(counts.index)
    k = min(size, len(ids))
    combos = list(itertools.combinations(ids, k))
    exact = [c for c in combos if int(counts.loc[list(c)].sum()) == target_questions]
    candidates = exact or combos
    best: tuple[float, tuple[str, ...], dict[str, float]] | None = None
    for combo in candidates:
        part = axes[axes["conversation_id"].isin(combo)]
        divs = {axis: divergence(part[axis], axes[axis]) for axis in AXES}
        total = float(np.sum(list(divs.values())))
        if best is None or total < best[0] - 1e-12:
            best = (total, combo, divs)
    assert best is not None
    total, combo, divs = best
    return SubsetChoice(
        list(combo),
        int(counts.loc[list(combo)].sum()),
        divs,
        total,
        target_questions,
        bool(exact),
        len(candidates),
        len(ids),
    )
