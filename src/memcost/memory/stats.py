"""What notebook 01 reports about the memory: per-user sizes and the step's metrics."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pandas as pd

from memcost.data import read_prepared
from memcost.memory.facts import read_facts, read_segments, read_splits, read_updates
from memcost.memory.update import DECISIONS
from memcost.paths import DatasetPaths


def read_inputs(ds: DatasetPaths) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Notebook 00's ``conversations`` and ``questions``; missing: an error naming notebook 00."""
    return read_prepared(ds)


def memory_users(conversations: pd.DataFrame, questions: pd.DataFrame) -> list[str]:
    """Every user whose memory is built: each conversation, plus any conversation a question
    is about that has no turns (its memory is empty, and its questions get "no information")."""
    ids = conversations["conversation_id"].astype(str).tolist()
    ids += questions["conversation_id"].astype(str).tolist()
    return list(dict.fromkeys(ids))


def _history_stats(ds: DatasetPaths) -> pd.DataFrame:
    """Notebook 00's per-conversation token counts, by ``conversation_id`` (empty if absent)."""
    path = ds.data / "conversation_stats.parquet"
    stats = (
        pd.read_parquet(path)
        if path.is_file()
        else pd.DataFrame(columns=["conversation_id", "n_turns", "history_tokens", "text_tokens"])
    )
    return stats.set_index("conversation_id")


def user_stats(ds: DatasetPaths, users: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per user: facts written and active, fact tokens, history tokens, compression.

    ``history_tokens`` is the long-context rendering (what a long-context request carries) from
    notebook 00's ``conversation_stats.parquet``; ``compression`` = history tokens / active-fact
    tokens (the paper: ~101,600 → ~2,909, about 35:1).
    """
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
    """Update-phase decisions by kind, every kind listed (zero when absent)."""
    counts = Counter(updates["decision"].tolist()) if len(updates) else Counter()
    return {d: int(counts.get(d, 0)) for d in DECISIONS}


def memory_metrics(ds: DatasetPaths, stats: pd.DataFrame) -> dict[str, Any]:
    """The numbers notebook 01 records (and a test or the report checks)."""
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
