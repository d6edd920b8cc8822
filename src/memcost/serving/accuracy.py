"""Accuracy for cost per accuracy: read from a run's LoCoMo judgments, never made up.

The study judges each answer once (CORRECT / WRONG) on its four-conversation subset. Here the
accuracy of a served system comes from notebook 04's ``judgments.jsonl`` of a run, restricted to
the subset's conversations: the first vote of the primary judge prompt (one vote, as in the
study), counted over all the subset's questions (an unjudged question is not correct). Its 95%
interval is a dialogue-cluster bootstrap (whole conversations resampled), not Wilson. A served
system with no judged counterpart has no accuracy, and its cost per accuracy is missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from memcost.catalog import slug
from memcost.io import read_jsonl
from memcost.stats import cluster_bootstrap_interval


def judged_system(system: str, model: str) -> str | None:
    """The notebook-04 system whose answers stand for a served system (None: none does)."""
    return {
        "full_history": f"long_context_{slug(model)}",
        "rolling_window": f"rolling_window_{slug(model)}",
        "mem0": "memory",
    }.get(system)


def subset_accuracy(
    judgments_path: Path,
    conversations: Sequence[str],
    systems: Sequence[str],
    models: Sequence[str],
    *,
    mapping: Mapping[str, str] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per (served system, model): ``accuracy`` with its interval and where it came
    from, or ``status`` saying why it is missing. ``mapping`` names the judged system to use
    for a served system when it is not the same model's (say so in the table)."""
    records = read_jsonl(judgments_path, missing_ok=True)
    judged = pd.DataFrame(records)
    rows = []
    for system in systems:
        for model in models:
            name = (mapping or {}).get(system) or judged_system(system, model)
            row = {
                "system": system,
                "model": model,
                "judged_system": name,
                "accuracy": None,
                "accuracy_low": None,
                "accuracy_high": None,
                "questions": 0,
            }
            if name is None:
                rows.append({**row, "status": "missing: no judged counterpart of this system"})
                continue
            if judged.empty:
                rows.append({**row, "status": f"missing: no judgments at {judgments_path}"})
                continue
            mine = judged[
                (judged["system"] == name)
                & judged["primary"].astype(bool)
                & (judged["vote"] == 0)
                & judged["conversation_id"].isin(list(conversations))
            ]
            if mine.empty:
                rows.append({**row, "status": f"missing: {name} not judged on the subset"})
                continue
            correct = mine["label"].astype(str).str.upper().eq("CORRECT")
            low, high = cluster_bootstrap_interval(
                correct, mine["conversation_id"], n_resamples=n_resamples, seed=seed
            )
            rows.append(
                {
                    **row,
                    "accuracy": float(correct.mean()),
                    "accuracy_low": low,
                    "accuracy_high": high,
                    "questions": int(len(mine)),
                    "judge_model": str(mine["judge_model"].iloc[0]),
                    "backend": str(mine["backend"].iloc[0]),
                    "status": "measured",
                }
            )
    return pd.DataFrame(rows)
