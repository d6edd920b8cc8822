"""The usage ledger: ``calls.jsonl`` in the run directory, one record per model call.

Records are appended and flushed one at a time, so a killed run keeps every call it finished.
The ledger is also the run's checkpoint: a call whose key (request hash + tags) is already
recorded is not recorded again, so rerunning a killed or finished notebook in the same run
directory leaves every call recorded exactly once (the response itself comes back from the disk
cache). Cost tables are computed from these records and :mod:`memcost.prices`, never typed in.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memcost.calls import (  # noqa: F401 - the record schema, re-exported for the client
    BASE_FIELDS,
    RESERVED_FIELDS,
    STANDARD_TAGS,
    call_key,
    is_paid,
    normalise_tags,
    record_call_key,
    record_cost,
    spent_usd,
)
from memcost.io import JsonlAppender, read_jsonl
from memcost.llm.requests import Usage

_SYNC_EVERY_S = 1.0


def make_record(
    *,
    stage: str,
    provider: str,
    model: str,
    backend: str,
    request_hash: str,
    prompt_version: str,
    cached: bool,
    usage: Usage,
    latency_s: float,
    attempts: int,
    error: str | None,
    sample_index: int,
    tags: Mapping[str, Any],
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "stage": stage,
        "provider": provider,
        "model": model,
        "backend": backend,
        "request_hash": request_hash,
        "prompt_version": prompt_version,
        "cached": cached,
        "prompt_tokens": usage.prompt_tokens,
        "cached_prompt_tokens": usage.cached_prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "latency_s": round(float(latency_s), 4),
        "attempts": attempts,
        "error": error,
        "sample_index": sample_index,
    }
    record.update(normalise_tags(tags))
    return record


class Ledger:
    """Appends records to ``calls.jsonl`` and knows which calls the run has already recorded."""

    def __init__(
        self, path: str | Path, *, price_overrides: Mapping[str, Mapping[str, Any]] | None = None
    ):
        self.path = Path(path)
        self.price_overrides = price_overrides
        self._lock = threading.Lock()
        self._keys: set[str] = set()  # call keys of completed calls (the checkpoint)
        self._paid: set[str] = set()  # request hashes this run paid for
        self.spent_before_usd = 0.0  # paid by this run before this client opened the ledger
        self.records_before = 0
        for record in read_jsonl(self.path, missing_ok=True):
            self.records_before += 1
            self._note(record)
            if is_paid(record):
                self.spent_before_usd += record_cost(record, price_overrides) or 0.0
        # Flushed per record (survives SIGKILL); fsync'd at most once a second, so replaying
        # thousands of cached calls is not bound by the disk.
        self._out = JsonlAppender(self.path, fsync=False)
        self._last_sync = time.monotonic()

    def _note(self, record: Mapping[str, Any]) -> None:
        if record.get("error"):
            return  # a failed call is not done: a rerun tries it again
        self._keys.add(record_call_key(record))
        if is_paid(record):
            self._paid.add(str(record["request_hash"]))

    def seen(self, key: str) -> bool:
        with self._lock:
            return key in self._keys

    def paid(self, request_hash: str) -> bool:
        with self._lock:
            return request_hash in self._paid

    def write(self, record: dict[str, Any]) -> None:
        self._out.write(record)
        with self._lock:
            self._note(record)
            now = time.monotonic()
            # a paid call is on disk before it counts; cache hits are synced once a second
            sync = is_paid(record) or now - self._last_sync > _SYNC_EVERY_S
            if sync:
                self._last_sync = now
        if sync:
            self._out.sync()

    def close(self) -> None:
        self._out.close()


# --- The ledger against the cache -------------------------------------------------------------

# Calls a kill can leave in the cache but not yet in the ledger (in flight at once); a resume
# records those itself. More unrecorded calls than this means the ledger lost records.
LEDGER_SLACK = 32


class LedgerDamaged(RuntimeError):
    """``calls.jsonl`` is missing or truncated while the cache says this run paid for calls."""


def ledger_gaps(
    calls_path: str | Path, cache: Any, run_id: str
) -> tuple[list[dict[str, Any]], set[str]]:
    """What the cache holds of this run that the ledger lacks, the ledger read once: the rows
    this run paid for (``origin == run_id``) with no paid record, and the call keys of the
    cache hits it recorded (the cache notes them after the ledger) that it no longer holds.
    ``cache`` is a :class:`memcost.llm.cache.ResponseCache`; a damaged line: ``ValueError``."""
    records = read_jsonl(calls_path, missing_ok=True)
    paid = {str(r.get("request_hash")) for r in records if is_paid(r)}
    recorded = {record_call_key(r) for r in records}
    return (
        [row for row in cache.rows_of(run_id) if row["key"] not in paid],
        cache.read_keys_of(run_id) - recorded,
    )


def check_ledger(calls_path: str | Path, cache: Any, run_id: str, run_name: str) -> None:
    """Stop (:class:`LedgerDamaged`) when the ledger lost records the cache says were paid, or
    holds a damaged line (a record overwritten in the middle is never skipped silently)."""
    try:
        missing, lost_reads = ledger_gaps(calls_path, cache, run_id)
    except ValueError as exc:
        raise LedgerDamaged(
            f"{exc}: the ledger is damaged, so cost tables and the budget would be wrong. "
            f"Rebuild it from the cache: python -m memcost repair-ledger {run_name} (the "
            "damaged file is kept beside it; then resume the run)"
        ) from None
    gone = not Path(calls_path).is_file()
    if lost_reads or (missing and (gone or len(missing) > LEDGER_SLACK)):
        # a kill leaves a few paid calls unrecorded (their resume records them), never a read:
        # the cache notes a read only once the ledger holds it
        state = "is missing" if gone else "is truncated"
        lost = (
            (f"{len(missing)} calls this run paid for" if missing else "")
            + (" and " if missing and lost_reads else "")
            + (f"{len(lost_reads)} calls it was served from the cache" if lost_reads else "")
        )
        raise LedgerDamaged(
            f"{calls_path} {state}: the response cache ({cache.path}) holds {lost} that it "
            "does not record, so cost tables and the budget would be wrong. Rebuild it from the "
            f"cache: python -m memcost repair-ledger {run_name} (then resume the run)"
        )


def salvage(calls_path: str | Path) -> None:
    """A ledger with damaged lines: moved aside as ``calls.jsonl.damaged-<time>`` and written
    again with its readable records only (the rebuild then adds what the damage took)."""
    path = Path(calls_path)
    kept = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # the damage itself: what it held is rebuilt from the cache
        kept.append(record)
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
    os.replace(path, aside)
    with JsonlAppender(path) as out:
        for record in kept:
            out.write(record)


def repair_ledger(calls_path: str | Path, cache: Any, run_id: str) -> int:
    """Append a record for every call this run paid for that the ledger lacks, rebuilt from
    its cache row (usage, attempts, latency, tags), and for every call it was served from the
    cache, as the cache noted it (``reads``); returns how many were added. A ledger with damaged
    lines is salvaged first (:func:`salvage`)."""
    try:
        missing, lost_reads = ledger_gaps(calls_path, cache, run_id)
    except ValueError:
        salvage(calls_path)
        missing, lost_reads = ledger_gaps(calls_path, cache, run_id)
    reads = [record for key, record in cache.reads_of(run_id) if key in lost_reads]
    out = JsonlAppender(calls_path)
    try:
        for record in reads:  # served from the cache: the record as it was written
            out.write({**record, "repaired": True})
        for row in missing:
            saved = row.get("record") or {}
            record = make_record(
                stage=row["stage"],
                provider=str(saved.get("provider", "unknown")),
                model=row["model"],
                backend=str(saved.get("backend", "unknown")),
                request_hash=row["key"],
                prompt_version=str(saved.get("prompt_version", "")),
                cached=False,
                usage=Usage.from_dict(row.get("usage") or {}),
                latency_s=float(row.get("latency_s") or 0.0),
                attempts=int(row.get("attempts") or 1),
                error=None,
                sample_index=int(saved.get("sample_index", 0)),
                tags=saved.get("tags") or {},
            )
            record["timestamp"] = row["created_at"]
            if row.get("execution"):  # sent through the Batch API or Flex: its price
                record["execution"] = row["execution"]
            record["repaired"] = True
            out.write(record)
    finally:
        out.close()
    return len(missing) + len(reads)
