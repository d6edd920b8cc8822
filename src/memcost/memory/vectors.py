"""The vector store interface of the paper's memory (paper §3.1): FAISS files here, a plugin's
store (pgvector, the paper's own) by the name the run's ``vector_store`` gives.

A store keeps, for each user, a set of facts (``fact_id`` -> unit vector) and answers a user's
query with that user's most similar facts only. Scores are cosine similarities (inner products
of L2-normalised vectors), best first; a search that finds fewer than ``k`` facts pads its rows
with ``""`` ids and ``-inf`` scores, so "returned fewer than asked" stays visible.

Writes follow one contract in every store: :meth:`VectorStore.build_user` replaces a user's
facts as a whole and makes them visible at once (a FAISS file renamed into place, one SQL
transaction that also writes the user's done marker), so a run killed in the middle of a user
leaves the previous state, never half of the new one; :meth:`VectorStore.is_built` is true
only for users whose build finished. :meth:`VectorStore.apply` adds, updates and deletes facts
of a built user, all or nothing. :meth:`VectorStore.write_user` is what the memory builder
calls for a finished user: a store that keeps its index incrementally (pgvector) replays the
update phase's changes in one transaction, others build the final facts at once.

This is the only store interface: the memory builder (notebook 01) writes through it and
retrieval (notebook 02) reads through it, whichever store the run's ``vector_store`` names.
"""

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


class IndexMismatch(ValueError):
    """A user's stored facts are missing, or disagree with what the memory says they are."""


@dataclass(frozen=True)
class Change:
    """One applied decision of the update phase, as the store replays it: ``ADD`` writes
    ``fact_id``, ``UPDATE`` replaces ``target`` with ``fact_id``, ``DELETE`` removes ``target``
    (``NOOP`` changes nothing)."""

    event: str
    fact_id: str | None = None
    target: str | None = None


def as_matrix(vectors: np.ndarray, dims: int | None = None) -> np.ndarray:
    """``vectors`` as a C-contiguous float32 ``(n, dims)`` array (one vector: one row)."""
    arr = np.ascontiguousarray(vectors, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2:
        raise ValueError(f"expected a 2-d array of vectors, got shape {arr.shape}")
    if dims is not None and arr.shape[1] != dims:
        raise ValueError(f"vectors have {arr.shape[1]} dimensions, the store {dims}")
    return arr


def check_facts(user: str, fact_ids: Sequence[str], vectors: np.ndarray, dims: int) -> np.ndarray:
    """The vectors as a matrix, after checking one distinct id per row (the error names the
    user). Fact ids are unique across users too (``<user>:f<n>``)."""
    x = as_matrix(vectors, dims) if len(fact_ids) else np.zeros((0, dims), np.float32)
    if len(x) != len(fact_ids):
        raise ValueError(f"user {user!r}: {len(x)} vectors for {len(fact_ids)} facts")
    if len(set(fact_ids)) != len(fact_ids):
        raise ValueError(f"user {user!r}: duplicate fact ids")
    return x


@dataclass
class SearchResult:
    """Top-``k`` of a batch of queries: ``scores`` float32 and ``fact_ids`` (str), both
    ``(queries, k)``; missing results are ``-inf`` / ``""``."""

    scores: np.ndarray
    fact_ids: np.ndarray

    @classmethod
    def empty(cls, queries: int, k: int) -> SearchResult:
        shape = (queries, max(int(k), 0))
        return cls(np.full(shape, -np.inf, np.float32), np.full(shape, "", dtype=object))

    @property
    def returned(self) -> np.ndarray:
        """Facts found per query (``k`` unless the search came back short)."""
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
        """The store of ``dataset``'s facts in the run directory ``run`` (RunPaths); ``options``
        are the run's ``pgvector_*`` parameters, without the prefix (a store ignores those it
        does not take)."""

    @abstractmethod
    def build_user(self, user: str, fact_ids: Sequence[str], vectors: np.ndarray) -> None:
        """Replace ``user``'s facts with these, visible all at once with the done marker."""

    def build_users(self, facts: Mapping[str, tuple[Sequence[str], np.ndarray]]) -> None:
        """Build many users (a store may load them in bulk); each user is still all or none."""
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
        """Store a finished user's active facts (row ``i`` of ``vectors`` is ``fact_ids[i]``).

        A store with ``replays_changes`` writes them as the update phase made them, in one
        transaction: an empty build, then each ADD an insert, each UPDATE the superseded fact
        deleted and the merged one inserted, each DELETE a delete (``vector_of`` gives a fact's
        vector), and checks that it ends with ``fact_ids``. Others build ``fact_ids`` at once.
        """
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
    def is_built(self, user: str) -> bool:
        """``user``'s build finished (a killed build leaves this false and no rows)."""

    @abstractmethod
    def users(self) -> list[str]:
        """The built users, sorted."""

    @abstractmethod
    def apply(
        self,
        user: str,
        *,
        upserts: tuple[Sequence[str], np.ndarray] | None = None,
        deletes: Sequence[str] = (),
    ) -> None:
        """Add or update the ``upserts`` facts and delete ``deletes`` of a built user, all in
        one step (an unknown id to delete is an error that changes nothing)."""

    def add(self, user: str, fact_ids: Sequence[str], vectors: np.ndarray) -> None:
        self.apply(user, upserts=(fact_ids, vectors))

    def update(self, user: str, fact_id: str, vector: np.ndarray) -> None:
        self.apply(user, upserts=([fact_id], as_matrix(vector, self.dims)))

    def delete(self, user: str, fact_ids: Sequence[str]) -> None:
        self.apply(user, deletes=fact_ids)

    @abstractmethod
    def search(
        self, user: str, queries: np.ndarray, k: int, *, ef_search: int = EF_SEARCH
    ) -> SearchResult:
        """HNSW top-``k`` among ``user``'s facts for each query row."""

    @abstractmethod
    def exact_search(self, user: str, queries: np.ndarray, k: int) -> SearchResult:
        """Exact top-``k`` among ``user``'s facts (the reference recall is measured against)."""

    @abstractmethod
    def vectors(self, user: str) -> tuple[list[str], np.ndarray]:
        """``user``'s fact ids (sorted) and their vectors, row for row."""

    @abstractmethod
    def count(self, user: str | None = None) -> int:
        """Facts of ``user`` (``None``: of every built user)."""

    def versions(self) -> dict[str, Any]:
        """What the manifest records about the store (system, versions, settings)."""
        return {
            "vector_store": self.name,
            "hnsw_m": self.m,
            "ef_construction": self.ef_construction,
            "dims": self.dims,
        }

    @abstractmethod
    def describe(self) -> str:
        """One line for a notebook: which store, which versions, which layout."""

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        """A block whose writes become visible together (nested blocks: savepoints); a store
        without transactions runs the block as it is."""
        return contextlib.nullcontext()

    def close(self) -> None:  # noqa: B027 - a store without connections has nothing to do
        """Release connections (the data stays)."""

    def __enter__(self) -> VectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
