"""How each stage ended: complete, complete with failures (counts), or failed.

A failed item is never a finished item. After a notebook has run, :func:`record_status` counts
the items it left failed, from the files it handed over (the same files a resume reads to know
what to redo), and writes the status into the notebook's metrics file
(``<ds>/metrics/<stem>.json``: ``status`` and ``failures``) and the manifest:

- 01: segments whose extraction failed after all retries and re-asks (their user is not done);
- 02, 03: questions whose latest answer record carries an error;
- 04: judge votes that never gave a verdict (``unjudged_cause == "judge"``).

:func:`check_failures` then stops the run (:class:`StageFailures`) when the failed fraction of
any stage exceeds ``allow_failures``; a resume retries exactly the failed items.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import memcost.memory.base as system_files
from memcost import manifest as manifest_mod
from memcost.answers import answer_systems, load_answers, read_judgments, system_kind
from memcost.io import read_json, write_json
from memcost.memory import facts as memory_files
from memcost.paths import DatasetPaths, RunPaths

COMPLETE = "complete"
WITH_FAILURES = "complete with failures"
FAILED = "failed"
EXIT_FAILED_ITEMS = 3  # the command's exit code when items failed beyond allow_failures


@dataclass(frozen=True)
class StageStatus:
    """One notebook's items for one dataset: how many there were, and how many failed."""

    step: str  # notebook stem, e.g. 01_extract_facts
    dataset: str | None
    item: str  # what is counted: segments, answers, judge votes
    total: int
    failed: int
    errors: tuple[str, ...] = ()  # a few distinct error messages

    @property
    def status(self) -> str:
        if self.failed == 0:
            return COMPLETE
        return FAILED if self.failed >= self.total else WITH_FAILURES

    @property
    def fraction(self) -> float:
        return self.failed / self.total if self.total else 0.0

    def line(self) -> str:
        where = self.step + (f" [{self.dataset}]" if self.dataset else "")
        if self.failed == 0:
            return f"{where}: {COMPLETE} ({self.total} {self.item})"
        return (
            f"{where}: {self.status} ({self.failed} of {self.total} {self.item} failed"
            + (f"; {self.errors[0]}" if self.errors else "")
            + ")"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "item": self.item,
            "total": self.total,
            "failed": self.failed,
            "errors": list(self.errors),
        }


class StageFailures(RuntimeError):
    """Items failed beyond ``allow_failures``: the run stops; a resume retries them."""

    def __init__(self, failed: Sequence[StageStatus], allow: float):
        self.failed = list(failed)
        self.run_dir = ""  # filled in by run_preset: what to pass to --run-name to resume
        lines = "\n".join(f"  {s.line()}" for s in self.failed)
        super().__init__(
            f"items failed after all retries (allowed: {allow:.0%} of a stage's items):\n{lines}\n"
            "Nothing failed is recorded as finished; a resume sends the failed items again "
            "(finished calls come from the cache)."
        )


def _distinct(errors: Sequence[Any], limit: int = 3) -> tuple[str, ...]:
    out: list[str] = []
    for error in errors:
        text = str(error)[:200]
        if text and text not in out:
            out.append(text)
        if len(out) >= limit:
            break
    return tuple(out)


def _segments(ds: DatasetPaths) -> tuple[int, int, tuple[str, ...]]:
    try:
        segments = memory_files.read_segments(ds)
    except FileNotFoundError:
        return 0, 0, ()
    called = segments.loc[segments["status"].isin(["ok", "failed"])]
    failed = called.loc[called["status"] == "failed"]
    return len(called), len(failed), _distinct(failed["error"].tolist())


def _memories(ds: DatasetPaths) -> tuple[int, int, tuple[str, ...]]:
    """Segments of the paper's memory, and users of every other memory system (a user whose
    build failed is in its system's ``failed.json`` until a rerun builds it)."""
    total, failed, errors = _segments(ds)
    folders = sorted((ds.memory / "systems").glob("*/")) if (ds.memory / "systems").is_dir() else []
    reasons = list(errors)
    for folder in folders:
        done, bad = system_files.read_done(folder), system_files.read_failed(folder)
        total += len(set(done) | set(bad))
        failed += len(bad)
        reasons += [f"{folder.name}: {r}" for r in bad.values()]
    return total, failed, _distinct(reasons)


def _answers(ds: DatasetPaths, memory: bool) -> tuple[int, int, tuple[str, ...]]:
    total, failed, errors = 0, 0, []
    for system in answer_systems(ds):
        if (system_kind(system) == "memory") != memory:
            continue
        frame = load_answers(ds, system)
        if frame.empty:
            continue
        bad = frame.loc[frame["error"].notna() & (frame["error"].astype(str) != "")]
        total, failed = total + len(frame), failed + len(bad)
        errors += bad["error"].tolist()
    return total, failed, _distinct(errors)


def _votes(ds: DatasetPaths) -> tuple[int, int, tuple[str, ...]]:
    votes = read_judgments(ds)
    asked = votes.loc[votes["backend"] != "rule"]
    failed = asked.loc[asked["unjudged_cause"] == "judge"]
    return len(asked), len(failed), _distinct(failed["reason"].tolist())


COUNTERS = {
    "01": ("segments", lambda ds: _memories(ds)),
    "02": ("answers", lambda ds: _answers(ds, memory=True)),
    "03": ("answers", lambda ds: _answers(ds, memory=False)),
    "04": ("judge votes", lambda ds: _votes(ds)),
}


def stage_status(run: RunPaths, stem: str, dataset: str | None) -> StageStatus | None:
    """The items of notebook ``stem`` for ``dataset`` (``None`` for a notebook without items)."""
    counter = COUNTERS.get(stem[:2])
    if counter is None or dataset is None:
        return None
    item, count = counter
    ds = run.dataset(dataset)
    total, failed, errors = count(ds)
    if stem[:2] == "01" and (ds.memory / "systems").is_dir():
        item = "segments and users"  # the other memory systems are built user by user
    return StageStatus(stem, dataset, item, total, failed, errors)


def record_status(run: RunPaths, stem: str, dataset: str | None) -> StageStatus | None:
    """Count the stage's failed items and write its status into its metrics and the manifest."""
    status = stage_status(run, stem, dataset)
    if status is None:
        return None
    path = run.dataset(dataset).metrics / f"{stem}.json"  # type: ignore[arg-type]
    if path.is_file():
        record = read_json(path)
        record["status"] = status.status
        record["failures"] = status.as_dict()
        write_json(path, record)
    manifest_mod.set_entry(run, "stage_status", f"{dataset}/{stem}", status.as_dict())
    print(status.line(), flush=True)
    return status


def check_failures(statuses: Sequence[StageStatus], allow_failures: float) -> None:
    """Raise :class:`StageFailures` when a stage's failed fraction exceeds ``allow_failures``."""
    over = [s for s in statuses if s.failed and s.fraction > allow_failures]
    if over:
        raise StageFailures(over, allow_failures)


def read_statuses(run: RunPaths) -> list[dict[str, Any]]:
    """The statuses recorded in the manifest, one per dataset and notebook."""
    if not run.manifest.is_file():
        return []
    recorded = read_json(run.manifest).get("stage_status") or {}
    return [{"key": key, **value} for key, value in sorted(recorded.items())]
