"""The FAISS store: one ``IndexHNSWFlat`` per user, as files in a folder or in memory only.

With a ``folder`` (notebook 01 gives ``<ds>/memory/index/``) each built user is written to
``<user>.faiss`` + ``<user>.parquet`` (:mod:`.faiss_index`) before the build returns, and a
user not loaded yet is read back from them, checked, on first use; without one (a benchmark, a
test) the indexes live in memory. A user's new index replaces the old one only once it is
complete, and :meth:`FaissStore.apply` rebuilds the user's index from the changed fact set:
HNSW graphs in FAISS cannot delete, and a user holds a few hundred facts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import faiss
import numpy as np

from memcost.vectorstore import faiss_index
from memcost.vectorstore.base import (
    EF_SEARCH,
    IndexMismatch,
    SearchResult,
    VectorStore,
    as_matrix,
    check_facts,
)


@dataclass
class _UserIndex:
    fact_ids: list[str]
    vectors: np.ndarray
    index: faiss.IndexIDMap2
    ef: int | None = None
    position: dict[int, int] = field(default_factory=dict)  # faiss id -> row
    flat: faiss.IndexFlatIP | None = None  # the exact index, made on the first exact search

    def __post_init__(self) -> None:
        self.position = {faiss_index.fact_key(f): i for i, f in enumerate(self.fact_ids)}


class FaissStore(VectorStore):
    """Per-user FAISS HNSW indexes (inner product on unit vectors = cosine)."""

    name = "faiss"
    learns_dims = True  # a notebook reading files need not know the embedding's dimensions

    def __init__(self, dims: int, *, folder: str | Path | None = None, **settings: int):
        super().__init__(dims, **settings)
        self.folder = Path(folder) if folder is not None else None
        self._users: dict[str, _UserIndex] = {}

    def _learn(self, dims: int) -> None:
        if not self.dims and dims:
            self.dims = int(dims)

    def build_user(self, user: str, fact_ids: Sequence[str], vectors: np.ndarray) -> None:
        shape = np.shape(vectors)
        self._learn(shape[1] if len(shape) == 2 else 0)
        if not self.dims:
            raise ValueError(
                f"user {user!r}: unknown vector dimensions (no facts, and the "
                "store was opened without dims)"
            )
        x = check_facts(user, fact_ids, vectors, self.dims)
        if self.folder is not None:
            files = faiss_index.write_user_files(
                self.folder, user, list(fact_ids), x, m=self.m, ef_construction=self.ef_construction
            )
            self._users[user] = _UserIndex(files.fact_ids, files.vectors, files.index)
            return
        keys = np.array([faiss_index.fact_key(f) for f in fact_ids], dtype=np.int64)
        index = faiss_index.build_hnsw(x, keys, m=self.m, ef_construction=self.ef_construction)
        self._users[user] = _UserIndex(list(fact_ids), x, index)

    def is_built(self, user: str) -> bool:
        if user in self._users:
            return True
        if self.folder is None:
            return False
        return all(p.is_file() for p in faiss_index.index_paths(self.folder, user))

    def users(self) -> list[str]:
        on_disk = faiss_index.stored_users(self.folder) if self.folder is not None else []
        return sorted(set(self._users) | set(on_disk))

    def _get(self, user: str) -> _UserIndex:
        if user not in self._users:
            if self.folder is None:
                raise IndexMismatch(f"user {user!r} has no built index in the FAISS store")
            files = faiss_index.read_user_files(self.folder, user)
            self._learn(files.index.d)
            if files.index.d != self.dims:
                raise IndexMismatch(
                    f"memory index of user {user!r} has {files.index.d} dimensions, the "
                    f"questions' embeddings {self.dims}: use the same embedding_model in "
                    "notebooks 01 and 02"
                )
            self._users[user] = _UserIndex(files.fact_ids, files.vectors, files.index)
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

    def _result(self, facts: _UserIndex, scores: np.ndarray, keys: np.ndarray) -> SearchResult:
        names = np.array(facts.fact_ids + [""], dtype=object)
        missing = len(facts.fact_ids)
        rows = (
            np.vectorize(lambda key: facts.position.get(int(key), missing), otypes=[np.int64])(keys)
            if keys.size
            else keys.astype(np.int64)
        )
        found = rows < missing
        return SearchResult(np.where(found, scores, -np.inf).astype(np.float32), names[rows])

    def search(
        self, user: str, queries: np.ndarray, k: int, *, ef_search: int = EF_SEARCH
    ) -> SearchResult:
        facts = self._get(user)
        q = as_matrix(queries, self.dims)
        if not facts.fact_ids or k <= 0:
            return SearchResult.empty(len(q), k)
        if facts.ef != ef_search:
            faiss.downcast_index(facts.index.index).hnsw.efSearch = max(int(ef_search), 1)
            facts.ef = ef_search
        with faiss_index.omp_threads(1 if len(q) < faiss_index.SINGLE_THREAD_BELOW else None):
            scores, keys = facts.index.search(q, int(k))
        return self._result(facts, scores, keys)

    def exact_search(self, user: str, queries: np.ndarray, k: int) -> SearchResult:
        facts = self._get(user)
        q = as_matrix(queries, self.dims)
        if not facts.fact_ids or k <= 0:
            return SearchResult.empty(len(q), k)
        if facts.flat is None:
            facts.flat = faiss_index.flat_index(facts.vectors)
        scores, rows = faiss_index.exact_search(facts.vectors, q, k, flat=facts.flat)
        names = np.array(facts.fact_ids + [""], dtype=object)
        rows = np.where(rows >= 0, rows, len(facts.fact_ids))
        found = rows < len(facts.fact_ids)
        return SearchResult(np.where(found, scores, -np.inf).astype(np.float32), names[rows])

    def vectors(self, user: str) -> tuple[list[str], np.ndarray]:
        facts = self._get(user)
        order = np.argsort(np.array(facts.fact_ids, dtype=object), kind="stable")
        return [facts.fact_ids[i] for i in order], facts.vectors[order]

    def count(self, user: str | None = None) -> int:
        if user is not None:
            return len(self._get(user).fact_ids)
        return sum(len(self._get(u).fact_ids) for u in self.users())

    def versions(self) -> dict:
        return {**super().versions(), "faiss": faiss.__version__, "layout": "per_user"}

    def describe(self) -> str:
        where = f"files in {self.folder}" if self.folder is not None else "in memory"
        return f"FAISS {faiss.__version__}: one IndexHNSWFlat per user ({where})"
