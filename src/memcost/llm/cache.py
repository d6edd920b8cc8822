"""The disk cache of model responses: SQLite in WAL mode, one row per request hash.

Why SQLite: many threads and several processes (notebooks run by hand while a preset runs) read
and write it at once, and a killed writer must never corrupt it. WAL lets readers run beside the
single writer; ``busy_timeout`` makes a second writer wait instead of failing; every write is
its own short transaction, so a SIGKILL loses at most the row being written. Each thread keeps
its own connection (a connection must not be shared between threads).

A row keeps the response with its original usage, attempts and latency, and ``origin``: the
run that paid for it. That lets a rerun of the same run tell "a call this run made but was
killed before recording" (record it as paid) from "a response another run paid for" (record it
as cached). The ``reads`` table keeps the ledger record of every call served from a row, so a
damaged ledger is rebuilt with its cache hits too (:func:`memcost.llm.ledger.repair_ledger`).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

CACHE_MODES = ("read_write", "replay_only", "off")
SCHEMA_VERSION = "1"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key        TEXT PRIMARY KEY,   -- request hash (sha256 of canonical request JSON + endpoint)
    kind       TEXT NOT NULL,      -- chat | embed
    stage      TEXT NOT NULL,
    model      TEXT NOT NULL,
    origin     TEXT NOT NULL,      -- run id of the run that paid for the call
    created_at TEXT NOT NULL,
    response   TEXT NOT NULL       -- JSON: text or vectors, usage, attempts, latency_s, ...
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
-- Who read a row: the ledger record of each call a run was served from the cache, so that a
-- damaged ledger can be rebuilt whole, not only its paid calls (added beside schema 1: older
-- code ignores it, and a cache from before it simply has no reads to give back).
CREATE TABLE IF NOT EXISTS reads (
    run_id     TEXT NOT NULL,
    call_key   TEXT NOT NULL,      -- request hash + tags: one call of one run
    created_at TEXT NOT NULL,
    record     TEXT NOT NULL,      -- JSON: the ledger record as written
    PRIMARY KEY (run_id, call_key)
);
"""


class CacheCorrupted(RuntimeError):
    """The SQLite file of the cache is damaged (the message names it and the two ways out)."""


class CacheUnwritable(RuntimeError):
    """The cache (or its folder) cannot be written: nothing is wrong with what it holds."""


# What SQLite says when the file or its folder is not writable (WAL needs -wal and -shm
# files beside it): a permission problem, never damage.
_UNWRITABLE = (
    "readonly database",
    "unable to open database",
    "read-only file system",
    "permission denied",
)


class ResponseCache:
    """Request hash → stored response. Thread-safe and process-safe."""

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 60.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        self._init_schema()

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            # Autocommit: each statement is its own transaction, so no write is left pending.
            conn = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout_s,
                isolation_level=None,
                check_same_thread=False,
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
            # NORMAL is durable across process crashes in WAL mode (only a power cut can drop
            # the last commits), and far faster than FULL.
            conn.execute("PRAGMA synchronous = NORMAL")
            self._local.conn = conn
            with self._all_lock:
                self._all.append(conn)
        return conn

    def _check_integrity(self, conn: sqlite3.Connection) -> None:
        """A damaged file stops here with what to do, not later with a bare DatabaseError."""
        try:
            verdict = conn.execute("PRAGMA quick_check").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            verdict = str(exc)
        if verdict != "ok":
            raise self._damaged(verdict)

    def _damaged(self, verdict: str) -> CacheCorrupted:
        return CacheCorrupted(
            f"the response cache {self.path} is damaged ({verdict}). Either move it aside "
            f"(mv {self.path} {self.path}.damaged; finished calls are then paid again "
            "unless replayed from a copy) or run without it (-p 'client={cache_mode: off}'). "
            "The run's ledger and outputs are untouched."
        )

    def _unwritable(self, error: str) -> CacheUnwritable:
        return CacheUnwritable(
            f"the response cache {self.path} cannot be written ({error}); what it holds is "
            f"fine. Make it and its folder writable (chmod u+w {self.path} {self.path.parent}), "
            "or copy it somewhere writable and point cache_path there (MEMCOST_CACHE_DIR); do "
            "not delete it: its finished calls would be paid again."
        )

    def _init_schema(self) -> None:
        try:
            conn = self._connect()
        except sqlite3.DatabaseError as exc:
            self._local = threading.local()
            if any(word in str(exc).lower() for word in _UNWRITABLE):
                raise self._unwritable(str(exc)) from None
            raise self._damaged(str(exc)) from None
        self._check_integrity(conn)
        try:
            self._prepare(conn)
        except sqlite3.OperationalError as exc:
            if any(word in str(exc).lower() for word in _UNWRITABLE):
                raise self._unwritable(str(exc)) from None
            raise

    def _prepare(self, conn: sqlite3.Connection) -> None:
        """WAL mode and the schema (created once), then the schema version checked."""
        deadline = time.monotonic() + self._busy_timeout_s
        while True:
            try:
                # Switching to WAL needs a moment of exclusive access; another process may hold
                # the file, so retry briefly. WAL mode is persistent once set.
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                conn.executescript(_SCHEMA)
                conn.execute(
                    "INSERT OR IGNORE INTO meta(name, value) VALUES ('schema_version', ?)",
                    (SCHEMA_VERSION,),
                )
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        if str(mode).lower() != "wal":
            raise RuntimeError(f"{self.path}: cannot switch the cache to WAL mode (got {mode!r})")
        version = conn.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()[0]
        if version != SCHEMA_VERSION:
            raise RuntimeError(
                f"{self.path}: cache schema version {version}, this code expects {SCHEMA_VERSION}; "
                "point cache_path at a new file"
            )

    def contains(self, key: str) -> bool:
        row = self._connect().execute("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone()
        return row is not None

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored entry (``response`` decoded, plus ``origin``), or ``None``."""
        row = (
            self._connect()
            .execute("SELECT response, origin FROM responses WHERE key = ?", (key,))
            .fetchone()
        )
        if row is None:
            return None
        entry = json.loads(row[0])
        entry["origin"] = row[1]
        return entry

    def put(
        self, key: str, response: dict[str, Any], *, kind: str, stage: str, model: str, origin: str
    ) -> bool:
        """Store ``response`` unless the key is already there (first writer wins, so a replay
        always returns the same answer). Returns whether this call stored it."""
        text = json.dumps(response, ensure_ascii=False, separators=(",", ":"))
        created = datetime.now(UTC).isoformat(timespec="milliseconds")
        cur = self._connect().execute(
            "INSERT OR IGNORE INTO responses"
            "(key, kind, stage, model, origin, created_at, response) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (key, kind, stage, model, origin, created, text),
        )
        return cur.rowcount == 1

    def discard(self, key: str) -> None:
        """Forget a row that holds no answer (a cut-off, filtered or refused reply stored by an
        older version), so the answer that replaces it can be stored."""
        self._connect().execute("DELETE FROM responses WHERE key = ?", (key,))

    def __len__(self) -> int:
        return int(self._connect().execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def keys(self) -> set[str]:
        return {r[0] for r in self._connect().execute("SELECT key FROM responses")}

    def rows_of(self, origin: str) -> list[dict[str, Any]]:
        """Every row a run paid for (``origin`` = its run id), oldest first, decoded."""
        rows = self._connect().execute(
            "SELECT key, kind, stage, model, created_at, response FROM responses "
            "WHERE origin = ? ORDER BY created_at",
            (origin,),
        )
        return [
            {
                "key": k,
                "kind": kind,
                "stage": stage,
                "model": model,
                "created_at": created,
                **json.loads(response),
            }
            for k, kind, stage, model, created, response in rows
        ]

    def note_read(self, run_id: str, call_key: str, record: dict[str, Any]) -> None:
        """Keep the ledger record of a call served from the cache (first record wins)."""
        self._connect().execute(
            "INSERT OR IGNORE INTO reads(run_id, call_key, created_at, record) VALUES (?, ?, ?, ?)",
            (
                run_id,
                call_key,
                str(record.get("timestamp", "")),
                json.dumps(record, ensure_ascii=False, separators=(",", ":")),
            ),
        )

    def reads_of(self, run_id: str) -> list[tuple[str, dict[str, Any]]]:
        """``(call key, ledger record)`` of every cache hit a run recorded, oldest first."""
        rows = self._connect().execute(
            "SELECT call_key, record FROM reads WHERE run_id = ? ORDER BY created_at", (run_id,)
        )
        return [(key, json.loads(record)) for key, record in rows]

    def read_keys_of(self, run_id: str) -> set[str]:
        """The call keys of every cache hit a run recorded."""
        rows = self._connect().execute("SELECT call_key FROM reads WHERE run_id = ?", (run_id,))
        return {key for (key,) in rows}

    def close(self) -> None:
        with self._all_lock:
            for conn in self._all:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._all.clear()
        self._local = threading.local()
