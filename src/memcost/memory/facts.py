"""The files of the paper's memory, per user and per dataset (one writer, one reader), and what
notebook 01 reports."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from memcost.io import atomic_path, read_json, read_jsonl, write_json, write_jsonl
from memcost.memory.faiss_store import user_stem
from memcost.paths import DatasetPaths

DECISIONS = ("ADD", "UPDATE", "DELETE", "NOOP")  # the update phase's, per new fact
FACT_STATUSES = ("active", "superseded", "deleted")
FACT_SCHEMA = pa.schema(
    [
        ("fact_id", pa.string()),
        ("conversation_id", pa.string()),
        ("text", pa.string()),
        ("speaker", pa.string()),
        ("session_index", pa.int64()),
        ("session_id", pa.string()),
        ("session_datetime", pa.string()),
        ("position_start", pa.int64()),
        ("position_end", pa.int64()),
        ("source_positions", pa.list_(pa.int64())),
        ("source_dia_ids", pa.list_(pa.string())),
        ("source_has_answer", pa.bool_()),
        ("segment_index", pa.int64()),
        ("status", pa.string()),
        ("superseded_by", pa.string()),
        ("replaces", pa.string()),
        ("created_by", pa.string()),
        ("tokens", pa.int64()),
        ("backend", pa.string()),
        ("prompt_version", pa.string()),
    ]
)
SEGMENT_SCHEMA = pa.schema(
    [
        ("conversation_id", pa.string()),
        ("segment_index", pa.int64()),
        ("session_index", pa.int64()),
        ("session_id", pa.string()),
        ("session_datetime", pa.string()),
        ("messages", pa.int64()),
        ("person_messages", pa.int64()),
        ("chars", pa.int64()),
        ("position_start", pa.int64()),
        ("position_end", pa.int64()),
        ("split_parts", pa.int64()),
        ("status", pa.string()),
        ("candidates", pa.int64()),
        ("error", pa.string()),
    ]
)
SPLIT_SCHEMA = pa.schema(
    [
        ("conversation_id", pa.string()),
        ("position", pa.int64()),
        ("chars", pa.int64()),
        ("parts", pa.int64()),
    ]
)
DONE = "done.json"  # the user is finished: a resume skips it
INCOMPLETE = "incomplete.json"  # written, but with failed segments: a resume builds it again
MARKERS = (DONE, INCOMPLETE)
UPDATE_FIELDS = (
    "conversation_id",
    "segment_index",
    "candidate_index",
    "candidate_text",
    "speaker",
    "session_datetime",
    "decision",
    "target_fact_id",
    "merged_text",
    "fact_id",
    "compared_fact_ids",
    "backend",
    "prompt_version",
    "note",
)


# --- Where -------------------------------------------------------------------------------------


def user_dir(ds: DatasetPaths, user: str) -> Path:
    return ds.memory / "users" / user_stem(user)


# --- Writers -----------------------------------------------------------------------------------


def write_table(path: Path, table: pa.Table) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def write_user_files(
    ds: DatasetPaths,
    user: str,
    facts: pa.Table,
    segment_rows: Sequence[Mapping[str, Any]],
    updates: Sequence[Mapping[str, Any]],
) -> None:
    """One user's facts, segments and updates (``done.json`` removed first, written last by
    :func:`mark_done`)."""
    folder = user_dir(ds, user)
    folder.mkdir(parents=True, exist_ok=True)
    for marker in MARKERS:
        (folder / marker).unlink(missing_ok=True)
    write_table(folder / "facts.parquet", facts)
    write_table(
        folder / "segments.parquet", pa.Table.from_pylist(list(segment_rows), schema=SEGMENT_SCHEMA)
    )
    write_jsonl(folder / "updates.jsonl", updates)


def mark_done(
    ds: DatasetPaths, user: str, fingerprint: str, *, embedding_model: str = "", **counts: int
) -> None:
    """The marker that ``user`` is finished with ``fingerprint``; with ``failed_segments``,
    ``incomplete.json`` (its files used and counted as failures until rebuilt)."""
    folder = user_dir(ds, user)
    record = {
        "conversation_id": user,
        "fingerprint": fingerprint,
        **({"embedding_model": embedding_model} if embedding_model else {}),
        **counts,
        "finished_at": datetime.now().astimezone().isoformat(timespec="seconds"),
    }
    if counts.get("failed_segments"):
        (folder / DONE).unlink(missing_ok=True)
        write_json(folder / INCOMPLETE, record)
    else:
        (folder / INCOMPLETE).unlink(missing_ok=True)
        write_json(folder / DONE, record)


def read_incomplete(ds: DatasetPaths, user: str) -> dict[str, Any] | None:
    marker = user_dir(ds, user) / INCOMPLETE
    try:
        return read_json(marker) if marker.is_file() else None
    except ValueError:
        return None


def read_done(ds: DatasetPaths, user: str) -> dict[str, Any] | None:
    """``done.json``, or ``None`` when missing or unreadable."""
    marker = user_dir(ds, user) / DONE
    if not marker.is_file():
        return None
    try:
        return read_json(marker)
    except ValueError:
        return None


def write_dataset_files(
    ds: DatasetPaths, users: Sequence[str], splits: Iterable[Mapping[str, Any]]
) -> None:
    """The written users' files concatenated in ``users`` order, and ``splits.parquet``."""
    facts, segments, updates = [], [], []
    for user in users:
        folder = user_dir(ds, user)
        if not any((folder / marker).is_file() for marker in MARKERS):
            continue
        facts.append(pq.read_table(folder / "facts.parquet"))
        segments.append(pq.read_table(folder / "segments.parquet"))
        updates.extend(read_jsonl(folder / "updates.jsonl", missing_ok=True))
    memory = ds.memory
    write_table(
        memory / "facts.parquet", pa.concat_tables(facts) if facts else FACT_SCHEMA.empty_table()
    )
    write_table(
        memory / "segments.parquet",
        pa.concat_tables(segments) if segments else SEGMENT_SCHEMA.empty_table(),
    )
    write_table(memory / "splits.parquet", pa.Table.from_pylist(list(splits), schema=SPLIT_SCHEMA))
    write_jsonl(memory / "updates.jsonl", updates)


# --- Readers -----------------------------------------------------------------------------------


def _missing(ds: DatasetPaths, path: Path) -> FileNotFoundError:
    return FileNotFoundError(
        f"{path}: no memory for dataset {ds.name!r}; run notebooks/01_extract_facts.ipynb first"
    )


def read_facts(ds: DatasetPaths, *, missing_ok: bool = False) -> pd.DataFrame | None:
    """Missing: an error naming notebook 01, or ``None`` with ``missing_ok``."""
    path = ds.memory / "facts.parquet"
    if not path.is_file():
        if missing_ok:
            return None
        raise _missing(ds, path)
    return pd.read_parquet(path)


def read_segments(ds: DatasetPaths) -> pd.DataFrame:
    path = ds.memory / "segments.parquet"
    if not path.is_file():
        raise _missing(ds, path)
    return pd.read_parquet(path)


def read_splits(ds: DatasetPaths) -> pd.DataFrame:
    path = ds.memory / "splits.parquet"
    if not path.is_file():
        raise _missing(ds, path)
    return pd.read_parquet(path)


def read_updates(ds: DatasetPaths) -> pd.DataFrame:
    """No file: no rows, the columns still there."""
    records = read_jsonl(ds.memory / "updates.jsonl", missing_ok=True)
    return pd.DataFrame.from_records(records, columns=list(UPDATE_FIELDS))


def memory_users(conversations: pd.DataFrame, questions: pd.DataFrame | None) -> list[str]:
    """Every conversation, and any a question is about without turns (an empty memory)."""
    ids = conversations["conversation_id"].astype(str).tolist()
    if questions is not None:
        ids += questions["conversation_id"].astype(str).tolist()
    return list(dict.fromkeys(ids))


def _history_stats(ds: DatasetPaths) -> pd.DataFrame:
    path = ds.data / "conversation_stats.parquet"
    stats = (
        pd.read_parquet(path)
        if path.is_file()
        else pd.DataFrame(columns=["conversation_id", "n_turns", "history_tokens", "text_tokens"])
    )
    return stats.set_index("conversation_id")


def user_stats(ds: DatasetPaths, users: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per user: facts written and active, fact tokens, history tokens, ``compression`` (the
    paper: ~101,600 → ~2,909, about 35:1)."""
    facts = read_facts(ds)
    segments = read_segments(ds)
    if users is None:
        users = list(
            dict.fromkeys(segments["conversation_id"].tolist() + facts["conversation_id"].tolist())
        )
    stats = _history_stats(ds)
    # grouped once: a scan of the whole tables per user is quadratic in the dataset's size
    facts_of = {str(u): g for u, g in facts.groupby("conversation_id", sort=False)}
    segments_of = {str(u): g for u, g in segments.groupby("conversation_id", sort=False)}
    rows = []
    for user in users:
        mine = facts_of.get(user, facts.iloc[0:0])
        active = mine.loc[mine["status"] == "active"]
        segs = segments_of.get(user, segments.iloc[0:0])
        history = int(stats.loc[user, "history_tokens"]) if user in stats.index else 0
        fact_tokens = int(active["tokens"].sum())
        rows.append(
            {
                "conversation_id": user,
                "turns": int(stats.loc[user, "n_turns"]) if user in stats.index else 0,
                "history_tokens": history,
                "segments": len(segs),
                "failed_segments": int((segs["status"] == "failed").sum()),
                "facts_written": len(mine),
                "active_facts": len(active),
                "superseded": int((mine["status"] == "superseded").sum()),
                "deleted": int((mine["status"] == "deleted").sum()),
                "fact_tokens": fact_tokens,
                "compression": round(history / fact_tokens, 2) if fact_tokens else None,
            }
        )
    return pd.DataFrame(rows)


def decision_counts(updates: pd.DataFrame) -> dict[str, int]:
    counts = Counter(updates["decision"].tolist()) if len(updates) else Counter()
    return {d: int(counts.get(d, 0)) for d in DECISIONS}


def memory_metrics(ds: DatasetPaths, stats: pd.DataFrame) -> dict[str, Any]:
    updates = read_updates(ds)
    segments = read_segments(ds)
    splits = read_splits(ds)
    active = stats["active_facts"] if len(stats) else pd.Series(dtype="int64")
    history = int(stats["history_tokens"].sum()) if len(stats) else 0
    fact_tokens = int(stats["fact_tokens"].sum()) if len(stats) else 0
    return {
        "users": len(stats),
        "segments": len(segments),
        "segments_failed": int((segments["status"] == "failed").sum()),
        "segments_without_person": int((segments["status"] == "no_person_messages").sum()),
        "split_messages": len(splits),
        "candidates": len(updates),
        "facts_written": int(stats["facts_written"].sum()) if len(stats) else 0,
        "active_facts": int(active.sum()),
        "facts_per_user_mean": round(float(active.mean()), 2) if len(active) else 0.0,
        "facts_per_user_min": int(active.min()) if len(active) else 0,
        "facts_per_user_max": int(active.max()) if len(active) else 0,
        "fact_tokens_per_user_mean": round(fact_tokens / len(stats), 1) if len(stats) else 0.0,
        "history_tokens_per_user_mean": round(history / len(stats), 1) if len(stats) else 0.0,
        "compression_ratio": round(history / fact_tokens, 2) if fact_tokens else None,
        "decisions": decision_counts(updates),
        "update_notes": int(updates["note"].notna().sum()) if len(updates) else 0,
    }
