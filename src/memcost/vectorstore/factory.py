"""Open the store a run's parameters name: ``vector_store: faiss | pgvector``.

:func:`opened_store` is what a notebook or the runner calls: for ``faiss`` an in-memory
:class:`~memcost.vectorstore.faiss_store.FaissStore`; for ``pgvector`` a
:class:`~memcost.vectorstore.pgvector.PgVectorStore` on the private server inside
``<run dir>/pgvector`` (started here, stopped when the block ends, its data kept for a resumed
run) or on ``pgvector_dsn``. :func:`manifest_entry` is what the manifest records about it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memcost.vectorstore.base import STORES, VectorStore
from memcost.vectorstore.embedded import PgServer
from memcost.vectorstore.faiss_store import FaissStore
from memcost.vectorstore.pgvector import PgVectorStore

SERVER_DIR = "pgvector"  # under the run directory


@contextlib.contextmanager
def opened_store(
    vector_store: str,
    dims: int,
    *,
    run_dir: str | Path | None = None,
    pgvector_dsn: str = "",
    layout: str = "shared",
    table: str = "facts",
    iterative_scan: str = "off",
    **settings: int,
) -> Iterator[VectorStore]:
    """The store named by ``vector_store``; ``table`` separates datasets in one database."""
    if vector_store not in STORES:
        raise ValueError(f"vector_store must be one of {STORES}, not {vector_store!r}")
    if vector_store == "faiss":
        with FaissStore(dims, **settings) as store:
            yield store
        return
    if not pgvector_dsn and run_dir is None:
        raise ValueError("vector_store pgvector needs a run directory or pgvector_dsn")
    server = PgServer(Path(run_dir) / SERVER_DIR if run_dir is not None else None,
                      dsn=pgvector_dsn)
    with server:
        store = PgVectorStore(server.dsn, dims, layout=layout, table=table,
                              iterative_scan=iterative_scan, **settings)
        store.server = server  # type: ignore[attr-defined]
        with store:
            yield store


def manifest_entry(store: VectorStore) -> dict[str, Any]:
    """Store, versions, settings and (for pgvector) which server: never a password."""
    entry = store.versions()
    server = getattr(store, "server", None)
    if isinstance(server, PgServer):
        entry["server"] = server.describe()
    return entry
