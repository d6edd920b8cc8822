"""The one vector store interface of the paper's memory (paper §3.1): FAISS here, a plugin's store
(pgvector) by the name ``vector_store`` gives (docs/architecture.md, "Vector stores")."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

HNSW_M = 16  # §3.1: pgvector m
EF_CONSTRUCTION = 64  # §3.1: pgvector ef_construction
EF_SEARCH = 40  # pgvector's default hnsw.ef_search


class IndexMismatch(ValueError): ...


@dataclass(frozen=True)
class Change:
    """One applied decision of the update phase as a store replays it."""

    event: str
    fact_id: str | None = None
    target: str | None = None


def as_matrix(vectors: np.ndarray, dims: int | None = None) -> np.ndarray:
    arr = np.ascontiguousarray(vectors, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2:
        raise ValueError(f"expected a 2-d array of vectors, got shape {arr.shape}")
    if dims is not None and arr.shape[1] != dims:
        raise ValueError(f"vectors have {arr.shape[1]} dimensions, the store {dims}")
    return arr


def check_facts(user: str, fact_ids: Sequence[str], vectors: np.ndarray, dims: int) -> np.ndarray:
    """The vectors as a matrix, one distinct id per row (the error names the user)."""
    x = as_matrix(vectors, dims) if len(fact_ids) else np.zeros((0, dims), np.float32)
    if len(x) != len(fact_ids):
        raise ValueError(f"user {user!r}: {len(x)} vectors for {len(fact_ids)} facts")
    if len(set(fact_ids)) != len(fact_ids):
        raise ValueError(f"user {user!r}: duplicate fact ids")
    return x


@dataclass
class SearchResult:
    """Top-``k`` of a batch of queries, ``(queries, k)``; missing results are ``-inf`` / ``""``."""

    scores: np.ndarray
    fact_ids: np.ndarray

    @classmethod
    def empty(cls, queries: int, k: int) -> SearchResult:
        shape = (queries, max(int(k), 0))
        return cls(np.full(shape, -np.inf, np.float32), np.full(shape, "", dtype=object))

    @property
    def returned(self) -> np.ndarray:
        return (self.fact_ids != "").sum(axis=1)


class VectorStore(ABC):
    """Per-user facts with HNSW search (``m``, ``ef_construction``: the paper's settings)."""

    name: str = "store"
    replays_changes = False  # True: write_user replays the update phase as single writes
    learns_dims = False  # True: dims 0 means "from the first vectors built or read"
    uses_run_server = False  # True: it keeps its data in the run's private database server

    def __init__(self, dims: int, *, m: int = HNSW_M, ef_construction: int = EF_CONSTRUCTION):
        if dims <= 0 and not (dims == 0 and self.learns_dims):
            raise ValueError("dims must be positive")
        self.dims = int(dims)
        self.m = int(m)
        self.ef_construction = int(ef_construction)

    @classmethod
    @abstractmethod
    def open(
        cls, dims: int, *, run: Any, dataset: str, m: int, ef_construction: int, **options: Any
    ) -> VectorStore:
        """The store of ``dataset``'s facts in the run; ``options``: the run's ``pgvector_*``
        parameters without the prefix."""

    @abstractmethod
    def build_user(self, user: str, fact_ids: Sequence[str], vectors: np.ndarray) -> None:
        """Replace ``user``'s facts, visible all at once with the done marker."""

    def build_users(self, facts: Mapping[str, tuple[Sequence[str], np.ndarray]]) -> None:
        for user, (fact_ids, vectors) in facts.items():
            self.build_user(user, fact_ids, vectors)

    def write_user(
        self,
        user: str,
        fact_ids: Sequence[str],
        vectors: np.ndarray,
        *,
        changes: Sequence[Change] = (),
        vector_of: Callable[[str], np.ndarray] | None = None,
    ) -> None:
        """Store a finished user's active facts: replayed as the update phase made them in one
        transaction (``replays_changes``, ``vector_of`` giving a fact's vector), else built at
        once."""
        if not self.replays_changes:
            self.build_user(user, fact_ids, vectors)
            return
        if vector_of is None:
            raise ValueError("replaying the update phase needs vector_of")
        with self.transaction():
            self.build_user(user, [], np.zeros((0, self.dims), np.float32))
            added: list[str] = []

            def flush() -> None:
                if added:
                    self.add(user, list(added), np.stack([vector_of(f) for f in added]))
                    added.clear()

            for change in changes:
                if change.event == "ADD" and change.fact_id:
                    added.append(change.fact_id)
                elif change.event == "UPDATE":
                    flush()
                    self.apply(
                        user,
                        upserts=([change.fact_id], vector_of(change.fact_id)[None, :]),
                        deletes=[change.target],
                    )
                elif change.event == "DELETE":
                    flush()
                    self.apply(user, deletes=[change.target])
            flush()
            stored = sorted(self.vectors(user)[0])
            if stored != sorted(fact_ids):
                raise IndexMismatch(
                    f"user {user!r}: the replayed updates left {len(stored)} facts "
                    f"in the store, the memory has {len(fact_ids)} active facts"
                )

    @abstractmethod
    def is_built(self, user: str) -> bool: ...

    @abstractmethod
    def users(self) -> list[str]: ...

    @abstractmethod
    def apply(
        self,
        user: str,
        *,
        upserts: tuple[Sequence[str], np.ndarray] | None = None,
        deletes: Sequence[str] = (),
    ) -> None:
        """Upsert and delete facts of a built user in one step (an unknown id is an error that
        changes nothing)."""

    def add(self, user: str, fact_ids: Sequence[str], vectors: np.ndarray) -> None:
        self.apply(user, upserts=(fact_ids, vectors))

    def update(self, user: str, fact_id: str, vector: np.ndarray) -> None:
        self.apply(user, upserts=([fact_id], as_matrix(vector, self.dims)))

    def delete(self, user: str, fact_ids: Sequence[str]) -> None:
        self.apply(user, deletes=fact_ids)

    @abstractmethod
    def search(
        self, user: str, queries: np.ndarray, k: int, *, ef_search: int = EF_SEARCH
    ) -> SearchResult: ...

    @abstractmethod
    def exact_search(self, user: str, queries: np.ndarray, k: int) -> SearchResult:
        """Exact top-``k`` (what HNSW recall is measured against)."""

    @abstractmethod
    def vectors(self, user: str) -> tuple[list[str], np.ndarray]: ...

    @abstractmethod
    def count(self, user: str | None = None) -> int: ...

    def versions(self) -> dict[str, Any]:
        """What the manifest records about the store."""
        return {
            "vector_store": self.name,
            "hnsw_m": self.m,
            "ef_construction": self.ef_construction,
            "dims": self.dims,
        }

    @abstractmethod
    def describe(self) -> str: ...

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        """Writes visible together (nested: savepoints); without transactions, the block
        as it is."""
        return contextlib.nullcontext()

    def close(self) -> None:  # noqa: B027 - a store without connections has nothing to do
        ...

    def __enter__(self) -> VectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
