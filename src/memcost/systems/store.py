"""The files of the memory systems other than ``mem0_style``: one folder per system.

``<ds>/memory/systems/<name>/`` holds, per user, ``<user>.parquet`` (the stored items: schema
:data:`ITEM_SCHEMA`, vectors as ``float32`` lists, invalidated items kept with ``valid`` false)
and ``done.json``: ``{user: {"fingerprint": ..., "calls": n}}``, written after the user's items,
so a user in ``done.json`` with this build's fingerprint is finished and a killed build redoes
only the users it had not finished. A failed user is in ``failed.json`` (reason), and retried.
This module is the only one that reads or writes these files.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memcost.io import read_json, write_json
from memcost.paths import DatasetPaths

# What a stored item is, whatever the system (a chunk, a triple, a summary, an observation, ...).
ITEM_SCHEMA = {
    "item_id": "str",  # unique within the user
    "kind": "str",  # chunk | triple | entity | summary | turn | archive | observation | fact
    "text": "str",  # what the reader is shown
    "session_datetime": "str | None",  # ISO date of the conversation it came from
    "tokens": "int",  # o200k tokens of the text
    "valid": "bool",  # false: superseded (graph relations are marked, never deleted)
    "detail": "str",  # JSON of the system's own fields (a triple's source, relation, ...)
    "positions": "list[int]",  # the turns it came from (evidence recall); [] for a summary
}
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def system_dir(ds: DatasetPaths, name: str) -> Path:
    return ds.memory / "systems" / name


def _user_file(folder: Path, user: str) -> Path:
    return folder / f"{_SAFE.sub('_', user)}.parquet"


def write_user(
    folder: Path,
    user: str,
    items: pd.DataFrame,
    vectors: np.ndarray | None,
    *,
    fingerprint: str,
    calls: int,
    info: dict[str, Any] | None = None,
) -> None:
    """One finished user: its items (with vectors), then its line in ``done.json`` (with
    ``info``: what the system says about the build, e.g. which gates fired)."""
    missing = [c for c in ITEM_SCHEMA if c not in items.columns]
    if missing:
        raise ValueError(f"items of {user} lack columns {missing}")
    frame = items[list(ITEM_SCHEMA)].copy()
    frame["conversation_id"] = user
    if vectors is not None:
        if len(vectors) != len(frame):
            raise ValueError(f"{user}: {len(frame)} items but {len(vectors)} vectors")
        frame["vector"] = [np.asarray(v, dtype=np.float32).tolist() for v in vectors]
    folder.mkdir(parents=True, exist_ok=True)
    path = _user_file(folder, user)
    frame.to_parquet(path.with_suffix(".tmp"), index=False)
    path.with_suffix(".tmp").replace(path)
    done = read_done(folder)
    done[user] = {"fingerprint": fingerprint, "calls": int(calls), **(info or {})}
    write_json(folder / "done.json", done)
    failed = read_failed(folder)
    if failed.pop(user, None) is not None:
        write_json(folder / "failed.json", failed)


def read_done(folder: Path) -> dict[str, dict[str, Any]]:
    path = folder / "done.json"
    return dict(read_json(path)) if path.is_file() else {}


def read_failed(folder: Path) -> dict[str, str]:
    path = folder / "failed.json"
    return dict(read_json(path)) if path.is_file() else {}


def record_failures(folder: Path, failures: dict[str, str]) -> None:
    """Add this build's failed users (a user built later is taken off again)."""
    if failures:
        write_json(folder / "failed.json", {**read_failed(folder), **failures})


def finished(folder: Path, users: list[str], fingerprint: str) -> set[str]:
    """The users whose items were written by a build with ``fingerprint``."""
    done = read_done(folder)
    return {
        u
        for u in users
        if done.get(u, {}).get("fingerprint") == fingerprint and _user_file(folder, u).is_file()
    }


def read_user(folder: Path, user: str) -> tuple[pd.DataFrame, np.ndarray | None]:
    """A finished user's items and their vectors (``None`` for a system that stores none)."""
    path = _user_file(folder, user)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no memory for {user}; run notebook 01 first")
    frame = pd.read_parquet(path)
    vectors = None
    if "vector" in frame.columns:
        vectors = (
            np.stack([np.asarray(v, dtype=np.float32) for v in frame["vector"]])
            if len(frame)
            else np.zeros((0, 0), dtype=np.float32)
        )
        frame = frame.drop(columns=["vector"])
    return frame, vectors


def state_table(folder: Path) -> pd.DataFrame:
    """One row per finished user: items (valid ones), tokens held, model calls made."""
    rows = []
    for user, entry in read_done(folder).items():
        path = _user_file(folder, user)
        if not path.is_file():
            continue
        items = pd.read_parquet(path, columns=["tokens", "valid"])
        held = items.loc[items["valid"]]
        rows.append(
            {
                "conversation_id": user,
                "items": len(held),
                "tokens": int(held["tokens"].sum()),
                "invalid_items": int((~items["valid"]).sum()),
                "calls": int(entry.get("calls", 0)),
                **{k: v for k, v in entry.items() if k not in ("fingerprint", "calls")},
            }
        )
    return pd.DataFrame(rows).reindex(
        columns=list(
            dict.fromkeys(
                [
                    "conversation_id",
                    "items",
                    "tokens",
                    "invalid_items",
                    "calls",
                    *[c for r in rows for c in r],
                ]
            )
        )
    )
