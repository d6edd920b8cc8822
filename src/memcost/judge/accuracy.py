"""Table 3 and what stands beside it (notebook 04, sections 3, 4 and 10): accuracy per system
and per category with Wilson and dialogue-cluster bootstrap intervals, whether the run can be
compared with the paper, the paper's numbers next to the run's, and the step's metrics.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from memcost import paper, stats
from memcost.answers import SYSTEM_KINDS, primary, system_kind
from memcost.calls import OFFLINE
from memcost.io import json_safe
from memcost.judge.questions import JudgePlan
from memcost.judge.votes import JudgingRun, question_outcomes
from memcost.offline import LEXICAL


def _interval_row(
    correct: np.ndarray, clusters: np.ndarray, *, n_resamples: int, seed: int
) -> dict[str, float]:
    k, n = int(correct.sum()), int(correct.size)
    low, high = stats.wilson_interval(k, n)
    b_low, b_high = stats.cluster_bootstrap_interval(
        correct, clusters, n_resamples=n_resamples, seed=seed
    )
    return {
        "wilson_low": low,
        "wilson_high": high,
        "bootstrap_low": b_low,
        "bootstrap_high": b_high,
    }


def accuracy_table(
    judgments: pd.DataFrame,
    *,
    dataset: str,
    missing_answers: Mapping[str, Sequence[str]] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Table 3 for one dataset: one row per system, from the primary prompt's votes.

    ``accuracy`` is the majority accuracy over judged questions, with its Wilson and
    dialogue-cluster bootstrap 95% intervals; ``strict_accuracy`` counts answer errors and
    unjudged questions as wrong (= correct / n, the paper's "correct / all questions" when
    nothing failed); ``vote_mean ± vote_std`` is the EverMemOS-style spread of the votes' own
    accuracies.
    """
    main = primary(judgments)
    outcomes = question_outcomes(main)
    spread = stats.mean_std_over_votes(main, ["system"]).set_index("system")
    judges = main.loc[main["unjudged_cause"].ne("answer")]  # votes a judge actually gave
    rows = []
    for system, part in outcomes.groupby("system", sort=False):
        judged = part.loc[part["judged"]]
        correct = judged["correct"].to_numpy(dtype=bool)
        row = {
            "dataset": dataset,
            "system": system,
            "kind": system_kind(system),
            "judge_model": single_value(judges.loc[judges["system"] == system, "judge_model"]),
            "backend": single_value(judges.loc[judges["system"] == system, "backend"]),
            "prompt_name": single_value(part["prompt_name"]),
            "n": len(part),
            "judged": len(judged),
            "correct": int(correct.sum()),
            "accuracy": correct.mean() if correct.size else math.nan,
            **_interval_row(
                correct,
                judged["conversation_id"].to_numpy(dtype=object),
                n_resamples=n_resamples,
                seed=seed,
            ),
            "vote_mean": spread.loc[system, "vote_mean"] if system in spread.index else math.nan,
            "vote_std": spread.loc[system, "vote_std"] if system in spread.index else math.nan,
            "votes_per_question": int(
                main.loc[main["system"] == system].groupby("question_id").size().max()
            ),
            "strict_accuracy": correct.sum() / len(part) if len(part) else math.nan,
            "unjudged": int((~part["judged"]).sum()),
            "answer_errors": int((part["cause"] == "answer").sum()),
            "judge_failures": int((part["cause"] == "judge").sum()),
            "missing_answers": len((missing_answers or {}).get(system, ())),
            "conversations": int(judged["conversation_id"].nunique()),
            "bootstrap_resamples": n_resamples,
            "bootstrap_seed": seed,
        }
        rows.append(row)
    table = pd.DataFrame(rows)
    if not table.empty:
        order = {s: (SYSTEM_KINDS.index(system_kind(s)), s) for s in table["system"]}
        table = table.sort_values("system", key=lambda s: s.map(order)).reset_index(drop=True)
    return table


def single_value(values: pd.Series) -> str:
    found = sorted({str(v) for v in values.dropna()})
    return found[0] if len(found) == 1 else "+".join(found)


def category_table(judgments: pd.DataFrame, *, dataset: str) -> pd.DataFrame:
    """Accuracy per system and question category (majority of the primary prompt's votes)."""
    outcomes = question_outcomes(primary(judgments))
    rows = []
    for (system, category), part in outcomes.groupby(["system", "category"], sort=True):
        judged = part.loc[part["judged"]]
        k, n = int(judged["correct"].sum()), len(judged)
        low, high = stats.wilson_interval(k, n)
        rows.append(
            {
                "dataset": dataset,
                "system": system,
                "category": category,
                "n": len(part),
                "judged": n,
                "correct": k,
                "accuracy": k / n if n else math.nan,
                "wilson_low": low,
                "wilson_high": high,
                "strict_accuracy": k / len(part) if len(part) else math.nan,
            }
        )
    return pd.DataFrame(rows)


def comparability(
    answers: Mapping[str, pd.DataFrame], judge_backend: str, origin: str | None
) -> tuple[bool, list[str]]:
    """Can this run's accuracies be set against the paper's? ``(ok, reasons they cannot)``."""
    reasons = []
    if judge_backend in (OFFLINE, LEXICAL):
        reasons.append("the judge is the offline lexical rule, not GPT-5-mini")
    offline = sorted(
        s for s, f in answers.items() if not f.empty and (f["backend"].astype(str) == OFFLINE).any()
    )
    if offline:
        reasons.append(f"answers of {', '.join(offline)} come from the offline backend")
    if origin == "sample":
        reasons.append("the data are the bundled synthetic samples, not the benchmark")
    elif origin is None:
        reasons.append("the data's origin is not recorded in the manifest")
    return (not reasons, reasons)


def paper_comparison(table3: pd.DataFrame, *, dataset: str, comparable: bool) -> pd.DataFrame:
    """The paper's Table 3 row for ``dataset`` next to this run's strict accuracy (both in %).

    The paper divides by all questions of the dataset, so the strict accuracy is the matching
    number; the majority over judged questions is shown too.
    """
    published = paper.TABLE3.get(dataset, {})
    mine = table3.set_index("system") if not table3.empty else pd.DataFrame()
    rows = []
    for system in [*published, *[s for s in mine.index if s not in published]]:
        here = mine.loc[system] if system in mine.index else None
        strict = 100 * float(here["strict_accuracy"]) if here is not None else math.nan
        rows.append(
            {
                "dataset": dataset,
                "system": system,
                "paper_accuracy_pct": published.get(system, math.nan),
                "run_strict_accuracy_pct": strict,
                "run_accuracy_pct": 100 * float(here["accuracy"]) if here is not None else math.nan,
                "difference_pct": strict - published.get(system, math.nan),
                "comparable": comparable and system in published and here is not None,
            }
        )
    return pd.DataFrame(rows)


def _number(value: Any) -> float | None:
    return None if pd.isna(value) else round(float(value), 6)


def _system_metrics(row: Any) -> dict[str, Any]:
    return {
        "accuracy": _number(row.accuracy),
        "strict_accuracy": _number(row.strict_accuracy),
        "vote_mean": _number(row.vote_mean),
        "vote_std": _number(row.vote_std),
        "wilson_95": [_number(row.wilson_low), _number(row.wilson_high)],
        "bootstrap_95": [_number(row.bootstrap_low), _number(row.bootstrap_high)],
        "n": int(row.n),
        "judged": int(row.judged),
        "correct": int(row.correct),
        "unjudged": int(row.unjudged),
        "answer_errors": int(row.answer_errors),
        "judge_failures": int(row.judge_failures),
        "missing_answers": int(row.missing_answers),
        "judge_model": row.judge_model,
    }


def step_metrics(
    table3: pd.DataFrame, plan: JudgePlan, run: JudgingRun, **extra: Any
) -> dict[str, Any]:
    """What notebook 04 records: the accuracy numbers per system and the counts behind them."""
    out = {
        "judge_model": run.judge_label,
        "mode": plan.mode,
        "systems": list(plan.items),
        "scored_questions": len(plan.questions),
        "all_questions": plan.all_questions,
        "excluded": plan.excluded,
        "accuracy": {row.system: _system_metrics(row) for row in table3.itertuples()},
        "votes_sent": run.sent,
        "votes_reused": run.reused,
        "unjudged": int(table3["unjudged"].sum()) if not table3.empty else 0,
    }
    out.update({key: json_safe(value) for key, value in extra.items()})
    return out


__all__ = [
    "accuracy_table",
    "category_table",
    "comparability",
    "paper_comparison",
    "single_value",
    "step_metrics",
]
