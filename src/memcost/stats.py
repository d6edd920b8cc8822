"""Accuracy statistics: Wilson and dialogue-cluster bootstrap intervals, exact McNemar, the majority
of the judge's votes (docs/architecture.md, "Statistics")."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

CORRECT, WRONG, UNJUDGED = "CORRECT", "WRONG", "UNJUDGED"
LABELS = (CORRECT, WRONG, UNJUDGED)


# ---------------------------------------------------------------------------------------------
# Intervals
# ---------------------------------------------------------------------------------------------
def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval (no continuity correction): inside [0, 1], not a point at 0 % or 100 %;
    ``n = 0`` gives NaNs."""
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return (math.nan, math.nan)
    ci = scipy_stats.binomtest(successes, n).proportion_ci(confidence, method="wilson")
    # At 0 or n successes the bound is exactly 0 or 1; say so rather than 1e-17 beside it.
    low = 0.0 if successes == 0 else float(ci.low)
    high = 1.0 if successes == n else float(ci.high)
    return (low, high)


def cluster_bootstrap_interval(
    correct: Sequence[bool] | np.ndarray | pd.Series,
    clusters: Sequence[str] | np.ndarray | pd.Series,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """Percentile interval of the pooled accuracy when whole conversations are resampled (one
    question each: the ordinary bootstrap)."""
    values = np.asarray(correct, dtype=float)
    labels = np.asarray(clusters, dtype=object)
    if values.shape != labels.shape:
        raise ValueError(f"{values.shape[0]} outcomes but {labels.shape[0]} cluster labels")
    if n_resamples < 1:
        raise ValueError("n_resamples must be at least 1")
    if values.size == 0:
        return (math.nan, math.nan)
    codes, _ = pd.factorize(pd.Series(labels), sort=True)
    sums = np.bincount(codes, weights=values)
    sizes = np.bincount(codes).astype(float)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(sizes), size=(n_resamples, len(sizes)))
    estimates = sums[picks].sum(axis=1) / sizes[picks].sum(axis=1)
    alpha = 1 - confidence
    low, high = np.quantile(estimates, [alpha / 2, 1 - alpha / 2])
    return (float(low), float(high))


# ---------------------------------------------------------------------------------------------
# Paired comparison
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class McNemarResult:
    n: int  # questions both systems were judged on
    both_correct: int
    a_only: int
    b_only: int
    both_wrong: int
    p_value: float

    @property
    def discordant(self) -> int:
        return self.a_only + self.b_only


def mann_whitney_u(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    return float(scipy_stats.mannwhitneyu(x, y).statistic)


def mcnemar_exact(a_correct: Sequence[bool], b_correct: Sequence[bool]) -> McNemarResult:
    """Exact McNemar test on outcomes aligned question by question."""
    a = np.asarray(a_correct, dtype=bool)
    b = np.asarray(b_correct, dtype=bool)
    if a.shape != b.shape:
        raise ValueError(f"paired outcomes must align: {a.shape[0]} vs {b.shape[0]}")
    a_only = int((a & ~b).sum())
    b_only = int((~a & b).sum())
    discordant = a_only + b_only
    # each discordant question a fair coin under "equally good": a two-sided binomial test
    p_value = scipy_stats.binomtest(a_only, discordant).pvalue if discordant else 1.0
    return McNemarResult(
        n=int(a.size),
        both_correct=int((a & b).sum()),
        a_only=a_only,
        b_only=b_only,
        both_wrong=int((~a & ~b).sum()),
        p_value=p_value,
    )


# ---------------------------------------------------------------------------------------------
# Votes: majority per question, and the mean ± std of the runs' accuracies
# ---------------------------------------------------------------------------------------------
def majority_votes(judgments: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """One row per ``keys`` group: ``votes``, ``correct_votes``, ``wrong_votes``,
    ``unjudged_votes``, ``label`` (a tie is WRONG, no judged vote UNJUDGED), ``correct``,
    ``judged``."""
    keys = list(keys)
    columns = [
        *keys,
        "votes",
        "correct_votes",
        "wrong_votes",
        "unjudged_votes",
        "label",
        "correct",
        "judged",
    ]
    if judgments.empty:
        return pd.DataFrame(columns=columns)
    labels = judgments["label"].astype(str).str.upper()
    frame = judgments[keys].copy()
    frame["is_correct"] = (labels == CORRECT).to_numpy()
    frame["is_wrong"] = (labels == WRONG).to_numpy()
    frame["is_unjudged"] = (~labels.isin([CORRECT, WRONG])).to_numpy()
    grouped = frame.groupby(keys, sort=True, dropna=False)
    out = grouped.agg(
        correct_votes=("is_correct", "sum"),
        wrong_votes=("is_wrong", "sum"),
        unjudged_votes=("is_unjudged", "sum"),
    ).reset_index()
    for column in ("correct_votes", "wrong_votes", "unjudged_votes"):
        out[column] = out[column].astype(int)
    out["votes"] = out["correct_votes"] + out["wrong_votes"]
    out["judged"] = out["votes"] > 0
    out["correct"] = out["correct_votes"] > out["wrong_votes"]
    out["label"] = np.where(out["correct"], CORRECT, np.where(out["judged"], WRONG, UNJUDGED))
    return out[columns]


def vote_accuracies(
    judgments: pd.DataFrame, keys: Sequence[str], *, vote_column: str = "vote"
) -> pd.DataFrame:
    """Each vote's accuracy on its own (``judged``, ``correct``, ``accuracy``), as if a separate
    run."""
    keys = list(keys)
    if judgments.empty:
        return pd.DataFrame(columns=[*keys, vote_column, "judged", "correct", "accuracy"])
    labels = judgments["label"].astype(str).str.upper()
    frame = judgments[[*keys, vote_column]].copy()
    frame["judged"] = labels.isin([CORRECT, WRONG]).to_numpy()
    frame["correct"] = (labels == CORRECT).to_numpy()
    out = (
        frame.groupby([*keys, vote_column], sort=True, dropna=False)[["judged", "correct"]]
        .sum()
        .astype(int)
        .reset_index()
    )
    out["accuracy"] = np.where(
        out["judged"] > 0, out["correct"] / out["judged"].where(out["judged"] > 0, 1), np.nan
    )
    return out


def mean_std_over_votes(
    judgments: pd.DataFrame, keys: Sequence[str], *, vote_column: str = "vote"
) -> pd.DataFrame:
    """``vote_mean`` and ``vote_std`` (population) of the per-vote accuracies."""
    keys = list(keys)
    per_vote = vote_accuracies(judgments, keys, vote_column=vote_column)
    if per_vote.empty:
        return pd.DataFrame(columns=[*keys, "n_votes", "vote_mean", "vote_std"])
    grouped = per_vote.groupby(keys, sort=True, dropna=False)["accuracy"]
    out = grouped.agg(
        n_votes="count",
        vote_mean="mean",
        vote_std=lambda s: float(np.std(s.dropna().to_numpy())) if s.notna().any() else np.nan,
    )
    return out.reset_index()
