"""The paper's own vector store: PostgreSQL with pgvector's HNSW index, on a private server in
the run directory or a given one (``vector_store: pgvector``; docs/architecture.md, "Vector
stores")."""

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from memcost.plugins import Plugin
from memcost_pgvector.store import (
    ITERATIVE_SCANS,
    LAYOUTS,
    SERVER_DIR,
    PgVectorStore,
    alive,
    postmaster,
    stop_orphaned_server,
)

_DSN_URI = re.compile(r"^postgres(?:ql)?://[^\s]*$")
_DSN_PAIRS = re.compile(r"^\s*(?:[A-Za-z_]+\s*=\s*(?:'[^']*'|\S+)\s*)+$")


def check_dsn(params: Mapping[str, Any]) -> None:
    """``pgvector_dsn``: empty, a ``postgresql://`` URI or ``key=value`` pairs, without a
    password (the environment holds it). The message never repeats the value."""
    dsn = params.get("pgvector_dsn")
    if not isinstance(dsn, str) or not dsn:
        return
    if not (_DSN_URI.match(dsn) or _DSN_PAIRS.match(dsn)):
        raise ValueError(
            "pgvector_dsn: expected a PostgreSQL connection URI (postgresql://user@host:5432/db) "
            "or key=value pairs (host=... dbname=...); empty for the private server inside the "
            "run directory"
        )
    pairs = dict(re.findall(r"(\w+)\s*=\s*('[^']*'|\S+)", dsn)) if "://" not in dsn else {}
    if urlsplit(dsn).password if "://" in dsn else pairs.get("password"):
        raise ValueError(
            "pgvector_dsn carries a password (not shown); refused, nothing ran. Give the dsn "
            "without it and the password through the environment, where PostgreSQL's client "
            "reads it: PGPASSWORD, or a ~/.pgpass file"
        )


def stop_orphans(root: Path) -> str | None:
    pid = stop_orphaned_server(root / SERVER_DIR / "pgdata")
    return None if pid is None else f"stopped the run's PostgreSQL server (pid {pid})"


def running(root: Path) -> str | None:
    pgdata = root / SERVER_DIR / "pgdata"
    pid = postmaster(pgdata)
    if pid is None or not alive(pid):
        return None
    return (
        f"its PostgreSQL server (pid {pid}) is running on {pgdata}; stop it first "
        f"(pg_ctl -D {pgdata} stop), then clean again"
    )


PLUGIN = Plugin(
    name="pgvector",
    vector_stores={"pgvector": PgVectorStore},
    choices={"pgvector_layout": LAYOUTS, "pgvector_iterative_scan": ITERATIVE_SCANS},
    parameter_checks=(check_dsn,),
    stop_orphans=stop_orphans,
    running=running,
)
