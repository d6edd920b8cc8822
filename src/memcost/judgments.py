"""``<dataset>/judgments.jsonl``, one record per judge vote: its schema and its readers.

Notebook 04 appends the votes; notebook 05 and the report read them back through here, so the
file has one definition (docs/architecture.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from memcost.io import read_jsonl
from memcost.paths import DatasetPaths, RunPaths

# judgments.jsonl, one record per vote (docs/architecture.md), in this order.
JUDGMENT_FIELDS = (
    "question_id",
    "conversation_id",
    "system",
    "category",
    "vote",
    "label",
    "reason",
    "judge_model",
    "backend",
    "prompt_name",
    "prompt_version",
    "instruction",
    "mode",
    "primary",
    "unjudged_cause",
    "request_hash",
)


def read_judgments(source: DatasetPaths | str | os.PathLike[str]) -> pd.DataFrame:
    """One dataset's votes with every schema column (a missing or empty file: no rows)."""
    path = source.judgments if isinstance(source, DatasetPaths) else Path(source)
    frame = pd.DataFrame.from_records(read_jsonl(path, missing_ok=True))
    for column in JUDGMENT_FIELDS:
        if column not in frame.columns:
            frame[column] = pd.Series(dtype="object")
    if not frame.empty:
        frame["vote"] = frame["vote"].astype(int)
        frame["primary"] = frame["primary"].fillna(True).astype(bool)
    return frame[list(JUDGMENT_FIELDS)]


def read_run_judgments(run: RunPaths) -> pd.DataFrame:
    """Every dataset's votes in a run, with a ``dataset`` column first."""
    frames = []
    for ds in run.datasets():
        frame = read_judgments(ds)
        if not frame.empty:
            frames.append(frame.assign(dataset=ds.name))
    if not frames:
        return pd.DataFrame(columns=["dataset", *JUDGMENT_FIELDS])
    out = pd.concat(frames, ignore_index=True)
    return out[["dataset", *JUDGMENT_FIELDS]]


def primary(judgments: pd.DataFrame) -> pd.DataFrame:
    """The votes of the primary prompt (what Table 3 reports)."""
    return judgments.loc[judgments["primary"].astype(bool)].reset_index(drop=True)
