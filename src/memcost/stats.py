"""Honest accuracy statistics: intervals, paired tests, and what three judge votes mean.

A benchmark accuracy is a proportion over a few hundred questions, so it needs an interval; the
questions are not independent (many share one conversation, and a memory that lost a fact fails
every question about it), so the interval must resample conversations, not questions; and two
systems answered the *same* questions, so they are compared with a paired test. Everything here
is deterministic: the bootstrap takes an explicit seed.
"""

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
    """Wilson score interval for ``successes`` out of ``n`` (no continuity correction).

    Unlike the textbook ``p ± z·sqrt(p(1-p)/n)`` it stays inside [0, 1] and does not collapse to
    a point at 0 % or 100 %, which small per-category counts hit all the time. ``n = 0`` gives
    ``(nan, nan)``: there is nothing to estimate.
    """
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
    """Percentile interval of the accuracy when whole clusters (conversations) are resampled.

    Each resample draws as many conversations as there are, with replacement, and takes the
    pooled accuracy of all their questions (``Σ correct / Σ questions``). Questions about the
    same conversation tend to succeed or fail together; resampling questions one by one would
    pretend they are independent and give an interval that is too narrow. With one question per
    conversation (LongMemEval) this is the ordinary bootstrap. Same seed, same interval.
    """
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
    """Exact McNemar test on two systems' outcomes for the same questions.

    Only the discordant questions carry information: ``a_only`` (A right, B wrong) and
    ``b_only``. Under "the systems are equally good" each discordant question is a fair coin, so
    the two-sided p-value is a binomial tail with p = 1/2.
    """

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
    """The Mann-Whitney U of ``x`` against ``y``: pairs with the ``x`` value larger, ties counting
    a half."""
    return float(scipy_stats.mannwhitneyu(x, y).statistic)


def mcnemar_exact(a_correct: Sequence[bool], b_correct: Sequence[bool]) -> McNemarResult:
    """Exact (binomial) McNemar test; the outcomes must be aligned question by question."""
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
    """One row per ``keys`` group (a question of a system): the majority of its judged votes.

    ``UNJUDGED`` votes (the judge never gave a usable verdict) count for neither side. A
    question is ``CORRECT`` when more judged votes say CORRECT than WRONG, ``WRONG`` otherwise
    (a tie, possible only when a vote is missing, is not a majority), and ``UNJUDGED`` when no
    vote was judged — so a judge failure is never silently a wrong answer.
    Columns: ``keys``, ``votes`` (judged votes), ``correct_votes``, ``wrong_votes``,
    ``unjudged_votes``, ``label``, ``correct`` (bool), ``judged`` (bool).
    """
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
    """Accuracy of each vote taken on its own, as if each were a separate judging run.

    One row per ``keys`` group and vote: ``judged`` (votes that gave a verdict), ``correct``,
    ``accuracy`` (correct / judged). Averaging these over the votes gives the EverMemOS-style
    "mean ± std of three runs".
    """
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
    """``vote_mean`` and ``vote_std`` of the per-vote accuracies, per ``keys`` group.

    The standard deviation is the population one (``ddof = 0``, numpy's default), describing
    the spread of the runs that were made; with a single vote it is 0.
    """
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
