"""``batches.jsonl`` in the run directory: every batch the run submitted, and how it ended.

This module owns the file (schema, writer, reader). Events are appended and fsync'd one at a
time, each before the step it guards goes on, so a run killed anywhere can re-attach:

- ``uploaded``: the input file exists at the provider (``input_file_id``), with the requests it
  holds (``keys``: their cache keys), model, URL, stage, endpoint and estimated cost. Written
  before the batch is created: a run killed between the two finds its batch by that file id.
- ``created``: the batch exists (``batch_id``). Written before any waiting.
- ``finished``: its results are in the cache and ledger (``status``, output and error file ids,
  completed and failed counts; ``not_asked``: of the completed, those the run that re-attached
  no longer sends, its parameters having changed; ``unused``: such answers of a batch journaled
  without its requests, paid and not stored). A finished batch is never attached to again.

A batch that was uploaded or created but not finished is *open*: a rerun waits for it instead
of submitting its requests again.

Beside it, ``batches/<input file id>.requests.jsonl`` keeps each batch's requests as they were
asked (written before the ``uploaded`` event): a rerun whose calls no longer send some of them
(its parameters changed) still puts their paid answers in the cache and the ledger, tagged as
they were asked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memcost.io import JsonlAppender, atomic_open, jsonl_line, read_jsonl
from memcost.llm.requests import request_from_record, request_record

FILE_NAME = "batches.jsonl"
REQUESTS_FOLDER = "batches"  # beside it: each batch's requests, by input file id
EVENTS = ("uploaded", "created", "finished")


def journal_path(run_root: str | Path) -> Path:
    return Path(run_root) / FILE_NAME


@dataclass
class Entry:
    """One batch as the journal knows it."""

    input_file_id: str
    model: str
    url: str
    stage: str
    endpoint: str  # the endpoint's identity (never a key)
    keys: list[str]
    estimate_usd: float = 0.0
    submitted_at: str = ""
    batch_id: str | None = None
    status: str | None = None  # the final status, once finished
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.status is not None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class BatchJournal:
    """Reads and appends ``batches.jsonl`` of one run."""

    def __init__(self, run_root: str | Path):
        self.path = journal_path(run_root)
        self.requests_folder = Path(run_root) / REQUESTS_FOLDER

    def _requests_path(self, input_file_id: str) -> Path:
        return self.requests_folder / f"{input_file_id}.requests.jsonl"

    def save_requests(self, input_file_id: str, requests: dict[str, Any]) -> None:
        """The requests of one batch (cache key → request), before its ``uploaded`` event."""
        self.requests_folder.mkdir(parents=True, exist_ok=True)
        with atomic_open(self._requests_path(input_file_id)) as out:
            for key, request in requests.items():
                out.write(jsonl_line({"key": key, **request_record(request)}) + "\n")

    def load_requests(self, entry: Entry) -> dict[str, Any]:
        """The requests saved with ``entry`` (none for a batch journaled without them)."""
        records = read_jsonl(self._requests_path(entry.input_file_id), missing_ok=True)
        return {str(r.pop("key")): request_from_record(r) for r in records}

    def entries(self) -> list[Entry]:
        """Every batch in the file, in submission order, with its latest state."""
        by_file: dict[str, Entry] = {}
        for event in read_jsonl(self.path, missing_ok=True):
            kind, file_id = event.get("event"), str(event.get("input_file_id", ""))
            if kind == "uploaded":
                by_file[file_id] = Entry(
                    input_file_id=file_id,
                    model=str(event["model"]),
                    url=str(event["url"]),
                    stage=str(event["stage"]),
                    endpoint=str(event["endpoint"]),
                    keys=[str(k) for k in event["keys"]],
                    estimate_usd=float(event.get("estimate_usd") or 0.0),
                    submitted_at=str(event.get("at", "")),
                )
            elif file_id in by_file and kind == "created":
                by_file[file_id].batch_id = str(event["batch_id"])
            elif file_id in by_file and kind == "finished":
                by_file[file_id].status = str(event["status"])
                by_file[file_id].extra = {
                    k: event.get(k)
                    for k in (
                        "output_file_id",
                        "error_file_id",
                        "completed",
                        "failed",
                        "not_asked",
                        "unused",
                    )
                }
        return list(by_file.values())

    def open_entries(self, endpoint: str) -> list[Entry]:
        """The batches of ``endpoint`` not finished yet (a rerun re-attaches to them)."""
        return [e for e in self.entries() if not e.finished and e.endpoint == endpoint]

    def _append(self, record: dict[str, Any]) -> None:
        with JsonlAppender(self.path, fsync=True) as out:
            out.write({"event": record.pop("event"), "at": _now(), **record})

    def uploaded(self, entry: Entry) -> None:
        self._append(
            {
                "event": "uploaded",
                "input_file_id": entry.input_file_id,
                "model": entry.model,
                "url": entry.url,
                "stage": entry.stage,
                "endpoint": entry.endpoint,
                "estimate_usd": round(entry.estimate_usd, 6),
                "requests": len(entry.keys),
                "keys": entry.keys,
            }
        )
        entry.submitted_at = _now()

    def created(self, entry: Entry, batch_id: str) -> None:
        self._append(
            {"event": "created", "input_file_id": entry.input_file_id, "batch_id": batch_id}
        )
        entry.batch_id = batch_id

    def forget(self, batch_id: str) -> Entry:
        """Give up an open batch (the provider lost it): it is finished as ``forgotten``, so
        a rerun sends its requests again. ``KeyError`` naming the open batches otherwise."""
        open_ones = [e for e in self.entries() if not e.finished]
        entry = next((e for e in open_ones if e.batch_id == batch_id), None)
        if entry is None:
            known = ", ".join(str(e.batch_id) for e in open_ones) or "none"
            raise KeyError(f"{self.path} has no open batch {batch_id} (open batches: {known})")
        self.finished(
            entry,
            status="forgotten",
            output_file_id=None,
            error_file_id=None,
            completed=0,
            failed=0,
            not_asked=len(entry.keys),
        )
        return entry

    def finished(
        self,
        entry: Entry,
        *,
        status: str,
        output_file_id: str | None,
        error_file_id: str | None,
        completed: int,
        failed: int,
        not_asked: int = 0,
        unused: int = 0,
    ) -> None:
        self._append(
            {
                "event": "finished",
                "input_file_id": entry.input_file_id,
                "batch_id": entry.batch_id,
                "status": status,
                "output_file_id": output_file_id,
                "error_file_id": error_file_id,
                "completed": completed,
                "failed": failed,
                "not_asked": not_asked,
                "unused": unused,
            }
        )
        entry.status = status
