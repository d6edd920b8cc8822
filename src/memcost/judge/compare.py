"""Fair comparisons (notebook 04, sections 5 to 7): the paired McNemar test between memory and
every other system, answer length against correctness, and how much the judge's own wording
moves each system's gap to memory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from memcost import stats
from memcost.answers import primary, system_kind
from memcost.judge.votes import question_outcomes
from memcost.text import count_tokens_batch


def mcnemar_table(
    judgments: pd.DataFrame, *, dataset: str, baseline: str = "memory"
) -> pd.DataFrame:
    """Exact McNemar between ``baseline`` and every other system, on the questions both had
    judged (the primary prompt's majority). The pairing is what makes it fair: both systems
    answered the same questions, so only the questions where they disagree say which is better.
    """
    outcomes = question_outcomes(primary(judgments))
    judged = outcomes.loc[outcomes["judged"]]
    wide = judged.pivot(index="question_id", columns="system", values="correct")
    rows = []
    if baseline not in wide.columns:
        return pd.DataFrame(columns=["dataset", "system_a", "system_b", "n_paired", "p_value"])
    for other in wide.columns:
        if other == baseline:
            continue
        pair = wide[[baseline, other]].dropna()
        a, b = pair[baseline].astype(bool).to_numpy(), pair[other].astype(bool).to_numpy()
        result = stats.mcnemar_exact(a, b)
        rows.append(
            {
                "dataset": dataset,
                "system_a": baseline,
                "system_b": other,
                "kind_b": system_kind(other),
                "n_paired": result.n,
                "both_correct": result.both_correct,
                "a_only_correct": result.a_only,
                "b_only_correct": result.b_only,
                "both_wrong": result.both_wrong,
                "accuracy_a": a.mean() if a.size else math.nan,
                "accuracy_b": b.mean() if b.size else math.nan,
                "difference_b_minus_a": (b.mean() - a.mean()) if a.size else math.nan,
                "p_value": result.p_value,
                "significant_5pct": result.p_value < 0.05,
            }
        )
    return pd.DataFrame(rows)


def answer_length_table(
    judgments: pd.DataFrame, answers: Mapping[str, pd.DataFrame], *, dataset: str
) -> pd.DataFrame:
    """Answer length (o200k tokens) against judged correctness, per system.

    ``auc_longer_correct`` is the probability that a randomly chosen correct answer is longer
    than a randomly chosen wrong one (0.5: length says nothing). Lenient judges reward verbose
    answers, so a system that wins mostly by writing more shows up here (study §10).
    """
    outcomes = question_outcomes(primary(judgments))
    rows = []
    for system, part in outcomes.loc[outcomes["judged"]].groupby("system", sort=False):
        frame = answers.get(system)
        if frame is None or frame.empty:
            continue
        texts = frame.set_index(frame["question_id"].astype(str))["answer"].fillna("").astype(str)
        part = part.loc[part["question_id"].isin(texts.index)]
        lengths = np.array(count_tokens_batch(texts.loc[part["question_id"]].tolist()), dtype=float)
        rows.append(
            {
                "dataset": dataset,
                "system": system,
                **_length_row(lengths, part["correct"].to_numpy(dtype=bool)),
            }
        )
    return pd.DataFrame(rows)


def _length_row(lengths: np.ndarray, ok: np.ndarray) -> dict[str, float | int]:
    """Length statistics of correct and wrong answers, and the chance a correct one is longer."""
    good, bad = lengths[ok], lengths[~ok]
    auc = math.nan
    if good.size and bad.size:
        auc = stats.mann_whitney_u(good, bad) / (good.size * bad.size)
    return {
        "answers": int(lengths.size),
        "median_tokens": float(np.median(lengths)) if lengths.size else math.nan,
        "correct": int(good.size),
        "wrong": int(bad.size),
        "median_tokens_correct": float(np.median(good)) if good.size else math.nan,
        "median_tokens_wrong": float(np.median(bad)) if bad.size else math.nan,
        "mean_tokens_correct": float(good.mean()) if good.size else math.nan,
        "mean_tokens_wrong": float(bad.mean()) if bad.size else math.nan,
        "auc_longer_correct": auc,
    }


def sensitivity_table(judgments: pd.DataFrame, *, dataset: str) -> pd.DataFrame:
    """Accuracy of every system under every judge prompt, and each system's gap to memory under
    the same prompt: if the gap moves with the prompt, part of it is the judge's."""
    outcomes = question_outcomes(judgments)
    rows = []
    for (name, system), part in outcomes.groupby(["prompt_name", "system"], sort=True):
        judged = part.loc[part["judged"]]
        rows.append(
            {
                "dataset": dataset,
                "prompt_name": name,
                "system": system,
                "n": len(part),
                "judged": len(judged),
                "accuracy": judged["correct"].mean() if len(judged) else math.nan,
                "strict_accuracy": judged["correct"].sum() / len(part),
            }
        )
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    memory = table.loc[table["system"] == "memory"].set_index("prompt_name")["accuracy"]
    table["gap_to_memory"] = table["accuracy"] - table["prompt_name"].map(memory)
    return table


__all__ = ["answer_length_table", "mcnemar_table", "sensitivity_table"]
