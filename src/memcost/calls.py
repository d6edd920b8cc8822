"""The run's one store of model calls, ``calls.sqlite``: the ledger, the cache and the checkpoint
(docs/architecture.md, "The store of calls")."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import quote

from memcost.catalog import UnknownPriceError, price_for

OFFLINE = "offline"  # backend and provider name in every offline record
STORE_NAME = "calls.sqlite"  # in the run directory

# Ledger stage labels (docs/architecture.md, "The store of calls").
STAGES = ("extract", "update", "embed", "read", "long_context", "judge")
ANSWER_STAGES = ("read", "long_context")  # the calls that answer a question
BUILD_STAGES = ("extract", "update", "embed")  # the calls that build a user's memory

# The record schema, in this order; the request's tags follow.
BASE_FIELDS = (
    "timestamp",
    "stage",
    "provider",
    "model",
    "backend",
    "request_hash",
    "prompt_version",
    "cached",
    "prompt_tokens",
    "cached_prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "latency_s",
    "attempts",
    "error",
    "sample_index",
)
# Fields a record has only when they apply: ``billed_usd`` (the provider's own charge,
# OpenRouter's ``usage.cost``), ``served_by`` (the upstream that served the call),
# ``served_model`` (the model the server says answered: a snapshot, or whatever a server of
# your own holds) and ``execution`` (``batch`` or ``flex`` when not sent interactively: it sets
# the price). They are facts about the call, not tags: they take no part in its identity.
OPTIONAL_FIELDS = ("billed_usd", "served_by", "served_model", "execution")
# Tags every record has (null when the stage did not set them), so the table has fixed columns.
STANDARD_TAGS = ("dataset", "conversation_id", "question_id", "system")
RESERVED_FIELDS = BASE_FIELDS + OPTIONAL_FIELDS
# A reader call's tag: the prompt tokens an earlier call of the same user already sent, which a
# provider's prompt cache would serve (memcost.memory.reader.with_shared_prefixes); the cost
# model prices the offline backend's records, which have no cache, with it.
SHARED_PREFIX_TAG = "shared_prefix_tokens"


# --- Identity ---------------------------------------------------------------------------------


# The store's two JSON forms, each encoder made once: json.dumps with options makes a new one
# per call, and the offline judge encodes some 800,000 texts.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)
_ROW = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)


def canonical_json(obj: Any) -> str:
    return _CANONICAL.encode(obj)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def normalise_tags(tags: Mapping[str, Any]) -> dict[str, Any]:
    merged = {name: None for name in STANDARD_TAGS}
    merged.update(tags)
    if all(type(k) is str and type(v) in _JSON_SCALARS for k, v in merged.items()):
        return merged  # already as JSON reads it back (the usual case: ids and names)
    return json.loads(json.dumps(merged, ensure_ascii=False, default=str))


_JSON_SCALARS = (str, int, bool, type(None))  # floats left out: JSON has no NaN or infinity


def call_key(request_hash: str, tags: Mapping[str, Any]) -> str:
    """One logical call of a run: the same request for two items (two systems' same answer judged)
    is two calls."""
    return sha256_hex(request_hash + "\n" + canonical_json(normalise_tags(tags)))


def record_call_key(record: Mapping[str, Any]) -> str:
    tags = {k: v for k, v in record.items() if k not in RESERVED_FIELDS}
    return sha256_hex(str(record.get("request_hash")) + "\n" + canonical_json(tags))


# --- Cost of a record -------------------------------------------------------------------------


def record_cost(
    record: Mapping[str, Any], price_overrides: Mapping[str, Mapping[str, Any]] | None = None
) -> float | None:
    """What the provider billed (``billed_usd``), else the list price (``None``: no price)."""
    billed = record.get("billed_usd")
    if billed is not None:
        return float(billed)
    return list_cost(record, price_overrides)


def list_cost(
    record: Mapping[str, Any], price_overrides: Mapping[str, Mapping[str, Any]] | None = None
) -> float | None:
    try:
        price = price_for(str(record["model"]), price_overrides)
    except UnknownPriceError:
        return None
    prompt = int(record.get("prompt_tokens") or 0)
    return price.cost(
        prompt_tokens=prompt,
        cached_prompt_tokens=min(int(record.get("cached_prompt_tokens") or 0), prompt),
        completion_tokens=int(record.get("completion_tokens") or 0),
        batch=record.get("execution") == "batch",
        flex=record.get("execution") == "flex",
    )


def is_paid(record: Mapping[str, Any]) -> bool:
    """Did this call cost money in this run? A failed call did when its tokens were billed (cut off,
    filtered, refused)."""
    if record.get("backend") == OFFLINE or record.get("cached"):
        return False
    if not record.get("error"):
        return True
    return bool(record.get("prompt_tokens") or record.get("completion_tokens"))


def spent_usd(
    records: Iterable[Mapping[str, Any]],
    price_overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> float:
    return sum(record_cost(r, price_overrides) or 0.0 for r in records if is_paid(r))


# --- The store --------------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    call_key     TEXT NOT NULL,   -- request hash + tags: one call of one item
    request_hash TEXT NOT NULL,   -- sha256 of the request's canonical JSON and its endpoint
    record       TEXT NOT NULL,   -- the ledger record (JSON)
    answer       TEXT             -- the API's answer (JSON: text or vectors, usage, ...), or NULL
);
CREATE INDEX IF NOT EXISTS calls_by_key ON calls (call_key);
CREATE INDEX IF NOT EXISTS answers_by_hash ON calls (request_hash) WHERE answer IS NOT NULL;
CREATE TABLE IF NOT EXISTS inflight (
    call_key TEXT PRIMARY KEY,        -- a paid call sent and not answered yet
    pid      INTEGER NOT NULL,        -- the process that sent it
    record   TEXT NOT NULL            -- its record should that process die before the answer
);
"""
# The error of a call whose process was killed while it was on the wire: the provider may
# have billed it, so it stays on the ledger (prompt tokens counted, output unknown).
IN_FLIGHT_AT_KILL = (
    "in flight when its process was killed: the provider may have billed it (prompt tokens "
    "counted, output unknown); its answer was lost and the call is made again"
)
# What SQLite says when the file or its folder cannot be written: a permission or space
# problem, never damage.
_UNWRITABLE = ("readonly database", "unable to open database", "read-only file system")
# A paid call is not sent when the disk holding the store has less room than this: its answer
# (an embedding batch's is up to ~16 MB of JSON) could not be kept, and would be paid again.
MIN_FREE_BYTES = 64 * 2**20
# A paid answer that meets a full disk is held in memory this long while room is made (one
# line says so); then the stage stops, and that one answer is paid again on resume.
FULL_DISK_WAIT_S = 600.0


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _is_full(exc: BaseException) -> bool:
    return "database or disk is full" in str(exc).lower()


class _Damaged(sqlite3.DatabaseError): ...


class StoreError(RuntimeError):
    damaged = False  # unreadable as a database (not merely unwritable, full or busy)


def store_path(run_root: str | os.PathLike[str]) -> Path:
    return Path(run_root) / STORE_NAME


def read_only_uri(path: Path) -> str:
    """SQLite's address of a store opened only to read. In a folder this process cannot write
    (a class's read-only share of an instructor's run) no lock file can be made: the store is
    read as it is (``immutable``), which misses only writes left in a ``-wal`` file."""
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    if os.access(path.parent, os.W_OK):
        return uri
    wal = path.with_name(path.name + "-wal")
    if wal.is_file() and wal.stat().st_size:
        print(
            f"memcost: {path} is in a folder this process cannot write: its last writes, in "
            f"{wal.name}, are not read (copy the run somewhere writable to read them)",
            file=sys.stderr,
            flush=True,
        )
    return uri + "&immutable=1"


class CallStore:
    """One run's calls, thread- and process-safe; ``reuse``: other runs whose answers it may serve
    (read-only)."""

    def __init__(
        self,
        run_root: str | os.PathLike[str],
        *,
        reuse: Sequence[str | os.PathLike[str]] = (),
        busy_timeout_s: float = 60.0,
        set_aside_damaged: bool = False,
        read_only: bool = False,
    ):
        self.path = store_path(run_root)
        self.read_only = read_only  # a reader's: nothing is written, the folder may be read-only
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._all: list[tuple[threading.Thread, sqlite3.Connection]] = []  # by owning thread
        self._lock = threading.Lock()
        self._reuse = [store_path(r) for r in reuse if store_path(r).is_file()]
        self._pending: list[tuple[str, str, str, None]] = []  # offline rows not written yet
        # Call keys recorded without an error: those in the store when a batch began (up to
        # row _known_seq) and those written since by this store. Within a batch they answer
        # recorded() without a query a call (the offline judge asks 80,000 times).
        self._known: set[str] = set()
        self._known_seq = 0
        self._deferring = 0
        self._sending: set[str] = set()  # this process's calls in the inflight table
        try:
            self._open()
        except StoreError as exc:
            if not (set_aside_damaged and exc.damaged):
                raise
            self._set_aside()
            self._open()

    # -- connections

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            # autocommit: each statement is its own transaction, so no write is left pending
            address = (
                read_only_uri(self.path)
                if self.read_only
                else f"file:{quote(str(self.path.resolve()))}"
            )
            conn = sqlite3.connect(
                address, timeout=self._busy_timeout_s,
                isolation_level=None, check_same_thread=False, uri=True,
            )  # fmt: skip
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
            conn.execute("PRAGMA synchronous = NORMAL")  # durable across process crashes in WAL
            for i, other in enumerate(self._reuse):
                conn.execute(f"ATTACH DATABASE ? AS reuse{i}", (read_only_uri(other),))
            self._local.conn = conn
            with self._lock:
                # A thread that has ended closes no connection of its own: a client that sends
                # each request from a pool of its own (the serving study, a pool a turn) held
                # three files open per finished thread until "Too many open files".
                ended = [c for t, c in self._all if not t.is_alive()]
                self._all = [(t, c) for t, c in self._all if t.is_alive()]
                self._all.append((threading.current_thread(), conn))
            for other in ended:
                with suppress(sqlite3.Error):
                    other.close()
        return conn

    def _open(self) -> None:
        try:
            conn = self._connect()
            verdict = conn.execute("PRAGMA quick_check").fetchone()[0]
            if verdict != "ok":
                raise _Damaged(verdict)
            if self.read_only:
                return
            deadline = time.monotonic() + self._busy_timeout_s
            while True:  # WAL needs a moment of exclusive access: another process may hold it
                try:
                    conn.execute("PRAGMA journal_mode = WAL")
                    conn.executescript(_SCHEMA)
                    self._settle_the_killed(conn)
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        except sqlite3.Error as exc:
            self.close()
            raise self._error(exc) from None

    def _settle_the_killed(self, conn: sqlite3.Connection) -> None:
        """Calls a killed process had on the wire become ledger records (they may have been
        billed)."""
        rows = conn.execute("SELECT call_key, pid, record FROM inflight").fetchall()
        dead = [(key, record) for key, pid, record in rows if not _alive(int(pid))]
        if not dead:
            return
        with conn:
            conn.execute("BEGIN IMMEDIATE")
            for key, record in dead:
                removed = conn.execute(
                    "DELETE FROM inflight WHERE call_key = ? AND record = ?", (key, record)
                ).rowcount
                if removed:  # not settled by another process opening the store at once
                    request_hash = str(json.loads(record)["request_hash"])  # written by sending()
                    conn.execute(self._INSERT, (key, request_hash, record, None))
        print(
            f"memcost: {len(dead)} call(s) were on the wire when their process was killed: they "
            f"are on the ledger of {self.path} as possibly billed (their output unknown)",
            file=sys.stderr,
            flush=True,
        )

    def sending(self, key: str, record: Mapping[str, Any]) -> None:
        """A paid call is about to be sent: should this process die, the next one puts ``record`` on
        the ledger."""
        text = _ROW.encode(record)

        def write() -> None:
            self._connect().execute(
                "INSERT OR REPLACE INTO inflight (call_key, pid, record) VALUES (?, ?, ?)",
                (key, os.getpid(), text),
            )

        try:
            write()
        except sqlite3.Error as exc:
            if not _is_full(exc):
                raise self._error(exc) from None
            self._hold_until_room(write, "a call about to be sent", "nothing was sent")
        self._sending.add(key)

    def unsent(self, key: str) -> None:
        if key in self._sending:
            self._sending.discard(key)
            self._connect().execute(
                "DELETE FROM inflight WHERE call_key = ? AND pid = ?", (key, os.getpid())
            )

    def check_room(self) -> None:
        free = shutil.disk_usage(self.path.parent).free
        if free < MIN_FREE_BYTES:
            raise StoreError(
                f"the disk holding {self.path} has {free / 2**20:.0f} MB free, too little to "
                "keep another paid answer: free space, then resume (nothing was sent; finished "
                "calls are kept)"
            )

    def _error(self, exc: sqlite3.Error) -> StoreError:
        text = str(exc)
        if any(word in text.lower() for word in _UNWRITABLE):
            return StoreError(
                f"cannot write the run's store of calls {self.path} ({text}): make it and its "
                "folder writable, then resume; do not delete it, its answers were paid for"
            )
        if "disk is full" in text.lower() or "database or disk is full" in text.lower():
            return StoreError(
                f"the disk holding {self.path} is full: free space, then resume (finished "
                "calls are kept; the call being written is sent again)"
            )
        error = StoreError(
            f"the run's store of calls {self.path} is damaged ({text}): move it aside "
            f"(mv {self.path} {self.path}.damaged) and resume; the run's answers and tables "
            "are kept, its calls are made (and paid) again"
        )
        # only what SQLite calls damage: a store that is busy or on a failing disk is never renamed
        error.damaged = isinstance(exc, _Damaged) or any(
            words in text.lower() for words in ("malformed", "not a database")
        )
        return error

    def _set_aside(self) -> None:
        """Rename a damaged store beside it and say where, so the run goes on with a new one."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = self.path.with_name(f"{self.path.name}.damaged-{stamp}")
        for suffix in ("", "-wal", "-shm"):
            part = self.path.with_name(self.path.name + suffix)
            if part.exists():
                part.rename(target.with_name(target.name + suffix))
        print(
            f"memcost: {self.path} was damaged (not readable as a database): set aside as "
            f"{target.name}; this run goes on with a new store: a call it held is made (and "
            "paid) again where a notebook still needs it, and the cost tables count only the "
            "calls of the new store (the report says so)",
            file=sys.stderr,
            flush=True,
        )

    # -- reading

    def answer(self, request_hash: str) -> dict[str, Any] | None:
        """The answer stored for a request (this run's first, else a reused run's: ``reused``); a
        damaged one is passed over with one line."""
        conn = self._connect()
        sources = ["main", *(f"reuse{i}" for i in range(len(self._reuse)))]
        for source in sources:
            rows = conn.execute(
                f"SELECT answer FROM {source}.calls WHERE request_hash = ? AND answer IS NOT NULL "
                "ORDER BY seq",
                (request_hash,),
            )
            for (text,) in rows:
                stored = self._readable(text, "a stored answer", "its call is made again")
                if stored is not None:
                    return {**stored, "reused": source != "main"}
        return None

    def has_answer(self, request_hash: str) -> bool:
        conn = self._connect()
        for source in ["main", *(f"reuse{i}" for i in range(len(self._reuse)))]:
            query = f"SELECT 1 FROM {source}.calls WHERE request_hash = ? AND answer IS NOT NULL"
            if conn.execute(query, (request_hash,)).fetchone() is not None:
                return True
        return False

    def recorded(self, key: str) -> bool:
        """A call of this item is recorded without an error; within :meth:`deferring`, from the keys
        known (no other process records the same item meanwhile)."""
        with self._lock:
            if key in self._known:
                return True
            if self._deferring:
                return False
        rows = self._connect().execute("SELECT record FROM calls WHERE call_key = ?", (key,))
        records = (self._readable(r[0], "a call record", "the call is made again") for r in rows)
        return any(r is not None and not r.get("error") for r in records)

    def records(self) -> list[dict[str, Any]]:
        self.flush()
        conn = self._connect()
        rows = conn.execute("SELECT record FROM calls ORDER BY seq").fetchall()
        if (
            self.read_only
        ):  # the calls a killed process had on the wire, as its next opener puts them
            inflight = conn.execute("SELECT pid, record FROM inflight").fetchall()
            rows += [(record,) for pid, record in inflight if not _alive(int(pid))]
        found = [self._readable(r[0], "a call record", "its cost is missing") for r in rows]
        return [r for r in found if r is not None]

    def on_ledger(self, stages: Sequence[str], *names: str) -> Counter[tuple[Any, ...]]:
        """How many calls of ``stages`` are recorded without an error, by the values of their
        record fields ``names``: what a resume checks its finished work against."""
        self.flush()
        columns = ", ".join(f"json_extract(record, '$.{name}')" for name in names)
        marks = ", ".join("?" for _ in stages)
        rows = self._connect().execute(
            f"SELECT {columns}, COUNT(*) FROM calls WHERE json_valid(record) "
            f"AND json_extract(record, '$.stage') IN ({marks}) "
            f"AND coalesce(json_extract(record, '$.error'), '') = '' GROUP BY {columns}",
            tuple(stages),
        )
        return Counter({tuple(row[:-1]): int(row[-1]) for row in rows})

    def _readable(self, text: Any, what: str, consequence: str) -> dict[str, Any] | None:
        """A row's JSON, or ``None`` with one line when it is damaged: one bad row never stops a
        run."""
        try:
            value = json.loads(text)
        except (TypeError, ValueError):
            value = None
        if isinstance(value, dict):
            return value
        print(
            f"memcost: {self.path}: {what} is damaged (not readable JSON): {consequence}",
            file=sys.stderr,
            flush=True,
        )
        return None

    # -- writing

    _INSERT = "INSERT INTO calls (call_key, request_hash, record, answer) VALUES (?, ?, ?, ?)"
    _PENDING_ROWS = 1000  # offline rows written together at the most
    # Each row after a seq: its key, and 1 if recorded without an error, 0 if with one, NULL
    # if the record is damaged (not a JSON object).
    _RECORDED_SINCE = (
        "SELECT seq, call_key, CASE WHEN NOT json_valid(record) THEN NULL "
        "WHEN json_type(record) <> 'object' THEN NULL "
        "ELSE coalesce(json_extract(record, '$.error'), '') = '' END "
        "FROM calls WHERE seq > ?"
    )

    def add(
        self,
        record: Mapping[str, Any],
        answer: Mapping[str, Any] | None = None,
        *,
        key: str | None = None,
        offline: bool = False,
    ) -> None:
        """One call, its record and answer in one statement; within :meth:`deferring` an offline
        record waits to be written with others (one statement per call cost more than the offline
        methods)."""
        ok = not record.get("error")  # the call need not be made again
        row = (
            key or record_call_key(record),
            str(record["request_hash"]),
            _ROW.encode(record),
            None if answer is None else _ROW.encode(answer),
        )
        if offline and answer is None and self._deferring:
            with self._lock:
                self._pending.append(row)
                if ok:
                    self._known.add(row[0])
                full = len(self._pending) >= self._PENDING_ROWS
            if full:
                self.flush()
            return
        try:
            self._write(row)
        except sqlite3.Error as exc:
            if answer is None or not _is_full(exc):
                raise self._error(exc) from None
            self._hold_until_room(
                lambda: self._write(row),
                "a paid answer, held in memory,",
                "the answer held is lost and its call is paid again",
            )
        if ok:
            with self._lock:
                self._known.add(row[0])

    def _write(self, row: tuple[str, str, str, str | None]) -> None:
        conn = self._connect()
        if row[0] not in self._sending:
            conn.execute(self._INSERT, row)
            return
        with conn:  # the call's record and the end of its flight in one transaction
            conn.execute("BEGIN")
            conn.execute(self._INSERT, row)
            conn.execute(
                "DELETE FROM inflight WHERE call_key = ? AND pid = ?", (row[0], os.getpid())
            )
        self._sending.discard(row[0])

    def _hold_until_room(self, write: Callable[[], None], what: str, lost: str) -> None:
        """A full disk: retry ``write`` until there is room (at most :data:`FULL_DISK_WAIT_S`)
        rather than lose a paid answer."""
        print(
            f"memcost: the disk holding {self.path} is full: {what} waits for up to "
            f"{FULL_DISK_WAIT_S:.0f} s while you free space (the run goes on then)",
            file=sys.stderr,
            flush=True,
        )
        deadline, delay = time.monotonic() + FULL_DISK_WAIT_S, 0.25
        while True:
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            try:
                write()
            except sqlite3.Error as exc:
                if not _is_full(exc):
                    raise self._error(exc) from None
                if time.monotonic() >= deadline:
                    raise StoreError(
                        f"the disk holding {self.path} stayed full for {FULL_DISK_WAIT_S:.0f} s:"
                        f" free space, then resume (finished calls are kept; {lost})"
                    ) from None
                delay = min(delay * 2, 10.0)
                continue
            print(f"memcost: room again in {self.path.parent}: {what} is stored", file=sys.stderr)
            return

    @contextmanager
    def deferring(self) -> Iterator[None]:
        with self._lock:
            self._deferring += 1
            first = self._deferring == 1
        try:
            if first:
                self._learn_recorded()
            yield
        finally:
            with self._lock:
                self._deferring -= 1
            self.flush()

    def _learn_recorded(self) -> None:
        conn = self._connect()
        rows = conn.execute(self._RECORDED_SINCE, (self._known_seq,)).fetchall()
        for _, _, ok in rows:
            if ok is None:
                self._readable(None, "a call record", "the call is made again")
        with self._lock:
            self._known.update(key for _, key, ok in rows if ok)
            self._known_seq = max((seq for seq, _, _ in rows), default=self._known_seq)

    def flush(self) -> None:
        with self._lock:
            rows, self._pending = self._pending, []
        if not rows:
            return
        conn = self._connect()
        try:
            with conn:  # one transaction (the connection is otherwise in autocommit)
                conn.execute("BEGIN")
                conn.executemany(self._INSERT, rows)
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def __len__(self) -> int:
        self.flush()
        return int(self._connect().execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def close(self) -> None:
        if self._all:
            self.flush()
        with self._lock:
            for _, conn in self._all:
                with suppress(sqlite3.Error):
                    conn.close()
            self._all.clear()
        self._local = threading.local()

    def __enter__(self) -> CallStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_calls(run: Any) -> list[dict[str, Any]]:
    """The records of a run's calls in the order made (``run``: its folder, :class:`RunPaths` or
    ``calls.sqlite``)."""
    root = run.root if hasattr(run, "dataset") else Path(run)  # a RunPaths, or a folder
    if root.name == STORE_NAME:
        root = root.parent
    if not store_path(root).is_file():
        return []
    # read-only only where it must be (a read-only share): elsewhere opening it settles the calls
    # a killed process left on the wire, as every opener of a store does
    with CallStore(root, read_only=not os.access(root, os.W_OK)) as store:
        return store.records()
