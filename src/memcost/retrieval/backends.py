"""Retrieval through the run's vector store, and what that store returns (notebook 02).

:class:`StoreMemoryStore` is :class:`~memcost.retrieval.search.MemoryStore` over a
:mod:`memcost.vectorstore` store (pgvector): ``get(user)`` gives a
:class:`~memcost.memory.backends.StoreUserIndex` whose table is the user's active facts from
``facts.parquet``. :func:`search_quality` measures, for this run's questions, how many of the
``k`` facts asked for the store's search returns and its recall@k against exact search within
the user: on a shared pgvector table with ``hnsw.iterative_scan = off`` the user filter runs
after the index scan, and a question can come back with fewer than ``k`` facts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from memcost.memory.backends import StoreUserIndex, user_tables
from memcost.memory.facts import read_facts
from memcost.memory.store import IndexMismatch, recall_at_k
from memcost.paths import DatasetPaths
from memcost.retrieval.search import MemoryStore
from memcost.vectorstore.base import VectorStore


class StoreMemoryStore(MemoryStore):
    """The dataset's users' facts in ``store`` (a user not built there is an error naming
    notebook 01). The embedding model is not recorded in the store: notebooks 01 and 02 must
    use the same one, as with FAISS."""

    def __init__(self, ds: DatasetPaths, store: VectorStore, *,
                 embedding_model: str | None = None):
        super().__init__(ds, embedding_model=embedding_model)
        self.vector_store = store
        facts = read_facts(ds)
        assert facts is not None
        self._facts = facts
        self._loaded_store: dict[str, StoreUserIndex] = {}

    def get(self, user: str) -> StoreUserIndex:  # type: ignore[override]
        if user not in self._loaded_store:
            if not self.vector_store.is_built(user):
                raise IndexMismatch(
                    f"memory of user {user!r} is not in the {self.vector_store.name} store; "
                    "run notebooks/01_extract_facts.ipynb with the same vector_store settings")
            table = user_tables(self._facts, [user])[user]
            self._loaded_store[user] = StoreUserIndex(
                user, self.vector_store, table, {"vector_store": self.vector_store.name})
        return self._loaded_store[user]

    def vectors(self, user: str) -> np.ndarray:
        if user not in self._vectors:
            self._vectors[user] = self.get(user).vectors()
        return self._vectors[user]


def search_quality(store: MemoryStore, users: Sequence[str], vectors: np.ndarray, *, k: int,
                   ef_values: Sequence[int]) -> pd.DataFrame:
    """Per ``ef_search``: questions, facts returned of ``k`` (mean, min, share of questions
    with every fact a user has up to ``k``), recall@k against exact search within the user."""
    rows = []
    for ef in ef_values:
        returned, wanted, approx, exact = [], [], [], []
        for user, vector in zip(users, vectors, strict=True):
            idx = store.get(user)
            scores, found = idx.search(vector, k, ef_search=ef)
            exact_scores, _ = idx.exact_search(vector, k)
            returned.append(int((found[0] >= 0).sum()))
            wanted.append(min(k, len(idx)))
            approx.append(scores[0])
            exact.append(exact_scores[0])
        got, want = np.array(returned), np.array(wanted)
        rows.append({
            "ef_search": int(ef), "questions": len(got), "k": k,
            "returned_mean": round(float(got.mean()), 2) if len(got) else None,
            "returned_min": int(got.min()) if len(got) else None,
            "all_returned": round(float((got >= want).mean()), 3) if len(got) else None,
            f"recall@{k}": round(recall_at_k(np.array(approx), np.array(exact)), 3)
            if len(got) else None,
        })
    return pd.DataFrame(rows)
