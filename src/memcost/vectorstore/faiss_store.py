"""The FAISS store: one ``IndexHNSWFlat`` per user, held in memory.

It wraps the per-user index functions of :mod:`memcost.memory.store` (the ones notebook 01 writes to
disk) behind :class:`~memcost.vectorstore.base.VectorStore`, so a benchmark or a test can run
the same calls against FAISS and pgvector. A user's new index replaces the old one only once it
is complete, and :meth:`FaissStore.apply` rebuilds the user's index from the changed fact set:
HNSW graphs in FAISS cannot delete, and a user holds a few hundred facts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import faiss
import numpy as np

from memcost.memory import store as index_mod
from memcost.vectorstore.base import (
    EF_SEARCH,
    SearchResult,
    VectorStore,
    as_matrix,
    check_facts,
)


@dataclass
class _UserFacts:
    fact_ids: list[str]
    vectors: np.ndarray
    index: faiss.IndexIDMap2


class FaissStore(VectorStore):
    """Per-user FAISS HNSW indexes (inner product on unit vectors = cosine)."""

    name = "faiss"

    def __init__(self, dims: int, **settings: int):
        super().__init__(dims, **settings)
        self._users: dict[str, _UserFacts] = {}
        self._ef: dict[str, int] = {}

    def _make(self, fact_ids: list[str], x: np.ndarray) -> _UserFacts:
        keys = np.arange(len(fact_ids), dtype=np.int64)
        index = index_mod.build_hnsw(x, keys, m=self.m, ef_construction=self.ef_construction)
        return _UserFacts(list(fact_ids), x, index)

    def build_user(self, user: str, fact_ids: Sequence[str], vectors: np.ndarray) -> None:
        x = check_facts(user, fact_ids, vectors, self.dims)
        self._users[user] = self._make(list(fact_ids), x)
        self._ef.pop(user, None)

    def is_built(self, user: str) -> bool:
        return user in self._users

    def users(self) -> list[str]:
        return sorted(self._users)

    def _get(self, user: str) -> _UserFacts:
        if user not in self._users:
            raise KeyError(f"user {user!r} has no built index in the FAISS store")
        return self._users[user]

    def apply(self, user, *, upserts=None, deletes=()) -> None:  # type: ignore[override]
        facts = self._get(user)
        rows = dict(zip(facts.fact_ids, facts.vectors, strict=True))
        missing = [f for f in deletes if f not in rows]
        if missing:
            raise KeyError(f"user {user!r}: no facts {missing[:5]} to delete")
        if upserts is not None:
            ids, vecs = upserts
            x = check_facts(user, ids, vecs, self.dims)
            rows.update(zip(ids, x, strict=True))
        for fact_id in deletes:
            del rows[fact_id]
        ids = list(rows)
        x = np.stack(list(rows.values())) if ids else np.zeros((0, self.dims), np.float32)
        self.build_user(user, ids, x)

    def _result(self, facts: _UserFacts, scores: np.ndarray, rows: np.ndarray) -> SearchResult:
        names = np.array(facts.fact_ids + [""], dtype=object)
        rows = np.where(rows >= 0, rows, len(facts.fact_ids))
        found = rows < len(facts.fact_ids)
        return SearchResult(np.where(found, scores, -np.inf).astype(np.float32), names[rows])

    def search(self, user: str, queries: np.ndarray, k: int, *, ef_search: int = EF_SEARCH
               ) -> SearchResult:
        facts = self._get(user)
        q = as_matrix(queries, self.dims)
        if not facts.fact_ids or k <= 0:
            return SearchResult.empty(len(q), k)
        if self._ef.get(user) != ef_search:
            faiss.downcast_index(facts.index.index).hnsw.efSearch = max(int(ef_search), 1)
            self._ef[user] = ef_search
        with index_mod.omp_threads(1 if len(q) < index_mod.SINGLE_THREAD_BELOW else None):
            scores, rows = facts.index.search(q, int(k))
        return self._result(facts, scores, rows)

    def exact_search(self, user: str, queries: np.ndarray, k: int) -> SearchResult:
        facts = self._get(user)
        q = as_matrix(queries, self.dims)
        if not facts.fact_ids or k <= 0:
            return SearchResult.empty(len(q), k)
        scores, rows = index_mod.exact_search(facts.vectors, q, k)
        return self._result(facts, scores, rows)

    def vectors(self, user: str) -> tuple[list[str], np.ndarray]:
        facts = self._get(user)
        order = np.argsort(np.array(facts.fact_ids, dtype=object), kind="stable")
        return [facts.fact_ids[i] for i in order], facts.vectors[order]

    def count(self, user: str | None = None) -> int:
        if user is not None:
            return len(self._get(user).fact_ids)
        return sum(len(f.fact_ids) for f in self._users.values())

    def versions(self) -> dict:
        return {**super().versions(), "faiss": faiss.__version__}
