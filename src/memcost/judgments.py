"""``<dataset>/judgments.jsonl``, one record per judge vote: its schema, its writers and its
readers.

Notebook 04 rewrites the votes that still apply and appends new ones as they arrive; notebook 05
and the report read them back through here, so the file has one definition
(docs/architecture.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from memcost.io import JsonlAppender, read_jsonl, write_jsonl
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


def judgment_record(**values: Any) -> dict[str, Any]:
    """One vote as a record with every schema field, in order (a field not given is null)."""
    unknown = sorted(set(values) - set(JUDGMENT_FIELDS))
    if unknown:
        raise ValueError(f"not judgments.jsonl fields: {unknown}; known: {list(JUDGMENT_FIELDS)}")
    return {name: values.get(name) for name in JUDGMENT_FIELDS}


def rewrite_judgments(path: str | os.PathLike[str], records: Iterable[Mapping[str, Any]]) -> None:
    """Replace the file with ``records`` (the votes that still apply), atomically, in the line
    format :func:`judgment_appender` appends, so a rerun with nothing new rewrites it byte for
    byte."""
    write_jsonl(path, records)


def judgment_appender(path: str | os.PathLike[str]) -> JsonlAppender:
    """Append votes one line at a time as they arrive (flushed, not synced per vote)."""
    return JsonlAppender(path, fsync=False)


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
