"""When a user's questions arrive: arrival processes for the cost model with time in it.

Every function returns the arrival times of ``n`` questions in seconds from the first one
(``0.0``), non-decreasing. The paper's case is :func:`back_to_back`; the others ask what a
deployer sees: a question every so often, a Poisson process, sessions of a few questions, or
the gaps of a benchmark's own dated sessions (:func:`dataset_gaps`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from memcost.today.retention import DAY, MINUTE

ARRIVAL_PROCESSES = ("back_to_back", "fixed_gap", "poisson", "sessions", "dataset")


def back_to_back(n: int) -> np.ndarray:
    """All questions at once (the paper's case, §8): no time for a cache to expire."""
    return np.zeros(int(n))


def fixed_gaps(n: int, gap_seconds: float) -> np.ndarray:
    """One question every ``gap_seconds``."""
    return np.arange(int(n), dtype=float) * float(gap_seconds)


def poisson(n: int, rate_per_day: float, seed: int = 0) -> np.ndarray:
    """A Poisson process with ``rate_per_day`` questions a day (exponential gaps)."""
    if rate_per_day <= 0:
        raise ValueError(f"rate_per_day must be positive, not {rate_per_day}")
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(DAY / rate_per_day, size=max(int(n) - 1, 0))
    return np.concatenate([[0.0], np.cumsum(gaps)])


def sessions(
    n: int, per_session: int, gap_seconds: float, within_seconds: float = MINUTE
) -> np.ndarray:
    """Sessions of ``per_session`` questions ``within_seconds`` apart, sessions
    ``gap_seconds`` apart (from the end of one session to the start of the next)."""
    if per_session < 1:
        raise ValueError(f"per_session must be at least 1, not {per_session}")
    gaps = [within_seconds if i % per_session else gap_seconds for i in range(1, int(n))]
    return np.concatenate([[0.0], np.cumsum(gaps)]) if n > 0 else np.zeros(0)


def from_gaps(n: int, gaps_seconds: Sequence[float]) -> np.ndarray:
    """``n`` arrivals whose gaps repeat ``gaps_seconds`` in order (a user's own rhythm)."""
    gaps = np.asarray(gaps_seconds, dtype=float)
    if gaps.size == 0:
        raise ValueError("no gaps to repeat: a user with a single dated session has none")
    reps = np.resize(gaps, max(int(n) - 1, 0))
    return np.concatenate([[0.0], np.cumsum(reps)])


def _seconds(values: pd.Series) -> np.ndarray:
    stamps = pd.to_datetime(values, errors="coerce").dropna().sort_values()
    return (stamps - stamps.iloc[0]).dt.total_seconds().to_numpy() if len(stamps) else np.zeros(0)


def dataset_gaps(conversations: pd.DataFrame, questions: pd.DataFrame | None = None) -> dict:
    """Per user (conversation): the gaps in seconds between the dated sessions of its history,
    then to its question date where the benchmark gives one (LongMemEval). LoCoMo dates its
    sessions; its questions carry no date. Reads the prepared files' columns
    (``session_datetime``, ``question_date``)."""
    sessions_ = (
        conversations.dropna(subset=["session_datetime"])
        .groupby(["conversation_id", "session_index"], sort=False)["session_datetime"]
        .first()
        .reset_index()
    )
    dated_questions = {}
    if questions is not None and "question_date" in questions:
        dated = questions.dropna(subset=["question_date"])
        dated_questions = dated.groupby("conversation_id")["question_date"].max().to_dict()
    out = {}
    for user, group in sessions_.groupby("conversation_id", sort=False):
        stamps = list(group["session_datetime"])
        if user in dated_questions:
            stamps.append(dated_questions[user])
        offsets = _seconds(pd.Series(stamps))
        gaps = np.diff(offsets)
        out[str(user)] = gaps[gaps >= 0]
    return out


def gap_summary(gaps: dict) -> pd.DataFrame:
    """Per user: number of gaps and their median, min and max in hours."""
    rows = [
        {
            "conversation_id": user,
            "gaps": len(g),
            "median_gap_hours": float(np.median(g)) / 3600 if len(g) else np.nan,
            "min_gap_hours": float(np.min(g)) / 3600 if len(g) else np.nan,
            "max_gap_hours": float(np.max(g)) / 3600 if len(g) else np.nan,
        }
        for user, g in gaps.items()
    ]
    return pd.DataFrame(rows)
