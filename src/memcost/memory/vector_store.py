"""The run's vector store for one dataset's memory, as notebooks 01 and 02 open it.

The same call whichever store ``vector_store`` names: FAISS files under
``<ds>/memory/index/``, or pgvector (the paper's store) in the table of this dataset and
layout, on the private server inside the run directory or on ``pgvector_dsn``. The store is
closed (a private server stopped, its data kept for a resume) by ``close()`` or when the
kernel exits.
"""

from __future__ import annotations

import atexit

from memcost.memory.facts import index_dir
from memcost.paths import RunPaths
from memcost.vectorstore.base import EF_CONSTRUCTION, HNSW_M, VectorStore
from memcost.vectorstore.factory import open_store, store_table


def open_run_store(
    run: RunPaths,
    dataset: str,
    dims: int,
    *,
    vector_store: str = "faiss",
    pgvector_dsn: str = "",
    layout: str = "per_user",
    iterative_scan: str = "off",
    m: int = HNSW_M,
    ef_construction: int = EF_CONSTRUCTION,
) -> VectorStore:
    """``dataset``'s memory store in ``run`` (``dims``: the embedding model's dimensions)."""
    store = open_store(
        vector_store,
        dims,
        faiss_dir=index_dir(run.dataset(dataset)),
        run_dir=run.root,
        pgvector_dsn=pgvector_dsn,
        layout=layout,
        table=store_table(dataset, layout),
        iterative_scan=iterative_scan,
        m=m,
        ef_construction=ef_construction,
    )
    atexit.register(store.close)
    return store
