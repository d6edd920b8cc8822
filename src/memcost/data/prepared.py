"""The hand-over files of notebook 00, and the one place that writes and reads them.

``data/conversations.parquet`` (one row per turn), ``data/questions.parquet`` (one row per
question) and ``data/conversation_stats.parquet`` (one row per conversation, token counts
included): their schemas (``docs/architecture.md``), how a DataFrame is built to match them, the
writer and the readers. Every later notebook reads these files through this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from memcost.io import write_parquet
from memcost.paths import DatasetPaths

CONVERSATION_SCHEMA = pa.schema(
    [
        ("conversation_id", pa.string()),
        ("session_index", pa.int64()),
        ("session_id", pa.string()),
        ("session_datetime", pa.string()),
        ("turn_index", pa.int64()),
        ("position", pa.int64()),
        ("speaker", pa.string()),
        ("role", pa.string()),
        ("text", pa.string()),
        ("dia_id", pa.string()),
        ("has_answer", pa.bool_()),
        ("image_caption", pa.string()),
    ]
)
QUESTION_SCHEMA = pa.schema(
    [
        ("question_id", pa.string()),
        ("conversation_id", pa.string()),
        ("question", pa.string()),
        ("answer", pa.string()),
        ("adversarial_answer", pa.string()),
        ("category", pa.string()),
        ("category_id", pa.int64()),
        ("question_date", pa.string()),
        ("evidence", pa.list_(pa.string())),
        ("is_abstention", pa.bool_()),
        ("options", pa.list_(pa.string())),
        ("extra", pa.string()),
    ]
)
STATS_SCHEMA = pa.schema(
    [
        ("conversation_id", pa.string()),
        ("n_sessions", pa.int64()),
        ("n_turns", pa.int64()),
        ("n_questions", pa.int64()),
        ("text_tokens", pa.int64()),
        ("history_tokens", pa.int64()),
        ("first_session_datetime", pa.string()),
        ("last_session_datetime", pa.string()),
    ]
)
CONVERSATION_COLUMNS: tuple[str, ...] = tuple(CONVERSATION_SCHEMA.names)
QUESTION_COLUMNS: tuple[str, ...] = tuple(QUESTION_SCHEMA.names)


def frame(columns: Mapping[str, list[Any]], schema: pa.Schema) -> pd.DataFrame:
    """A DataFrame whose dtypes match ``schema`` (nullable ints and bools stay nullable)."""
    data: dict[str, Any] = {}
    for fld in schema:
        values = columns[fld.name]
        if pa.types.is_string(fld.type):
            data[fld.name] = pd.array(values, dtype="str")
        elif pa.types.is_int64(fld.type):
            nullable = any(v is None for v in values)
            data[fld.name] = (
                pd.array(values, dtype="Int64") if nullable else np.asarray(values, dtype=np.int64)
            )
        elif pa.types.is_boolean(fld.type):
            nullable = any(v is None for v in values)
            data[fld.name] = (
                pd.array(values, dtype="boolean") if nullable else np.asarray(values, dtype=bool)
            )
        else:  # lists stay Python objects; the parquet schema gives them their type
            data[fld.name] = pd.Series(values, dtype=object)
    return pd.DataFrame(data, columns=list(schema.names))


class Rows:
    """Column-wise accumulator: appending to lists is the cheap way to build 250k-row tables."""

    def __init__(self, names: Iterable[str]):
        self.columns: dict[str, list[Any]] = {name: [] for name in names}

    def add(self, **row: Any) -> None:
        for name, values in self.columns.items():
            values.append(row[name])


def conversation_stats_path(ds: DatasetPaths) -> Path:
    """``data/conversation_stats.parquet``: per conversation, sessions, turns and tokens."""
    return ds.data / "conversation_stats.parquet"


def write_data_files(
    ds: DatasetPaths, conversations: pd.DataFrame, questions: pd.DataFrame, stats: pd.DataFrame
) -> dict[str, Path]:
    """Write the three parquet files (each atomically, each with its schema)."""
    written = {
        "conversations": ds.conversations,
        "questions": ds.questions,
        "conversation_stats": conversation_stats_path(ds),
    }
    write_parquet(written["conversations"], conversations, schema=CONVERSATION_SCHEMA)
    write_parquet(written["questions"], questions, schema=QUESTION_SCHEMA)
    write_parquet(written["conversation_stats"], stats, schema=STATS_SCHEMA)
    return written


def _read(ds: DatasetPaths, path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: not found; run notebooks/00_prepare_data.ipynb for dataset {ds.name!r} "
            "into this run directory first"
        )
    return pd.read_parquet(path)


def read_conversations(ds: DatasetPaths) -> pd.DataFrame:
    """``data/conversations.parquet`` (schema :data:`CONVERSATION_SCHEMA`), one row per turn."""
    return _read(ds, ds.conversations)


def read_questions(ds: DatasetPaths) -> pd.DataFrame:
    """``data/questions.parquet`` (schema :data:`QUESTION_SCHEMA`), one row per question."""
    return _read(ds, ds.questions)


def read_prepared(ds: DatasetPaths) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(conversations, questions)`` as notebook 00 wrote them."""
    return read_conversations(ds), read_questions(ds)


def read_conversation_stats(ds: DatasetPaths) -> pd.DataFrame:
    """``data/conversation_stats.parquet`` (schema :data:`STATS_SCHEMA`), one row per
    conversation: ``text_tokens`` (Table 1) and ``history_tokens`` (what is billed)."""
    return _read(ds, conversation_stats_path(ds))
