"""The notebooks' walk-through calls, remembered in the run directory.

Notebooks 01 and 02 walk one user and one question through the algorithm with real calls before
the batch. The batch never pays twice for an item: it skips the items its output files already
hold. The walk-through has no output file of its own, so its replies are kept here, in
``<run>/walkthrough_calls.jsonl`` (one record per request key, in the disk cache's row format,
``memcost.llm.calling``), and served from here before the disk cache is asked: a rerun of the
notebooks after the cache was emptied (or with ``cache_mode: off``) sends none of them again
and records none of them twice in ``calls.jsonl``. A changed setting (model, prompt, backend)
changes the request key, so that call is made again.

This module owns the file: :class:`WalkthroughMemo` is its reader and writer.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from memcost.io import JsonlAppender, read_jsonl


class WalkthroughMemo:
    """Request key → stored reply, read at open, appended (fsync'd) as calls complete."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, Any]] = {
            str(r["key"]): r["response"]
            for r in read_jsonl(self.path, missing_ok=True)
            if "key" in r and "response" in r
        }
        self._out: JsonlAppender | None = None

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self._entries.get(key)

    def put(self, key: str, response: dict[str, Any]) -> None:
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = response
            if self._out is None:
                self._out = JsonlAppender(self.path)
            self._out.write({"key": key, "response": response})

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def close(self) -> None:
        with self._lock:
            if self._out is not None:
                self._out.close()
                self._out = None
