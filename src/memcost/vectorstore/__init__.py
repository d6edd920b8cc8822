"""Vector stores for the per-user fact memory: one interface, two systems.

:mod:`.base` defines what a store does (build a user's facts, write a finished user, add,
update, delete, search, exact search, count): the one interface the memory builder and retrieval
use; :mod:`.faiss_store` keeps one FAISS HNSW index per user, as files (:mod:`.faiss_index`) or
in memory, the repository's default; :mod:`.pgvector` keeps facts in PostgreSQL with pgvector's
HNSW index, the system the paper used; :mod:`.embedded` starts a private PostgreSQL server
inside a run directory (or connects to a given one); :mod:`.factory` opens the store a run's
``vector_store`` parameter names and says what the manifest records about it.
"""

from memcost.vectorstore.base import (
    EF_CONSTRUCTION,
    EF_SEARCH,
    HNSW_M,
    LAYOUTS,
    STORES,
    Change,
    IndexMismatch,
    SearchResult,
    VectorStore,
)

__all__ = [
    "EF_CONSTRUCTION",
    "EF_SEARCH",
    "HNSW_M",
    "LAYOUTS",
    "STORES",
    "Change",
    "IndexMismatch",
    "SearchResult",
    "VectorStore",
]
