"""Open the store a run's parameters name: ``vector_store: faiss | pgvector``.

:func:`open_store` is what a notebook calls, once, with the same arguments whichever store it
is: for ``faiss`` a :class:`~memcost.vectorstore.faiss_store.FaissStore` over the per-user
files in ``faiss_dir``; for ``pgvector`` a :class:`~memcost.vectorstore.pgvector.PgVectorStore`
on the private server inside ``<run dir>/pgvector`` (started here and stopped by the store's
``close()``, its data kept for a resumed run) or on ``pgvector_dsn``. :func:`manifest_entry` is
what the manifest records about it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memcost.vectorstore.base import STORES, VectorStore
from memcost.vectorstore.embedded import SERVER_DIR, PgServer
from memcost.vectorstore.faiss_store import FaissStore
from memcost.vectorstore.pgvector import PgVectorStore


def store_table(dataset: str, layout: str) -> str:
    """The table (name prefix) of one dataset's facts: datasets and layouts never share one."""
    return f"{dataset}_{layout}"


def open_store(
    vector_store: str,
    dims: int,
    *,
    faiss_dir: str | Path | None = None,
    run_dir: str | Path | None = None,
    pgvector_dsn: str = "",
    layout: str = "per_user",  # returns the k facts at any scale (docs: the filtered search)
    table: str = "facts",
    iterative_scan: str = "off",
    **settings: int,
) -> VectorStore:
    """The store named by ``vector_store`` (close it, or use it as a context manager)."""
    if vector_store not in STORES:
        raise ValueError(f"vector_store must be one of {STORES}, not {vector_store!r}")
    if vector_store == "faiss":
        return FaissStore(dims, folder=faiss_dir, **settings)
    if not pgvector_dsn and run_dir is None:
        raise ValueError("vector_store pgvector needs a run directory or pgvector_dsn")
    server = PgServer(Path(run_dir) / SERVER_DIR if run_dir is not None else None, dsn=pgvector_dsn)
    server.start()
    try:
        return PgVectorStore(
            server.dsn,
            dims,
            layout=layout,
            table=table,
            iterative_scan=iterative_scan,
            server=server,
            **settings,
        )
    except BaseException:
        server.stop()
        raise


def manifest_entry(store: VectorStore) -> dict[str, Any]:
    """Store, versions, settings and (for pgvector) which server: never a password."""
    entry = store.versions()
    server = getattr(store, "server", None)
    if isinstance(server, PgServer):
        entry["server"] = server.describe()
    return entry
