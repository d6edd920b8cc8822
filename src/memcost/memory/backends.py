"""The memory's vector store chosen by ``vector_store`` (notebooks 01 and 02): FAISS or pgvector.

With ``vector_store = "faiss"`` (the default) nothing here is used: notebook 01 writes one FAISS
index file per user (:mod:`memcost.memory.store`). With ``"pgvector"`` the facts live in
PostgreSQL with pgvector's HNSW index (the paper's store, :mod:`memcost.vectorstore`):

- :class:`StoreSession` opens the run's store once per notebook (the private server inside
  ``<run dir>/pgvector`` is started, or ``pgvector_dsn`` is used) and closes it (stopping the
  private server, its data kept for a resumed run) when the notebook is done;
- :class:`StoreIndexWriter` is what :class:`~memcost.memory.build.MemoryBuilder` writes a
  finished user through: in ONE transaction, the user's marker, every fact the update phase
  added, and each UPDATE (the superseded row deleted, the merged fact inserted) and DELETE
  replayed as SQL through :meth:`~memcost.vectorstore.base.VectorStore.apply`; the user's
  ``done.json`` is written after the commit, so a kill leaves no half-written rows visible;
- :class:`StoreMemoryBuilder` is the builder with that writer, and done-ness read from the store;
- :class:`StoreUserIndex` gives retrieval the methods of a loaded FAISS
  :class:`~memcost.memory.store.UserIndex` (``search``, ``exact_search``, ``timed_search``,
  ``vectors``, ``table``) over a user's rows in the store.
"""

from __future__ import annotations

import atexit
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import faiss
import numpy as np
import pandas as pd

from memcost.memory.build import MemoryBuilder, MemoryConfig, UserState
from memcost.memory.store import EF_SEARCH, IndexMismatch
from memcost.paths import DatasetPaths, RunPaths
from memcost.vectorstore.base import STORES, VectorStore
from memcost.vectorstore.factory import manifest_entry, opened_store


def store_table(dataset: str, layout: str) -> str:
    """The table (name prefix) of one dataset's facts: datasets and layouts never share one."""
    return f"{dataset}_{layout}"


def faiss_entry(config: MemoryConfig) -> dict[str, Any]:
    """What the manifest records about the default store (FAISS files per user)."""
    return {"vector_store": "faiss", "layout": "per_user", "faiss": faiss.__version__,
            "hnsw_m": config.hnsw_m, "ef_construction": config.ef_construction}


class StoreSession:
    """The run's vector store for one dataset, open until :meth:`close` (or interpreter exit).

    ``store`` is ``None`` for FAISS: the notebooks keep the FAISS files' own path."""

    def __init__(self, run: RunPaths, dataset: str, dims: int, *, vector_store: str = "faiss",
                 pgvector_dsn: str = "", layout: str = "shared", iterative_scan: str = "off",
                 m: int = 16, ef_construction: int = 64):
        if vector_store not in STORES:
            raise ValueError(f"vector_store must be one of {STORES}, not {vector_store!r}")
        self.name = vector_store
        self.store: VectorStore | None = None
        self._stack = contextlib.ExitStack()
        if vector_store == "pgvector":
            self.store = self._stack.enter_context(opened_store(
                vector_store, dims, run_dir=run.root, pgvector_dsn=pgvector_dsn, layout=layout,
                table=store_table(dataset, layout), iterative_scan=iterative_scan, m=m,
                ef_construction=ef_construction))
            atexit.register(self.close)

    def manifest_entry(self, config: MemoryConfig | None) -> dict[str, Any]:
        if self.store is None:
            return faiss_entry(config or MemoryConfig(dataset=""))
        return manifest_entry(self.store)

    def describe(self) -> str:
        """One line for a notebook: which store, which versions, which layout."""
        if self.store is None:
            return f"FAISS {faiss.__version__}: one IndexHNSWFlat file per user"
        v = manifest_entry(self.store)
        server = (v.get("server") or {}).get("server", "")
        return (f"PostgreSQL {v['postgresql']} + pgvector {v['pgvector']} ({server} server), "
                f"layout {v['layout']}, iterative_scan {v['iterative_scan']}")

    def close(self) -> None:
        self._stack.close()


class StoreIndexWriter:
    """The builder's ``store``: writes a finished user's active facts into a vector store."""

    def __init__(self, store: VectorStore):
        self.store = store
        self.state: UserState | None = None  # the user being finished (set by the builder)

    def is_built(self, user: str) -> bool:
        return self.store.is_built(user)

    def build(self, user: str, vectors: np.ndarray, table: pd.DataFrame, **_: Any) -> None:
        """The user's rows and marker in one transaction (see the module's docstring)."""
        state = self.state
        if state is None or state.plan.user != user:
            raise RuntimeError(f"user {user!r}: no build state to write from")
        memory, dims = state.memory, self.store.dims
        with self.store.transaction():
            self.store.build_user(user, [], np.zeros((0, dims), np.float32))
            added: list[str] = []

            def flush() -> None:
                if added:
                    self.store.add(user, list(added), np.stack([memory.vector(f) for f in added]))
                    added.clear()

            for record in state.updates:
                event, new, target = record["decision"], record["fact_id"], record["target_fact_id"]
                if event == "ADD":
                    added.append(new)
                elif event == "UPDATE":
                    flush()
                    self.store.apply(user, upserts=([new], memory.vector(new)[None, :]),
                                     deletes=[target])
                elif event == "DELETE":
                    flush()
                    self.store.apply(user, deletes=[target])
            flush()
            stored = sorted(self.store.vectors(user)[0])
            if stored != sorted(table["fact_id"]):
                raise RuntimeError(f"user {user!r}: the replayed updates left {len(stored)} facts "
                                   f"in the store, the memory has {len(table)} active facts")


class StoreMemoryBuilder(MemoryBuilder):
    """:class:`MemoryBuilder` writing each user into ``store``; a user is done when its
    ``done.json`` matches and the store holds its committed build."""

    def __init__(self, client: Any, ds: DatasetPaths, config: MemoryConfig, store: VectorStore):
        super().__init__(client, ds, config)
        self.writer = StoreIndexWriter(store)
        self.store = self.writer  # type: ignore[assignment]

    def index_built(self, user: str) -> bool:
        return self.writer.is_built(user)

    def finish(self, state: UserState, dims: int,
               on_user: Callable[[str], None] | None = None) -> None:
        self.writer.state = state
        try:
            super().finish(state, dims, on_user)
        finally:
            self.writer.state = None


@dataclass
class StoreUserIndex:
    """A user's facts in a vector store with the methods retrieval uses on a FAISS
    :class:`~memcost.memory.store.UserIndex`; rows index ``table`` (the user's active facts)."""

    user: str
    store: VectorStore
    table: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)
    _row_of: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.table = self.table.reset_index(drop=True)
        self._row_of = {f: i for i, f in enumerate(self.table["fact_id"].tolist())}
        stored = self.store.count(self.user)
        if stored != len(self.table):
            raise IndexMismatch(
                f"memory of user {self.user!r}: the {self.store.name} store holds {stored} facts, "
                f"facts.parquet {len(self.table)} active ones; rebuild it with "
                "notebooks/01_extract_facts.ipynb")

    @property
    def dims(self) -> int:
        return self.store.dims

    def __len__(self) -> int:
        return len(self.table)

    def _rows(self, fact_ids: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = np.array([[self._row_of.get(f, -1) if f else -1 for f in r] for r in fact_ids],
                        dtype=np.int64).reshape(fact_ids.shape)
        return np.where(rows >= 0, scores, -np.inf).astype(np.float32), rows

    def search(self, queries: np.ndarray, k: int, *, ef_search: int = EF_SEARCH
               ) -> tuple[np.ndarray, np.ndarray]:
        """HNSW top-``k`` in the store: ``(scores, table rows)``, ``-1`` where it came back short."""
        res = self.store.search(self.user, queries, k, ef_search=ef_search)
        return self._rows(res.fact_ids, res.scores)

    def exact_search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        res = self.store.exact_search(self.user, queries, k)
        return self._rows(res.fact_ids, res.scores)

    def timed_search(self, query: np.ndarray, k: int, *, ef_search: int = EF_SEARCH
                     ) -> tuple[np.ndarray, np.ndarray, float]:
        t0 = time.perf_counter()
        scores, rows = self.search(query, k, ef_search=ef_search)
        return scores[0], rows[0], time.perf_counter() - t0

    def vectors(self) -> np.ndarray:
        """The stored vectors in table order."""
        ids, x = self.store.vectors(self.user)
        where = {f: i for i, f in enumerate(ids)}
        if not len(self.table):
            return np.zeros((0, self.dims), np.float32)
        return x[[where[f] for f in self.table["fact_id"]]]


def user_tables(facts: pd.DataFrame, users: Sequence[str]) -> dict[str, pd.DataFrame]:
    """Each user's active facts, in ``facts.parquet`` order (empty tables for users without)."""
    active = facts.loc[facts["status"] == "active"]
    groups = {str(u): g for u, g in active.groupby("conversation_id", sort=False)}
    return {u: groups.get(u, active.iloc[0:0]).reset_index(drop=True) for u in users}
